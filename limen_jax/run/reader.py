"""Reading a run directory as untrusted input: files only inside it, sizes and counts bounded,
field types checked before use; and writing into it without following a planted link.

A run directory may come from someone else (a colleague's run, a downloaded archive): a
file of it may be a symlink to anything on this machine, a FIFO, gigabytes long, or hold
values of any JSON type, and a program id in it may be ``../../victim``. Everything resume,
replay, rollout, ``demos --from-policy``, compare and the viewer read goes through here, so
a bad directory costs bounded work and ends in :class:`RunDirError` (one line naming the
file and the field) or a skipped, counted event, never a hang, a traceback, a file from
outside the directory or a write outside it.

Standard library only: the training core (rollout, policies) imports this module.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO


class RunDirError(ValueError):
    """A run directory (or one file of it) that cannot be used; the message is one line
    for the user naming the file and the field. A ValueError: what every CLI turns into
    exit status 2."""


# A program id becomes a file or folder name (programs/<id>.py, policies/<id>/): letters,
# digits, "_", "-" and "." (never first), 128 characters at most; so never "..", "/" or "\".
ID_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def is_id(value: Any) -> bool:
    """Whether ``value`` is a program id that may become a path (:data:`ID_PATTERN`)."""
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None


def check_id(value: Any, where: str) -> str:
    """``value`` when it is a safe program id; else :class:`RunDirError` naming ``where``
    (the file and the field) and the value, shortened and ASCII-escaped."""
    if not is_id(value):
        raise RunDirError(f"{where}: not a program id: {ascii(value)[:60]} "
                          "(letters, digits, '_', '-', '.', at most 128 characters)")
    return str(value)


MAX_JSON_BYTES = 512 * 2**20  # state.json, config.json: a long real run's checkpoint is tens of MB
MAX_EVENTS_BYTES = 512 * 2**20  # events.jsonl
MAX_EVENT_LINE_BYTES = 16 * 2**20  # one event: the longest the engine writes, a prompt or an answer, is < 1 MB
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


def _sized_file(root: Path, name: str, cap: int) -> tuple[Path, Path]:
    """(``root/name``, its resolved path) when it is a file inside the run of at most ``cap``
    bytes; :class:`RunDirError` naming it otherwise."""
    path = root / name
    real = inside(root, path)
    if real is None:
        raise RunDirError(f"{path} is not a file inside the run directory (a link out of it, or not a file)")
    if real.stat().st_size > cap:
        raise RunDirError(f"{path} is larger than {cap >> 20} MiB: not a run this reader reads")
    return path, real


def read_json(root: Path, name: str, what: str) -> Any:
    """``root/name`` parsed; :class:`RunDirError` for a file out of the run, too large or not JSON."""
    path, real = _sized_file(root, name, MAX_JSON_BYTES)
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


def json_lines(fh: BinaryIO, cap: int) -> Iterator[str | None]:
    """The lines of binary file ``fh`` as text (invalid UTF-8 replaced), None for each line
    longer than ``cap`` bytes, which is skipped in pieces of at most ``cap`` bytes, never
    held whole."""
    while raw := fh.readline(cap + 1):
        if len(raw) <= cap:
            yield raw.decode("utf-8", "replace")
            continue
        while not raw.endswith(b"\n") and (raw := fh.readline(cap)):
            pass
        yield None


def read_events(root: Path, name: str = "events.jsonl") -> tuple[list[dict[str, Any]], int]:
    """(events, skipped): the readable, well-typed lines of events.jsonl in order, and how many
    events were skipped for fields of the wrong type (a line that is not a JSON object with an
    ``event`` name, as a kill mid-write leaves one, is skipped silently, as ``RunDir.events`` does)."""
    path, real = _sized_file(root, name, MAX_EVENTS_BYTES)
    out, skipped = [], 0
    try:
        with open(real, "rb") as fh:
            for line in json_lines(fh, MAX_EVENT_LINE_BYTES):
                if line is None:  # longer than any event the engine writes: not read into memory
                    skipped += 1
                    continue
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


def _curve(v: Any) -> bool:
    return isinstance(v, list) and all(x is None or _number(x) for x in v)


# A program record's fields that a summary computes with, and the types the archive writes.
_RECORD_FIELDS: dict[str, Any] = {
    "id": lambda v: isinstance(v, str),
    "iteration": lambda v: _int(v, 0, MAX_ITERATIONS),
    "island": lambda v: _int(v, 0, MAX_ISLANDS),
    "stage": lambda v: isinstance(v, str),
    "success": _opt(_number),
    "final_return": _opt(_number),
    "success_per_seed": _curve,
    "parent_ids": _str_list,
    "metadata": lambda v: isinstance(v, dict),
    "evaluations": lambda v: isinstance(v, dict),
    "curves": lambda v: isinstance(v, dict) and all(isinstance(k, str) and _curve(c) for k, c in v.items()),
    "feedback": lambda v: isinstance(v, dict),
    "eval_terms": lambda v: isinstance(v, dict),
    "fingerprint": _opt(lambda v: isinstance(v, dict)),
    "thought": lambda v: isinstance(v, str),
    "duplicate_of": _opt(lambda v: isinstance(v, str)),
    "obs_dim": _opt(lambda v: _int(v, 0, 2**31)),
    "reward_ast_size": _opt(lambda v: _int(v, 0, 2**31)),
}


def wrong_record_field(record: Any) -> str | None:
    """The first field of a program record, among those present, whose type is not the one
    the archive writes (None when all are; "" when ``record`` is not an object)."""
    if not isinstance(record, dict):
        return ""
    return next((k for k, check in _RECORD_FIELDS.items() if k in record and not check(record[k])), None)


def grid_size_ok(grid: Any) -> bool:
    """Whether a saved grid's dict asks for a bounded number of cells (before it is built)."""
    try:
        spec = grid["spec"]
        cells = len(grid["ids"]) * (len(spec["obs_edges"]) - 1) * int(spec["num_ast_bins"])
    except (KeyError, TypeError, ValueError):
        return True  # malformed: Grid.from_dict says why
    return len(grid["ids"]) <= MAX_ISLANDS and cells <= MAX_GRID_CELLS


# --- the checkpoint, a kept policy's metadata: typed before anything uses them -----------

MAX_PROGRAMS = 1_000_000  # records in a checkpoint
MAX_PENDING = 100_000  # requests proposed ahead
MAX_SEED = 2**32


def finite(v: Any, lo: float = 0.0) -> bool:
    """Whether ``v`` is a finite number (not a bool) of at least ``lo``."""
    return _number(v) and math.isfinite(v) and v >= lo


def _need(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise RunDirError(f"{where}: {what}")


def _ids(value: Any, where: str) -> list[str]:
    _need(isinstance(value, list), where, "not a list of program ids")
    return [check_id(v, f"{where}[{i}]") for i, v in enumerate(value)]


def check_state(state: Any, path: Path) -> dict[str, Any]:
    """``state`` (state.json as parsed) when every field a resume computes with or turns into
    a path has its type and range: the iteration, every program id of the archive, every
    pending request (ids, prompts, seeds; an evaluation only of programs in the archive),
    the spend. :class:`RunDirError` naming ``path`` and the field otherwise."""
    _need(isinstance(state, dict), str(path), "not a JSON object")
    _need(_int(state.get("iteration"), -1, MAX_ITERATIONS), f"{path}: iteration",
          f"not a whole number from -1 to {MAX_ITERATIONS}")
    archive = state.get("archive")
    _need(isinstance(archive, dict) and isinstance(archive.get("programs"), list)
          and len(archive["programs"]) <= MAX_PROGRAMS, f"{path}: archive.programs",
          f"not a list of at most {MAX_PROGRAMS} program records")
    known = set()
    for i, record in enumerate(archive["programs"]):
        where = f"{path}: archive.programs[{i}]"
        _need(isinstance(record, dict), where, "not a JSON object")
        known.add(check_id(record.get("id"), f"{where}.id"))
        _ids(record.get("parent_ids", []), f"{where}.parent_ids")
        _need(isinstance(record.get("code", ""), str), f"{where}.code", "not a string")
        wrong = wrong_record_field(record)
        _need(wrong is None, f"{where}.{wrong}", "of the wrong type (not as the archive writes it)")
    _need(grid_size_ok(archive.get("grid")), f"{path}: archive.grid", f"larger than {MAX_GRID_CELLS} cells")
    pending = state.get("pending")
    _need(pending is None or (isinstance(pending, list) and len(pending) <= MAX_PENDING), f"{path}: pending",
          f"neither null nor a list of at most {MAX_PENDING} requests")
    for i, request in enumerate(pending or []):
        _check_request(request, f"{path}: pending[{i}]", known)
    spend = state.get("spend_usd")
    _need(spend is None or finite(spend), f"{path}: spend_usd", "not a finite number >= 0")
    for name in ("usage", "strategy"):
        _need(state.get(name) is None or isinstance(state[name], dict), f"{path}: {name}", "not a JSON object")
    baseline = state.get("baseline")
    if baseline is not None:
        _need(isinstance(baseline, dict), f"{path}: baseline", "not a JSON object")
        for name, check in (("id", lambda v: isinstance(v, str)), ("success", _opt(_number)),
                            ("success_per_seed", _curve), ("error", _opt(lambda v: isinstance(v, dict)))):
            _need(name not in baseline or check(baseline[name]), f"{path}: baseline.{name}",
                  "of the wrong type (not as a run writes it)")
    return state


def _check_request(r: Any, where: str, known: set[str]) -> None:
    """One pending request (``request_to_dict``): what becomes a path, a prompt or a seed."""
    _need(isinstance(r, dict), where, "not a JSON object")
    kind = r.get("kind", "program")
    _need(kind in ("program", "text", "eval"), f"{where}.kind", f"unknown request kind {ascii(kind)[:40]}")
    check_id(r.get("id"), f"{where}.id")
    _need(_int(r.get("iteration"), 0, MAX_ITERATIONS), f"{where}.iteration",
          f"not a whole number from 0 to {MAX_ITERATIONS}")
    for name in ("parent_ids", "context_ids"):
        if name in r:
            _ids(r[name], f"{where}.{name}")
    if "rng_seed" in r:
        _need(_int(r["rng_seed"], 0, 2**63), f"{where}.rng_seed", "not a whole number >= 0")
    if "island" in r:
        _need(_int(r["island"], 0, MAX_ISLANDS), f"{where}.island", f"not a whole number from 0 to {MAX_ISLANDS}")
    for name in ("system", "user", "code", "operator", "role", "evaluation", "source"):
        if name in r:
            _need(isinstance(r[name], str), f"{where}.{name}", "not a string")
    if "sections" in r:
        _need(_str_list(r["sections"]), f"{where}.sections", "not a list of strings")
    if "images" in r:
        _need(_str_list(r["images"]), f"{where}.images", "not a list of strings")
    if kind == "eval":
        for j, pid in enumerate(_ids(r.get("program_ids"), f"{where}.program_ids")):
            _need(pid in known, f"{where}.program_ids[{j}]", f"{pid} is not a program of the archive")


def check_policy_meta(meta: Any, path: Path) -> dict[str, Any]:
    """A kept policy's policy.json as parsed, when the fields rollout and demos use have
    their types (task a string, seed and obs_dim whole numbers, reward_terms strings,
    task_params numbers by name, mode a string); :class:`RunDirError` naming the field."""
    _need(isinstance(meta, dict), str(path), "not a JSON object")
    _need(isinstance(meta.get("task"), str) and 0 < len(meta["task"]) <= 200, f"{path}: task",
          "not a task name (a string of at most 200 characters)")
    _need(_int(meta.get("seed"), 0, MAX_SEED), f"{path}: seed", f"not a whole number from 0 to {MAX_SEED}")
    _need(_int(meta.get("obs_dim"), 1, 2**31), f"{path}: obs_dim", "not a whole number >= 1")
    _need(_str_list(meta.get("reward_terms", [])), f"{path}: reward_terms", "not a list of strings")
    params = meta.get("task_params", {})
    _need(isinstance(params, dict) and all(isinstance(k, str) and finite(v, -math.inf) for k, v in params.items()),
          f"{path}: task_params", "not finite numbers by name")
    _need(meta.get("mode") is None or isinstance(meta["mode"], str), f"{path}: mode", "not a string")
    if meta.get("program_id") is not None:
        check_id(meta["program_id"], f"{path}: program_id")
    return meta


# --- writing: into the run's own folders, never through a planted link ---------------------

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def own_dir(parent: Path, name: str) -> Path:
    """``parent/name`` as a real folder (made when missing, with ``parent`` when that is missing:
    the run's own root, chosen by its user): :class:`RunDirError` when it is a symlink (even
    to a folder) or not a folder, so a write never lands outside the run."""
    path = parent / name
    try:
        if not parent.exists() and not parent.is_symlink():
            parent.mkdir(parents=True)
        path.mkdir(exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"cannot make {path}: {exc.strerror or exc}") from None
    if path.is_symlink() or not path.is_dir():
        raise RunDirError(f"{path} is a link or not a folder: a run writes only into folders of its own")
    return path


def write_file(directory: Path, name: str, data: bytes) -> Path:
    """Write ``directory/name`` atomically (a kill leaves the old file or the new one). A
    planted ``name`` or ``name.tmp`` symlink is replaced, never followed: the temporary file
    is made afresh with O_EXCL | O_NOFOLLOW and renamed over the entry."""
    path = directory / name
    tmp = directory / (name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # a stale one, or a planted link: the entry goes, not what it points to
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def append_file(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (made when missing) and fsync; :class:`RunDirError` when
    ``path`` is a symlink (a log never writes through one)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o644)
    except OSError:
        if path.is_symlink():
            raise RunDirError(f"{path} is a link: a run appends only to files of its own") from None
        raise
    with os.fdopen(fd, "ab") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
