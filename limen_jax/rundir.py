"""The run directory: what a run leaves behind, written as it happens.

Layout::

    config.json          the EvolveConfig
    events.jsonl         append-only log: prompts, responses, programs, errors, scores
    state.json           checkpoint after each finished iteration (store, archive, spend)
    llm_cache.jsonl      every LLM answer, for resume and exact replay
    programs/<id>.py     every candidate's source
    best_interface.py    the best program so far, with a header of its scores
    progress.png, archive.png   plots
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


class RunDir:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "programs").mkdir(exist_ok=True)

    @property
    def events_path(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def cache_path(self) -> Path:
        return self.path / "llm_cache.jsonl"

    def log(self, event: str, **fields: Any) -> None:
        """Append one event; flushed and fsynced so a kill -9 loses nothing written."""
        record = {"event": event, "time": round(time.time(), 3), **fields}
        with open(self.events_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, default=_jsonable) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        out = []
        with open(self.events_path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut by a kill mid-write
                    continue
        return out

    def write_json(self, name: str, data: Any) -> None:
        """Atomic write: a kill leaves either the old or the new file, never half of one."""
        write_text_atomic(self.path / name, json.dumps(data, indent=1, default=_jsonable))

    def read_json(self, name: str) -> Any:
        path = self.path / name
        return json.loads(path.read_text()) if path.exists() else None

    def write_program(self, program_id: str, code: str) -> None:
        write_text_atomic(self.path / "programs" / f"{program_id}.py", code)

    def write_artifacts(self, program_id: str, artifacts: dict[str, bytes]) -> None:
        """The checked program as the engine runs it: serialised StableHLO (``jax.export``)
        of each function, ``programs/<id>.<name>.stablehlo``; empty entries are skipped."""
        for name, blob in artifacts.items():
            if blob:
                path = self.path / "programs" / f"{program_id}.{name}.stablehlo"
                tmp = path.with_name(path.name + ".tmp")
                tmp.write_bytes(blob)
                os.replace(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return str(obj)
