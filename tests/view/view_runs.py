"""Synthetic run directories for the viewer's tests, written in the engine's own formats
(records and grid through limen_jax.archive), with values small enough to check by hand."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

from limen_jax.archive import Archive, ArchiveConfig, GridSpec, ProgramRecord

# 2 islands; observation bins 1-10, 11-20; reward AST bins 0-9, 10-19, 20+
SPEC = GridSpec(obs_edges=(1, 11, 21), ast_bin_width=10, num_ast_bins=3)
EVIL = '# </script><img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def _code(name: str, extra: str = "") -> str:
    return (f"import jax.numpy as jnp\n{extra}\n\ndef get_observation(state):\n    # {name}\n"
            f"    return jnp.zeros(3)\n\ndef compute_reward(state, action, next_state):\n    return 0.0\n")


def small_records() -> list[ProgramRecord]:
    curves = {"entropy": [1.0, 0.9], "reward/goal": [0.0, 1.0], "return": [1.0, 2.0], "success": [0.1, 0.5],
              "reward/approach": [0.2, 0.1]}
    return [
        ProgramRecord("it0000-c00", _code("a"), 0, 0, [], 5, 12, [0.5, 0.5], 0.5, 2.0, curves, {"trend": "up"},
                      None, "full", "first thought", {}, {"mutator": "fake", "cost_usd": 0.01}),
        ProgramRecord("it0000-c01", _code("b"), 0, 1, [], None, None, [], None, None, {}, {},
                      {"stage": "validate", "message": "get_observation returned a (3, 2) array", "trace": "Trace\n",
                       "blame": "program"}, "rejected", "", {}, {"mutator": "fake", "cost_usd": 0.02}),
        ProgramRecord("it0001-c00", _code("a", "X = 1"), 1, 0, ["it0000-c00"], 5, 14, [0.5, 0.5], 0.5, 2.0,
                      {"success": [0.2, 0.5]}, {}, None, "full", "", {}, {"mutator": "fake", "cost_usd": 0.03,
                                                                           "cached": True}),
        ProgramRecord("it0001-c01", _code("c"), 1, 1, ["it0000-c00", "it0000-c01"], 15, 25, [0.7, 0.8], 0.75, 3.0,
                      {"success": [0.3, 0.75]}, {}, None, "full", "cross", {}, {"mutator": "fake", "cost_usd": 0.04}),
        ProgramRecord("it0002-c00", _code("d"), 2, 0, ["it0001-c00"], 5, 3, [0.9], 0.9, 4.0, {}, {}, None, "short",
                      "", {}, {"mutator": "fake", "cost_usd": 0.001}),
    ]


def write_run(root: Path, records: list[ProgramRecord], *, num_islands: int = 2, spec: GridSpec = SPEC,
              migrate_at: int | None = None, extra_events: list[dict[str, Any]] | None = None,
              strategy: Any = None, iteration: int | None = None, operators: dict[str, str] | None = None,
              responses: dict[str, dict[str, Any]] | None = None) -> Path:
    """A run dir as the loop leaves it: records added in order, an iteration event after each
    iteration, ``migrate_at``: ring migration after that iteration, as map_elites does.
    ``extra_events`` go after the scores of iteration ``event["_at"]`` (after the end when
    later than the last iteration)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "programs").mkdir(exist_ok=True)
    archive = Archive(ArchiveConfig(num_islands=num_islands, grid=spec))
    events: list[dict[str, Any]] = [{"event": "run_start", "time": 1000.0, "config": {}, "pid": 1}]
    last = max((r.iteration for r in records), default=0) if iteration is None else iteration
    t = 1000.0
    for it in range(last + 1):
        batch = [r for r in records if r.iteration == it]
        for r in batch:
            t += 1
            events.append({"event": "prompt", "time": t, "id": r.id, "iteration": it, "island": r.island,
                           "parent": r.parent_ids[0] if r.parent_ids else None, "parents": r.parent_ids,
                           "operator": (operators or {}).get(r.id, "crossover" if len(r.parent_ids) > 1 else
                                                             "mutate" if r.parent_ids else "from_scratch"),
                           "sections": [], "system": "You design RL interfaces.", "user": f"Improve {r.id}."})
            resp = {"event": "response", "time": t, "id": r.id, "text": f"{r.thought}\n```python\n{r.code}```",
                    "error": None, "mutator": "fake", "model": "fake-1", "input_tokens": 100, "output_tokens": 50,
                    "cost_usd": r.metadata.get("cost_usd", 0.0), "cached": bool(r.metadata.get("cached")),
                    "retries": 0}
            override = dict((responses or {}).get(r.id, {}))
            if "user" in override:
                events[-1]["user"] = override.pop("user")
            resp.update(override)
            events.append(resp)
        for r in batch:
            archive.add(r)
            (root / "programs" / f"{r.id}.py").write_text(r.code)
            brief = {k: v for k, v in r.to_dict().items() if k != "code"}
            events.append({"event": "score" if r.error is None else "reject", "time": t, "elite": False, **brief})
        if migrate_at == it:
            moves = archive.migrate()
            events.append({"event": "migrate", "time": t, "iteration": it,
                           "moves": [dataclasses.asdict(m) for m in moves]})
        events += [e for e in (extra_events or []) if e["_at"] == it]
        events.append({"event": "iteration", "time": t, "iteration": it, "llm_s": 1.0, "check_s": 0.5,
                       "train_s": 2.0, "wall_s": 3.5})
    events += [e for e in (extra_events or []) if e["_at"] > last]
    events = [{k: v for k, v in e.items() if k != "_at"} for e in events]
    config = {"task": "toy", "seed": 0, "search": {"iterations": last + 1, "candidates": 2, "mode": "full",
                                                    "strategy": "map_elites"}, "llm": {"mutator": "fake"}}
    (root / "config.json").write_text(json.dumps(config))
    with open(root / "events.jsonl", "w") as fh:
        for e in events:
            fh.write(json.dumps(e) + "\n")
    usage = {"calls": 6, "failed_calls": 0, "retries": 0, "input_tokens": 600, "output_tokens": 300,
             "cost_usd": 0.076, "cache_hits": 1, "mutator": "fake"}
    state = {"iteration": last, "archive": archive.to_dict(), "strategy": strategy if strategy is not None else {},
             "pending": None, "spend_usd": 0.076, "usage": usage}
    (root / "state.json").write_text(json.dumps(state))
    return root


def small_run(root: Path) -> Path:
    """Five programs over iterations 0-2 (a rejection, a tie, a crossover, a short-run score),
    a migration after iteration 2, a text request, a retrain, a strategy event, a program
    still in flight (iteration 3), a kept policy, and a last events line cut by a kill."""
    extra = [
        {"event": "prompt", "time": 1500.0, "id": "it0001-t00", "iteration": 1, "kind": "text", "role": "plan",
         "system": "You plan.", "user": "Plan three rewards.", "_at": 1},
        {"event": "response", "time": 1500.0, "id": "it0001-t00", "text": "1. goal\n2. approach", "error": None,
         "mutator": "fake", "model": "fake-1", "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.005,
         "cached": False, "retries": 0, "_at": 1},
        {"event": "plan_then_mutate", "time": 1500.0, "iteration": 1, "retrained": [], "_at": 1},
        {"event": "evaluate", "time": 1600.0, "id": "it0002-e00", "iteration": 2, "kind": "retrain",
         "programs": ["it0001-c01"], "options": {"seeds": 2}, "_at": 2},
        {"event": "evaluation", "time": 1601.0, "id": "it0002-e00", "program": "it0001-c01", "kind": "retrain",
         "success": 0.7, "success_per_seed": [0.6, 0.8], "_at": 2},
        {"event": "prompt", "time": 1700.0, "id": "it0003-c00", "iteration": 3, "island": 1, "parent": "it0001-c01",
         "parents": ["it0001-c01"], "operator": "mutate", "sections": [], "system": "s", "user": "u", "_at": 3},
    ]
    strategy = {"tree": {"root": {"visits": 3, "value": 0.5, "children": [{"id": "it0000-c00", "visits": 2}]}}}
    root = write_run(root, small_records(), migrate_at=2, extra_events=extra, strategy=strategy, iteration=2)
    policy = root / "policies" / "it0001-c01"
    policy.mkdir(parents=True)
    (policy / "params.msgpack").write_bytes(b"\0" * 10)
    with open(root / "events.jsonl", "a") as fh:
        fh.write('{"event": "score", "id": "it0003-c0')  # cut by a kill mid-write
    return root


def evil_run(root: Path) -> Path:
    """Untrusted text everywhere the page shows text: code, thought, reply, prompt, error,
    a text request, the strategy's memory, an operator name and a curve name."""
    rec = ProgramRecord("it0000-c00", _code("evil", EVIL), 0, 0, [], 5, 12, [0.5], 0.5, 1.0,
                        {"success": [0.1, 0.5], f"reward/{EVIL}": [0.0, 1.0]}, {"trend": EVIL}, None, "full", EVIL,
                        {}, {"mutator": "fake", "cost_usd": 0.0})
    bad = ProgramRecord("it0000-c01", EVIL, 0, 0, [], None, None, [], None, None, {}, {},
                        {"stage": "validate", "message": EVIL, "trace": EVIL, "blame": "program"}, "rejected", EVIL)
    extra = [{"event": "prompt", "time": 1.0, "id": "it0000-t00", "iteration": 0, "kind": "text", "role": EVIL,
              "system": EVIL, "user": EVIL, "_at": 0},
             {"event": "response", "time": 1.0, "id": "it0000-t00", "text": EVIL, "error": None, "cost_usd": 0.0,
              "_at": 0},
             {"event": EVIL, "time": 2.0, "iteration": 0, "note": EVIL, "_at": 0}]
    return write_run(root, [rec, bad], num_islands=1, extra_events=extra, strategy={EVIL: EVIL},
                     operators={"it0000-c00": EVIL}, responses={"it0000-c00": {"text": EVIL, "user": EVIL}})


def large_run(root: Path, n: int = 300, per_iteration: int = 3, seed: int = 0) -> Path:
    """``n`` candidates of realistic size (3 KB programs, 8 KB prompts, ten 36-point curves),
    mutated and crossed over from earlier ones, some rejected, on 3 islands."""
    rng = random.Random(seed)
    records: list[ProgramRecord] = []
    body = "\n".join(f"    f{i} = jnp.sum(state.grid[{i}] * {i})  # feature {i}" for i in range(60))
    keys = ["success", "return", "episode_length", "entropy", "policy_loss", "value_loss", "approx_kl",
            "reward/goal", "reward/approach", "reward/wrong_pickup"]
    for k in range(n):
        it, c = divmod(k, per_iteration)
        pid = f"it{it:04d}-c{c:02d}"
        earlier = [r for r in records if r.stage == "full"]
        parents = [] if not earlier or it < 3 else [rng.choice(earlier).id for _ in range(rng.choice([1, 1, 2]))]
        code = f"import jax.numpy as jnp\n# {pid}\n\ndef get_observation(state):\n{body}\n" + \
               "\n".join(f"    x{j} = {rng.random():.3f}" for j in range(rng.randint(1, 20))) + \
               "\n    return jnp.zeros(3)\n\ndef compute_reward(state, action, next_state):\n    return 0.0\n"
        if rng.random() < 0.15:
            records.append(ProgramRecord(pid, code, it, it % 3, list(dict.fromkeys(parents)), stage="rejected",
                                         error={"stage": "compile", "message": "boom " * 20, "trace": "t\n" * 25},
                                         metadata={"mutator": "fake", "cost_usd": 0.02}))
            continue
        s = round(rng.random(), 4)
        curves = {key: [round(rng.random(), 4) for _ in range(36)] for key in keys}
        records.append(ProgramRecord(pid, code, it, it % 3, list(dict.fromkeys(parents)), rng.randint(1, 512),
                                     rng.randint(0, 600), [s, s], s, 3.0, curves, {"trend": "x" * 200}, None, "full",
                                     "thought " * 30, {}, {"mutator": "fake", "cost_usd": 0.02}))
    responses = {r.id: {"text": "reasoning " * 150 + f"\n```python\n{r.code}```", "user": "prompt text " * 700}
                 for r in records}
    return write_run(root, records, num_islands=3, spec=GridSpec(), migrate_at=None, responses=responses,
                     extra_events=[{"event": "prompt", "time": 1.0, "id": f"it{i:04d}-t00", "iteration": i,
                                    "kind": "text", "role": "critique", "system": "s", "user": "u", "_at": i}
                                   for i in range(0, n // per_iteration, 10)])
