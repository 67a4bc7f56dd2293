"""Whether batch i+1 is asked and checked while batch i trains.

``search.pipeline`` "auto" resolves to "on" for a live LLM (its answers overlap training)
and for the offline mutator in runs of three or more generations (its checks, seconds a
batch on a CPU, overlap training; with fewer, no batch would mutate a parent,
since the first two are written from scratch); "off" for a mutator object handed in. A
replay follows the recorded run, a resumed run its own config. Whatever was asked, a
strategy whose ``lookahead`` is 0 (it must see every outcome before it proposes again)
runs with the pipeline off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def resolve_pipeline(search: Any, llm: Any, *, lookahead: int, custom_mutator: bool,
                     saved: dict[str, Any] | None) -> str:
    """"on" or "off" for a run with these ``search`` and ``llm`` configs (see the module)."""
    if lookahead < 1:
        return "off"
    if search.pipeline != "auto":
        return str(search.pipeline)
    if saved is not None:
        return str(saved["search"].get("pipeline", "off"))
    from limen_jax.llm.factory import LIVE, resolve_mutator

    kind = resolve_mutator(llm.mutator, llm.models)
    if custom_mutator:
        return "off"
    if kind == "replay" and llm.replay_from:
        return _recorded_pipeline(Path(llm.replay_from))
    if kind == "offline":
        return "on" if search.iterations >= 2 else "off"
    return "on" if kind in LIVE else "off"


def _recorded_pipeline(src: Path) -> str:
    """The pipeline the replayed run recorded in its config.json ("off" when it has none),
    read as untrusted input (:mod:`limen_jax.run.reader`: a FIFO, a link out of the run or a
    file that is not JSON is one line, RunDirError)."""
    from limen_jax.run import reader

    root = src if src.is_dir() else src.parent
    if not reader.exists(root, "config.json"):
        return "off"
    recorded = reader.read_json(root, "config.json", "the replayed run's config")
    search = recorded.get("search") if isinstance(recorded, dict) else None
    pipeline = search.get("pipeline", "off") if isinstance(search, dict) else None
    if pipeline not in ("on", "off"):
        raise reader.RunDirError(f"{root / 'config.json'}: search.pipeline: neither \"on\" nor \"off\"")
    return str(pipeline)
