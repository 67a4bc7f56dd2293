"""Reading a run directory as untrusted input: files only inside it, sizes and counts bounded,
field types checked before use.

A run directory may come from someone else (a colleague's run, a downloaded archive): a
file of it may be a symlink to anything on this machine, a FIFO, gigabytes long, or hold
values of any JSON type. Everything the viewer reads goes through here, so a bad directory
costs bounded work and ends in :class:`RunDirError` (one line) or a skipped, counted
event, never a hang, a traceback or a file from outside the directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class RunDirError(Exception):
    """A directory the viewer cannot show; the message is one line for the user."""


MAX_JSON_BYTES = 512 * 2**20  # state.json, config.json: a long real run's checkpoint is tens of MB
MAX_EVENTS_BYTES = 512 * 2**20  # events.jsonl
MAX_PROGRAM_BYTES = 2**20  # programs/<id>.py: a program is a few KB
MAX_ITERATIONS = 10_000  # iterations drawn: each costs a grid snapshot and a progress row
MAX_ISLANDS = 1_000
MAX_GRID_CELLS = 1_000_000  # islands x observation bins x reward-AST bins
MAX_POLICY_FILES = 1_000


def inside(root: Path, path: Path) -> Path | None:
    """``path`` resolved (symlinks followed), or None when it leaves ``root`` or is not a
    regular file: the one way the viewer opens a file of the run."""
    try:
        real = path.resolve(strict=True)
        if not real.is_relative_to(root.resolve(strict=True)) or not real.is_file():
            return None
    except (OSError, RuntimeError):  # missing, unreadable, or a symlink loop
        return None
    return real


def inside_dir(root: Path, path: Path) -> Path | None:
    """As :func:`inside`, for a folder."""
    try:
        real = path.resolve(strict=True)
        if not real.is_relative_to(root.resolve(strict=True)) or not real.is_dir():
            return None
    except (OSError, RuntimeError):
        return None
    return real


def exists(root: Path, name: str) -> bool:
    """Whether ``root/name`` is there at all (a link out of the run counts: it is refused later)."""
    return os.path.lexists(root / name)


def read_json(root: Path, name: str, what: str) -> Any:
    """``root/name`` parsed; :class:`RunDirError` for a file out of the run, too large or not JSON."""
    path = root / name
    real = inside(root, path)
    if real is None:
        raise RunDirError(f"{path} is not a file inside the run directory (a link out of it, or not a file)")
    if real.stat().st_size > MAX_JSON_BYTES:
        raise RunDirError(f"{path} is larger than {MAX_JSON_BYTES >> 20} MiB: not a run this viewer reads")
    try:
        return json.loads(real.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}): {what}") from None
    except RecursionError:
        raise RunDirError(f"{path} nests JSON too deeply: not a limen_jax file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path}: cannot read: {exc}") from None


def read_text(root: Path, path: Path, limit: int = MAX_PROGRAM_BYTES) -> str | None:
    """A small text file of the run (a program's source), or None when it is not one."""
    real = inside(root, path)
    if real is None or real.stat().st_size > limit:
        return None
    try:
        return real.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _int(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _opt(check: Any) -> Any:
    return lambda v: v is None or check(v)


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _move(m: Any) -> bool:
    return (isinstance(m, dict) and _int(m.get("target"), 0, MAX_ISLANDS) and isinstance(m.get("program_id"), str)
            and isinstance(m.get("cell"), list) and len(m["cell"]) == 2
            and all(_int(c, 0, MAX_GRID_CELLS) for c in m["cell"]) and _number(m.get("fitness")))


# The fields the viewer computes with, and the types it needs; any other field is shown as data.
_FIELDS: dict[str, Any] = {
    "id": lambda v: isinstance(v, str) or _int(v, 0, 2**63),
    "iteration": lambda v: _int(v, -1, MAX_ITERATIONS),
    "island": lambda v: _int(v, 0, MAX_ISLANDS),
    "parents": _opt(_str_list),
    "parent": _opt(lambda v: isinstance(v, str)),
    "operator": _opt(lambda v: isinstance(v, str)),
    "kind": _opt(lambda v: isinstance(v, str)),
    "role": _opt(lambda v: isinstance(v, str)),
    "program": _opt(lambda v: isinstance(v, str)),
    "cached": _opt(lambda v: isinstance(v, bool)),
    "cost_usd": _opt(_number),
    "moves": lambda v: isinstance(v, list) and all(_move(m) for m in v),
    "programs": lambda v: isinstance(v, list),
    "options": lambda v: isinstance(v, dict),
}


def well_typed_event(event: dict[str, Any]) -> bool:
    """Whether every field the viewer computes with has the type the engine writes."""
    return all(check(event[k]) for k, check in _FIELDS.items() if k in event)


def read_events(root: Path, name: str = "events.jsonl") -> tuple[list[dict[str, Any]], int]:
    """(events, skipped): the readable, well-typed lines of events.jsonl in order, and how many
    events were skipped for fields of the wrong type (a line that is not a JSON object with an
    ``event`` name, as a kill mid-write leaves one, is skipped silently, as ``RunDir.events`` does)."""
    path = root / name
    real = inside(root, path)
    if real is None:
        raise RunDirError(f"{path} is not a file inside the run directory (a link out of it, or not a file)")
    if real.stat().st_size > MAX_EVENTS_BYTES:
        raise RunDirError(f"{path} is larger than {MAX_EVENTS_BYTES >> 20} MiB: not a run this viewer reads")
    out, skipped = [], 0
    try:
        with open(real, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    event = json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    continue
                if not isinstance(event, dict) or not isinstance(event.get("event"), str):
                    continue
                if well_typed_event(event):
                    out.append(event)
                else:
                    skipped += 1
    except OSError as exc:
        raise RunDirError(f"{path}: cannot read: {exc}") from None
    return out, skipped


def well_typed_record(r: dict[str, Any]) -> bool:
    """A program record's fields as the archive writes them (``ProgramRecord.to_dict``)."""
    curve = lambda v: isinstance(v, list) and all(x is None or _number(x) for x in v)  # noqa: E731
    return (isinstance(r["id"], str) and _int(r["iteration"], 0, MAX_ITERATIONS) and _int(r["island"], 0, MAX_ISLANDS)
            and _str_list(r["parent_ids"]) and isinstance(r["stage"], str) and isinstance(r["code"], str)
            and isinstance(r["thought"], str) and (r["success"] is None or _number(r["success"]))
            and (r["final_return"] is None or _number(r["final_return"]))
            and isinstance(r["curves"], dict) and all(isinstance(k, str) and curve(v) for k, v in r["curves"].items())
            and isinstance(r["metadata"], dict) and isinstance(r["feedback"], dict)
            and isinstance(r["evaluations"], dict) and curve(r["success_per_seed"])
            and (r["obs_dim"] is None or _int(r["obs_dim"], 0, 2**31))
            and (r["reward_ast_size"] is None or _int(r["reward_ast_size"], 0, 2**31)))


def grid_size_ok(grid: Any) -> bool:
    """Whether a saved grid's dict asks for a bounded number of cells (before it is built)."""
    try:
        spec = grid["spec"]
        cells = len(grid["ids"]) * (len(spec["obs_edges"]) - 1) * int(spec["num_ast_bins"])
    except (KeyError, TypeError, ValueError):
        return True  # malformed: Grid.from_dict says why
    return len(grid["ids"]) <= MAX_ISLANDS and cells <= MAX_GRID_CELLS
