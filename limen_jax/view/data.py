"""What the run viewer shows, read from a run directory: plain JSON-able dicts.

:func:`load` reads and checks a run directory (``config.json``, ``state.json``,
``events.jsonl``; docs/concepts/run-directory.md) into a :class:`Run`;
:func:`summary` is what the page draws first (programs as graph nodes, the grid after each
iteration, best-so-far and cost per iteration, text requests, evaluations, the strategy's
memory, the run's notable events); :func:`detail` is one program's full record (code,
diff against each parent, prompt, raw reply, curves). :func:`bundle` is both for every
program, for ``--static``. Nothing here writes to the run directory.

Every string that comes from the run (program code, LLM replies, prompts, thoughts, ids) is
untrusted; it stays data here and the page renders it as text (limen_jax/view/static/app.js).
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import json
import os
from pathlib import Path
from typing import Any

from limen_jax.archive.grid import Grid, GridSpec
from limen_jax.run import reader
from limen_jax.run.reader import RunDirError

FORMAT = 1  # of the dicts this module returns (the page checks it)
ARCHIVE_VERSION = 1  # the archive format this viewer reads (limen_jax.archive.FORMAT_VERSION)
# A record lacking one of these comes from another format; the rest have defaults.
REQUIRED = ("id", "iteration", "island", "parent_ids", "stage", "success")
DEFAULTS: dict[str, Any] = {
    "code": "", "obs_dim": None, "reward_ast_size": None, "success_per_seed": [], "final_return": None,
    "curves": {}, "feedback": {}, "error": None, "thought": "", "evaluations": {}, "metadata": {},
}
# Events drawn elsewhere on the page; every other kind is listed in the run's log.
_DRAWN = {"prompt", "response", "program", "score", "reject", "iteration", "evaluate", "evaluation", "run_start"}
_ERROR_CHARS = 300
_DIFF_CHARS = 200_000  # a longer program is shown, not diffed (difflib is quadratic in the worst case)
_DIFF_LINES = 1_000  # nor one of more lines: 10,000 lines of ~100 values, each just under autojunk's
# threshold, take difflib half a minute
_DIFF_PARENTS = 16  # parents diffed per program; a record may name any number


@dataclasses.dataclass
class Run:
    """A loaded run directory.

    records: program records by id, in store order (each with every field, defaults filled).
    prompts, responses: the last ``prompt`` / ``response`` event of each request id.
    events: every readable line of events.jsonl, in order.
    """

    path: Path
    config: dict[str, Any]
    state: dict[str, Any]
    events: list[dict[str, Any]]
    records: dict[str, dict[str, Any]]
    prompts: dict[str, dict[str, Any]]
    responses: dict[str, dict[str, Any]]
    notes: list[str] = dataclasses.field(default_factory=list)


def _read_state(root: Path) -> tuple[Any, list[str]]:
    """state.json, or the previous checkpoint (``state.json.prev``) when a kill left it
    missing or cut mid-write, as a resume would use it; the notes say which was read."""
    if reader.exists(root, "state.json"):
        try:
            return reader.read_json(root, "state.json", "the checkpoint was cut mid-write"), []
        except RunDirError as damaged:
            if not reader.exists(root, "state.json.prev"):
                raise
            why = f"{damaged}"
    elif reader.exists(root, "state.json.prev"):
        why = f"{root / 'state.json'} is missing (a kill between two checkpoint writes)"
    else:
        raise RunDirError(f"{root} has no checkpoint (state.json) yet: the run was killed in, or is still in, "
                          "its first iteration")
    state = reader.read_json(root, "state.json.prev", "the previous checkpoint is damaged too")
    return state, [f"{why}; showing the previous checkpoint state.json.prev, as --resume would use it"]


def load(path: str | os.PathLike[str]) -> Run:
    """Read and check a run directory; :class:`RunDirError` says what is wrong in one line."""
    root = Path(path)
    if not root.is_dir():
        raise RunDirError(f"{root}: no such directory")
    state_path = root / "state.json"
    if not reader.exists(root, "config.json") and not reader.exists(root, "events.jsonl"):
        raise RunDirError(f"{root} is not a limen_jax run directory (no config.json, no events.jsonl)")
    for name in ("config.json", "events.jsonl"):
        if not reader.exists(root, name):
            raise RunDirError(f"{root} is not a complete run directory: {name} is missing")
    config = reader.read_json(root, "config.json", "the run's config was cut mid-write")
    state, notes = _read_state(root)
    if not isinstance(config, dict) or not isinstance(state, dict):
        raise RunDirError(f"{root}: config.json and state.json must each hold a JSON object")
    iteration = state.get("iteration")
    if iteration is not None and not reader._int(iteration, -1, reader.MAX_ITERATIONS):
        raise RunDirError(f"{state_path}: iteration {repr(iteration)[:40]} is not a count of iterations this viewer "
                          f"draws (a whole number from 0 to {reader.MAX_ITERATIONS})")
    for key in ("usage", "config"):
        if state.get(key) is not None and not isinstance(state[key], dict):
            raise RunDirError(f"{state_path}: {key} must be a JSON object: not a limen_jax checkpoint")
    archive = state.get("archive")
    if not isinstance(archive, dict) or not isinstance(archive.get("programs"), list) or "grid" not in archive:
        raise RunDirError(f"{state_path} has no archive (programs and grid): not a limen_jax checkpoint, or one "
                          "from an older version")
    if archive.get("version") != ARCHIVE_VERSION:
        raise RunDirError(f"{state_path}: archive format version {repr(archive.get('version'))[:40]}; this viewer "
                          f"reads version {ARCHIVE_VERSION}")
    records: dict[str, dict[str, Any]] = {}
    for i, raw in enumerate(archive["programs"]):
        missing = [k for k in REQUIRED if not isinstance(raw, dict) or k not in raw]
        if missing:
            name = str(raw.get("id", f"#{i}"))[:80] if isinstance(raw, dict) else f"#{i}"
            raise RunDirError(f"{state_path}: program {name} lacks {', '.join(missing)}: written by an older "
                              "version of limen_jax, which this viewer does not read")
        record = {**DEFAULTS, **raw}
        if not reader.well_typed_record(record):
            raise RunDirError(f"{state_path}: program {str(record['id'])[:80]} has fields of the wrong type (id, "
                              "iteration, island, parent_ids, success, curves, metadata, ...): not a limen_jax "
                              "checkpoint")
        records[record["id"]] = record
    if not isinstance(archive.get("config", {}), dict) or not reader.grid_size_ok(archive["grid"]):
        raise RunDirError(f"{state_path}: the archive's grid is malformed or larger than {reader.MAX_GRID_CELLS} cells")
    try:
        config_grid = archive.get("config", {}).get("grid")
        spec = GridSpec.from_dict(config_grid) if config_grid is not None else GridSpec()
        saved = Grid.from_dict(archive["grid"])
    except (AttributeError, KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
        raise RunDirError(f"{state_path}: the archive's grid cannot be read ({type(exc).__name__}: "
                          f"{str(exc)[:200]})") from None
    if saved.spec != spec:
        raise RunDirError(f"{state_path}: the archive's grid does not match its config")
    events, skipped = reader.read_events(root)
    if skipped:
        notes.append(f"{root / 'events.jsonl'}: skipped {skipped} event{'s' if skipped > 1 else ''} with fields of "
                     "the wrong type (not written by limen_jax)")
    prompts: dict[str, dict[str, Any]] = {}
    responses: dict[str, dict[str, Any]] = {}
    for e in events:
        if e["event"] == "prompt" and "id" in e:
            prompts[str(e["id"])] = e
        elif e["event"] == "response" and "id" in e:
            responses[str(e["id"])] = e
    return Run(root, config, state, events, records, prompts, responses, notes)


def stamp(path: str | os.PathLike[str]) -> str:
    """Changes whenever the run writes something the page shows (the page polls it)."""
    root = Path(path)
    parts = []
    for name in ("state.json", "events.jsonl", "policies"):
        try:
            st = (root / name).stat()
            parts.append(f"{st.st_mtime_ns}:{st.st_size}")
        except OSError:
            parts.append("-")
    return "/".join(parts)


# --- summary -------------------------------------------------------------------------------
def _operator(run: Run, record: dict[str, Any]) -> str:
    prompt = run.prompts.get(record["id"])
    if prompt is not None and prompt.get("operator"):
        return str(prompt["operator"])
    mutator = str(record["metadata"].get("mutator", ""))
    return "default" if mutator.startswith("none") else "given"


def _policy_files(run: Run, program_id: str) -> list[dict[str, Any]] | None:
    """Files kept under ``policies/<id>/`` (names and sizes), or None when no policy was kept."""
    folder = run.path / "policies" / program_id
    base = reader.inside_dir(run.path, run.path / "policies")
    real = reader.inside_dir(run.path, folder)
    if base is None or real is None or not real.is_relative_to(base):
        return None
    files = []
    for p in itertools.islice(sorted(folder.rglob("*")), reader.MAX_POLICY_FILES):
        kept = reader.inside(run.path, p)  # a link out of the run is not listed
        if kept is not None:
            files.append({"name": str(p.relative_to(folder)), "bytes": kept.stat().st_size})
    return files


def policy_left_run(run: Run, program_id: str) -> bool:
    """Whether ``policies/<id>`` is there but leads out of the run directory (a planted link)."""
    return os.path.lexists(run.path / "policies" / program_id) and _policy_files(run, program_id) is None


def _short_error(error: Any) -> dict[str, Any] | None:
    if not isinstance(error, dict):
        return None if error is None else {"stage": "", "message": str(error)[:_ERROR_CHARS]}
    return {"stage": str(error.get("stage", "")), "message": str(error.get("message", ""))[:_ERROR_CHARS],
            "blame": error.get("blame")}


def _evaluated(record: dict[str, Any]) -> bool:
    """As ``ProgramRecord.evaluated``: a full-budget score without error, not a repeat."""
    return (record["error"] is None and record["success"] is not None and record["stage"] == "full"
            and record.get("duplicate_of") is None)


def _node(run: Run, record: dict[str, Any], elites: set[str]) -> dict[str, Any]:
    meta = record["metadata"]
    return {
        "id": record["id"], "iteration": int(record["iteration"]), "island": int(record["island"]),
        "parents": [str(p) for p in record["parent_ids"]], "operator": _operator(run, record),
        "stage": record["stage"], "success": record["success"], "success_per_seed": record["success_per_seed"],
        "final_return": record["final_return"], "obs_dim": record["obs_dim"],
        "reward_ast_size": record["reward_ast_size"], "error": _short_error(record["error"]),
        "cost_usd": meta.get("cost_usd"), "input_tokens": meta.get("input_tokens"),
        "output_tokens": meta.get("output_tokens"), "elite": record["id"] in elites,
        "evaluated": _evaluated(record), "policy": _policy_files(run, record["id"]) is not None,
        "evaluations": sorted(record["evaluations"]), "duplicate_of": record.get("duplicate_of"),
    }


def _pending(run: Run) -> list[dict[str, Any]]:
    """Programs asked for but not yet recorded (in flight in a live run, or lost by a kill)."""
    out = []
    for pid, p in run.prompts.items():
        if pid in run.records or p.get("kind") == "text":
            continue
        out.append({
            "id": pid, "iteration": int(p.get("iteration", 0)), "island": int(p.get("island", 0)),
            "parents": [str(x) for x in (p.get("parents") or ([p["parent"]] if p.get("parent") else []))],
            "operator": str(p.get("operator", "")), "stage": "pending", "success": None, "success_per_seed": [],
            "final_return": None, "obs_dim": None, "reward_ast_size": None, "error": None, "cost_usd": None,
            "input_tokens": None, "output_tokens": None, "elite": False, "evaluated": False, "policy": False,
            "evaluations": [], "duplicate_of": None,
        })
    return out


def grid_history(run: Run) -> dict[str, Any]:
    """The MAP-Elites grid after each iteration, replayed from the store and the migrations.

    Records enter in store order with the grid's own rule (``Grid.place``: strictly better in
    float32) and each iteration's ``migrate`` moves after its records, as the loop does.
    ``snapshots[k]``: {"iteration": i, "cells": [[island, obs_bin, ast_bin, id, fitness], ...]}.
    ``exact``: whether the replay ends on the grid saved in state.json (False when a strategy
    placed programs by another fitness than ``success``; the last snapshot is then the saved grid).
    """
    archive = run.state["archive"]
    config = archive.get("config", {})
    spec = GridSpec.from_dict(config["grid"]) if "grid" in config else GridSpec()
    saved = Grid.from_dict(archive["grid"])
    grid = Grid.empty(spec, saved.num_islands)
    moves: dict[int, list[dict[str, Any]]] = {}
    for e in run.events:
        if e["event"] == "migrate" and isinstance(e.get("moves"), list):
            moves[int(e.get("iteration", -1))] = e["moves"]  # a resumed iteration logs them again
    by_iter: dict[int, list[dict[str, Any]]] = {}
    for r in run.records.values():
        by_iter.setdefault(int(r["iteration"]), []).append(r)
    last = int(run.state.get("iteration", max(by_iter, default=-1)))
    snapshots = []
    for it in range(0, last + 1):
        for r in by_iter.get(it, []):
            if _evaluated(r) and r["obs_dim"] is not None and 0 <= int(r["island"]) < grid.num_islands:
                grid.place(int(r["island"]), spec.cell(int(r["obs_dim"]), int(r["reward_ast_size"] or 0)), r["id"],
                           float(r["success"]))
        for m in moves.get(it, []):
            in_grid = m["target"] < grid.num_islands and m["cell"][0] < spec.shape[0] and m["cell"][1] < spec.shape[1]
            if m.get("inserted") and in_grid:
                grid.place(int(m["target"]), (int(m["cell"][0]), int(m["cell"][1])), str(m["program_id"]),
                           float(m["fitness"]))
        snapshots.append({"iteration": it, "cells": _cells(grid)})
    exact = not snapshots or snapshots[-1]["cells"] == _cells(saved)
    if not exact:
        snapshots[-1] = {"iteration": last, "cells": _cells(saved)}
    return {"num_islands": saved.num_islands, "obs_labels": spec.obs_labels(), "ast_labels": spec.ast_labels(),
            "snapshots": snapshots, "exact": exact}


def _cells(grid: Grid) -> list[list[Any]]:
    return [[i, o, a, str(grid.ids[i, o, a]), float(grid.fitness[i, o, a])] for i, o, a in grid.occupied()]


def progress(run: Run) -> list[dict[str, Any]]:
    """Per iteration: candidates, rejections, the best full-budget success so far and its id,
    the LLM calls and dollars spent for that iteration's requests and their running sum,
    and the iteration's phase timings (its last ``iteration`` event)."""
    iteration_of = {pid: int(p.get("iteration", 0)) for pid, p in run.prompts.items()}
    timings = {int(e["iteration"]): e for e in run.events if e["event"] == "iteration" and "iteration" in e}
    calls: dict[int, int] = {}
    spent: dict[int, float] = {}
    for rid, resp in run.responses.items():
        it = iteration_of.get(rid)
        if it is None or resp.get("cached"):  # a cached answer was paid for when first asked
            continue
        calls[it] = calls.get(it, 0) + 1
        spent[it] = spent.get(it, 0.0) + float(resp.get("cost_usd") or 0.0)
    by_iter: dict[int, list[dict[str, Any]]] = {}
    for r in run.records.values():
        by_iter.setdefault(int(r["iteration"]), []).append(r)
    last = max([int(run.state.get("iteration", -1)), *by_iter, *calls], default=-1)
    best, best_id, total = None, None, 0.0
    out = []
    for it in range(last + 1):
        recs = by_iter.get(it, [])
        for r in recs:
            if _evaluated(r) and (best is None or float(r["success"]) > best):
                best, best_id = float(r["success"]), r["id"]
        total += spent.get(it, 0.0)
        t = timings.get(it, {})
        out.append({
            "iteration": it, "candidates": len(recs), "rejected": sum(r["error"] is not None for r in recs),
            "best": best, "best_id": best_id, "calls": calls.get(it, 0), "cost_usd": spent.get(it, 0.0),
            "cost_total_usd": total,
            "timings": {k: v for k, v in t.items() if k.endswith("_s")},
        })
    return out


def texts(run: Run) -> list[dict[str, Any]]:
    """Text requests (plans, critiques, ...) and their answers, in the order asked."""
    out = []
    for pid, p in run.prompts.items():
        if p.get("kind") != "text":
            continue
        r = run.responses.get(pid, {})
        out.append({"id": pid, "iteration": p.get("iteration"), "role": p.get("role", ""),
                    "system": p.get("system", ""), "user": p.get("user", ""), "answer": r.get("text"),
                    "error": r.get("error"), "cost_usd": r.get("cost_usd"), "input_tokens": r.get("input_tokens"),
                    "output_tokens": r.get("output_tokens"), "answered": bool(r)})
    return out


def evaluations(run: Run) -> list[dict[str, Any]]:
    """Evaluation requests (``evaluate`` events) with the scores each program got."""
    asked: dict[str, dict[str, Any]] = {}
    for e in run.events:
        if e["event"] == "evaluate" and "id" in e:
            asked[str(e["id"])] = {"id": str(e["id"]), "iteration": e.get("iteration"), "kind": e.get("kind"),
                                   "programs": e.get("programs", []), "options": e.get("options", {}),
                                   "results": {}}
        elif e["event"] == "evaluation" and str(e.get("id")) in asked:
            result = {k: v for k, v in e.items() if k not in ("event", "time", "id", "program", "kind")}
            asked[str(e["id"])]["results"][str(e.get("program"))] = result
    return list(asked.values())


def _run_info(run: Run) -> dict[str, Any]:
    status, ended = "running", None
    for e in run.events:
        if e["event"] in ("run_start", "run_resume"):
            status, ended = "running", None
        elif e["event"] == "run_end":
            ended = e
            status = str(e.get("stopped", "finished"))
    search = run.config.get("search", {}) if isinstance(run.config.get("search"), dict) else {}
    llm = run.config.get("llm", {}) if isinstance(run.config.get("llm"), dict) else {}
    usage = run.state.get("usage") or {}  # a dict: load() checked it
    return {
        "name": run.path.resolve().name, "task": run.config.get("task"), "mode": search.get("mode"),
        "strategy": search.get("strategy"), "mutator": usage.get("mutator", llm.get("mutator")),
        "iterations": search.get("iterations"), "iteration": run.state.get("iteration"),
        "status": status, "live": ended is None, "best": ended.get("best") if ended else None,
        "usage": usage, "spend_usd": run.state.get("spend_usd"), "config": run.config,
        "baseline": _baseline(run.state.get("baseline")),
    }


def _baseline(baseline: Any) -> float | None:
    """The baseline's success (the task's default interface, :mod:`limen_jax.run.baseline`), or None."""
    success = baseline.get("success") if isinstance(baseline, dict) else None
    return float(success) if isinstance(success, int | float) and not isinstance(success, bool) else None


def summary(run: Run) -> dict[str, Any]:
    """What the page draws on open (see the module docs); programs in store order, then pending."""
    grid = grid_history(run)
    final = grid["snapshots"][-1]["cells"] if grid["snapshots"] else []
    elites = {c[3] for c in final}
    nodes = [_node(run, r, elites) for r in run.records.values()] + _pending(run)
    log = [e for e in run.events if e["event"] not in _DRAWN]
    return {
        "format": FORMAT, "run": _run_info(run), "programs": nodes, "grid": grid, "progress": progress(run),
        "texts": texts(run), "evaluations": evaluations(run), "strategy": run.state.get("strategy"),
        "pending_requests": run.state.get("pending"), "log": log, "stamp": stamp(run.path),
    }


# --- one program ---------------------------------------------------------------------------
def curve_keys(curves: dict[str, Any]) -> list[str]:
    """Curve names in the order the page draws them: success, return, the named reward terms
    ("reward/<term>", sorted), then the rest as recorded."""
    head = [k for k in ("success", "return") if k in curves]
    terms = sorted(k for k in curves if k.startswith("reward/"))
    return head + terms + [k for k in curves if k not in head and k not in terms]


PER_EPISODE = ("success", "return", "episode_length")  # means over the episodes that ended in an update


def settled(curves: dict[str, Any]) -> dict[str, Any]:
    """``curves`` with the per-episode curves (success, return, episode length, the reward
    terms) blank (None) until as many episodes have ended, in all, as ended in the busiest
    update (about one per environment). Before that only episodes that ended early count,
    and in most tasks those are the successes: a curve would start at 1.0 and seem to
    collapse."""
    counts = [c if isinstance(c, (int, float)) and c == c else 0.0 for c in curves.get("episodes") or []]
    if not counts or max(counts) <= 0:
        return curves
    total, start, wave = 0.0, len(counts), max(counts)
    for i, c in enumerate(counts):
        total += c
        if total >= wave:
            start = i
            break
    return {k: ([None] * start + list(v[start:]) if (k in PER_EPISODE or k.startswith("reward/"))
                and isinstance(v, list) else v) for k, v in curves.items()}


def diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """Unified diff of two programs (3 lines of context)."""
    if len(old) > _DIFF_CHARS or len(new) > _DIFF_CHARS:
        return f"(not diffed: a program over {_DIFF_CHARS} characters)"
    old_lines, new_lines = old.splitlines(), new.splitlines()
    if len(old_lines) > _DIFF_LINES or len(new_lines) > _DIFF_LINES:
        return f"(not diffed: a program over {_DIFF_LINES} lines)"
    lines = difflib.unified_diff(old_lines, new_lines, old_name, new_name, lineterm="")
    return "\n".join(lines)


def _code(run: Run, program_id: str) -> str:
    record = run.records.get(program_id)
    if record is not None and record["code"]:
        return str(record["code"])
    path = run.path / "programs" / f"{program_id}.py"
    if path.name == f"{program_id}.py" and path.parent == run.path / "programs":
        return reader.read_text(run.path, path) or ""  # "" for a link out of the run, or a huge file
    return ""


def detail(run: Run, program_id: str) -> dict[str, Any]:
    """Everything about one program; KeyError for an id the run does not have."""
    record = run.records.get(program_id)
    prompt = run.prompts.get(program_id)
    if record is None and (prompt is None or prompt.get("kind") == "text"):
        raise KeyError(program_id)
    if record is None:  # asked for, not recorded yet
        assert prompt is not None
        asked = [str(x) for x in (prompt.get("parents") or ([prompt["parent"]] if prompt.get("parent") else []))]
        record = {**DEFAULTS, "id": program_id, "iteration": prompt.get("iteration", 0),
                  "island": prompt.get("island", 0), "parent_ids": asked, "stage": "pending", "success": None}
    code = _code(run, program_id)
    parents: list[dict[str, Any]] = []
    for i, pid in enumerate(record["parent_ids"]):
        pid = str(pid)
        known = pid in run.records
        parents.append({"id": pid, "known": known,
                        "diff": None if not known else diff(_code(run, pid), code, pid, program_id)
                        if i < _DIFF_PARENTS else f"(not diffed: only the first {_DIFF_PARENTS} parents are)"})
    first = run.records.get(str(record["parent_ids"][0])) if record["parent_ids"] else None
    response = run.responses.get(program_id)
    return {
        "id": program_id, "code": code, "parents": parents,
        "prompt": None if prompt is None else {k: prompt.get(k) for k in
                                               ("system", "user", "operator", "sections", "island", "parents")},
        "response": None if response is None else {k: v for k, v in response.items() if k not in ("event", "id")},
        "thought": record["thought"], "error": record["error"], "stage": record["stage"],
        "success": record["success"], "success_per_seed": record["success_per_seed"],
        "final_return": record["final_return"], "feedback": record["feedback"], "curves": settled(record["curves"]),
        "curve_keys": curve_keys(record["curves"]),
        "parent_curves": None if first is None else {"id": first["id"], "curves": settled(first["curves"])},
        "evaluations": record["evaluations"], "metadata": record["metadata"],
        "obs_dim": record["obs_dim"], "reward_ast_size": record["reward_ast_size"],
        "policy": _policy_files(run, program_id),
    }


def bundle(run: Run) -> dict[str, Any]:
    """:func:`summary` with every program's :func:`detail` (``details`` by id), for --static."""
    out = summary(run)
    out["details"] = {n["id"]: detail(run, n["id"]) for n in out["programs"]}
    return out


def finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None: the run may hold them (a diverged curve), JSON
    as browsers parse it may not."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def to_json(value: Any) -> str:
    """Compact JSON of a summary, detail or bundle, NaN-free (see :func:`finite`)."""
    return json.dumps(finite(value), separators=(",", ":"), allow_nan=False)
