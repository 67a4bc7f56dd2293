"""The run directory: what a run leaves behind, written as it happens.

Layout::

    config.json          the EvolveConfig
    events.jsonl         append-only log: prompts, responses, programs, errors, scores
    state.json           checkpoint after each finished iteration (store, archive, spend);
                         state.json.prev, the one before it (what a damaged one falls back to)
    llm_cache.jsonl      every LLM answer, for resume and exact replay
    programs/<id>.py     every candidate's source
    best_interface.py    the best program so far, with a header of its scores
    progress.png, archive.png   plots

A directory may come from someone else: opening it refuses symlinks among the entries the
run writes, every write replaces a directory entry instead of following it, and a program
id must match :data:`limen_jax.run.reader.ID_PATTERN` before it becomes a file name.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from limen_jax.run.reader import (
    MAX_EVENT_LINE_BYTES,
    RunDirError,
    append_file,
    check_id,
    json_lines,
    own_dir,
    write_file,
)

# What a run writes at its top level: none of them may be a symlink (a planted one would
# carry a write, or a read, outside the directory).
OWN_ENTRIES = ("config.json", "config.json.prev", "state.json", "state.json.prev", "events.jsonl",
               "llm_cache.jsonl", "usage.json", "usage.json.prev", "best.json", "best.json.prev",
               "best_interface.py", "programs", "policies", "demos.npz")


def holds_config(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a run directory: it holds config.json, or the config.json.prev a
    kill mid-write leaves (checked without creating anything)."""
    return any((Path(path) / name).is_file() for name in ("config.json", "config.json.prev"))


class RunDir:
    """create: make the directory now; False leaves that to :meth:`create`, so that a run
    refused at start (a bad config, a missing key) leaves nothing behind."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self.path = Path(path)
        self.refuse_links()
        if create:
            self.create()
        self.notes: list[str] = []  # what opening the directory repaired, for the run to report
        self._heal_events()

    def refuse_links(self) -> None:
        """:class:`~limen_jax.run.reader.RunDirError` when an entry the run writes
        (:data:`OWN_ENTRIES`) is a symlink (a run never makes one), a file entry is not a
        regular file (a FIFO would hang the first read or append) or is a hard link shared
        with another name (an append or a repair would change that file too), or
        ``programs``/``policies`` is not a folder."""
        for name in OWN_ENTRIES:
            path = self.path / name
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise RunDirError(f"{path}: cannot read: {exc.strerror or exc}") from None
            if stat.S_ISLNK(st.st_mode):
                raise RunDirError(f"{path} is a symlink: a run directory holds none "
                                  "(it would read or write outside the directory)")
            if name in ("programs", "policies"):
                if not stat.S_ISDIR(st.st_mode):
                    raise RunDirError(f"{path} is not a folder: a run writes only into folders of its own")
            elif not stat.S_ISREG(st.st_mode):
                raise RunDirError(f"{path} is not a regular file (a FIFO, a folder or a device): "
                                  "a run directory holds none")
            elif st.st_nlink > 1:
                raise RunDirError(f"{path} is a hard link ({st.st_nlink} names): a run would write "
                                  "into the other names' file too; copy the run directory instead")

    def create(self) -> None:
        """Make the directory and its programs/ (ValueError, one line, when it cannot be)."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"cannot create the run directory {self.path}: {exc.strerror or exc}") from None
        own_dir(self.path, "programs")

    def _heal_events(self) -> None:
        """Cut a last line torn by a kill mid-write back to the last complete record, so that
        the next event starts a line of its own (the cut is logged)."""
        path = self.events_path
        if not path.exists() or path.stat().st_size == 0:
            return
        with open(path, "rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            data = fh.read()
            keep = data.rfind(b"\n") + 1
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
        torn = data[keep:]
        self.log("events_repaired", cut_bytes=len(torn), cut=torn[:200].decode("utf-8", "replace"))
        self.notes.append(f"{path} ended in a line torn by a kill; cut it back to the last complete record "
                          f"({len(torn)} bytes)")

    @property
    def events_path(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def cache_path(self) -> Path:
        return self.path / "llm_cache.jsonl"

    def log(self, event: str, **fields: Any) -> None:
        """Append one event; flushed and fsynced so a kill -9 loses nothing written."""
        record = {"event": event, "time": round(time.time(), 3), **fields}
        append_file(self.events_path, (json.dumps(record, default=_jsonable) + "\n").encode("utf-8"))

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        out = []
        with open(self.events_path, "rb") as fh:
            for line in json_lines(fh, MAX_EVENT_LINE_BYTES):
                if line is None:  # longer than any event the engine writes
                    continue
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut by a kill mid-write
                    continue
        return out

    def write_json(self, name: str, data: Any) -> None:
        """Atomic write: a kill leaves either the old or the new file, never half of one; the
        old one stays as ``<name>.prev``, the copy a damaged file falls back to."""
        path = self.path / name
        text = json.dumps(data, indent=1, default=_jsonable)
        if os.path.lexists(path):  # the entry moves (a link is not followed)
            os.replace(path, path.with_name(name + ".prev"))
        write_text_atomic(path, text)

    def read_json(self, name: str) -> Any:
        """The file's data; if it is missing or damaged but ``<name>.prev`` is good, that
        (noted in :attr:`notes`); None when neither exists. ValueError naming the files when
        what exists cannot be read."""
        from limen_jax.run.reader import read_json

        path = self.path / name
        damaged = []
        for candidate in (path, path.with_name(name + ".prev")):
            if not os.path.lexists(candidate):
                continue
            try:
                data = read_json(self.path, candidate.name, "cut mid-write")
            except RunDirError as exc:
                damaged.append(str(exc))
                continue
            if candidate != path:
                why = f"is damaged ({damaged[0]})" if damaged else "is missing (a kill between two writes)"
                self.notes.append(f"{path} {why}; using the previous copy {candidate.name}")
            return data
        if damaged:
            raise RunDirError(f"cannot read {' or '.join(damaged)}; the run cannot resume from it")
        return None

    def write_program(self, program_id: str, code: str) -> None:
        """``programs/<id>.py``; RunDirError for an unsafe id or a programs/ that is a link."""
        check_id(program_id, "program")
        write_file(own_dir(self.path, "programs"), f"{program_id}.py", code.encode("utf-8"))

    def write_artifacts(self, program_id: str, artifacts: dict[str, bytes]) -> None:
        """The checked program as the engine runs it: serialised StableHLO (``jax.export``)
        of each function, ``programs/<id>.<name>.stablehlo``; empty entries are skipped."""
        check_id(program_id, "program")
        for name, blob in artifacts.items():
            if blob:
                check_id(name, f"program {program_id}'s artifact")
                write_file(own_dir(self.path, "programs"), f"{program_id}.{name}.stablehlo", blob)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``path`` atomically, replacing its directory entry (a symlink there is not
    followed)."""
    write_file(path.parent, path.name, text.encode("utf-8"))


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return str(obj)
