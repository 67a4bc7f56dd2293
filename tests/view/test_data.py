"""The data the page is built from, on a small synthetic run with hand-derived values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from view_runs import small_run

from limen_jax.view import data


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> data.Run:
    return data.load(small_run(tmp_path_factory.mktemp("view") / "run"))


@pytest.fixture(scope="module")
def summary(run: data.Run) -> dict:
    return data.summary(run)


def test_programs_are_nodes_with_lineage_and_operator(summary: dict) -> None:
    nodes = {p["id"]: p for p in summary["programs"]}
    assert list(nodes) == ["it0000-c00", "it0000-c01", "it0001-c00", "it0001-c01", "it0002-c00", "it0003-c00"]
    assert nodes["it0001-c01"]["parents"] == ["it0000-c00", "it0000-c01"]
    assert nodes["it0001-c01"]["operator"] == "crossover"
    assert nodes["it0000-c00"]["operator"] == "from_scratch"
    assert nodes["it0000-c01"]["error"] == {"stage": "validate", "message": "get_observation returned a (3, 2) array",
                                            "blame": "program"}
    assert nodes["it0000-c01"]["evaluated"] is False
    # a short-run score is not evaluated (it never competes), the pending one is asked but not recorded
    assert (nodes["it0002-c00"]["stage"], nodes["it0002-c00"]["evaluated"]) == ("short", False)
    assert (nodes["it0003-c00"]["stage"], nodes["it0003-c00"]["parents"]) == ("pending", ["it0001-c01"])
    # elites of the final grid (after the migration), and the kept policy
    assert {i for i, n in nodes.items() if n["elite"]} == {"it0000-c00", "it0001-c01"}
    assert [i for i, n in nodes.items() if n["policy"]] == ["it0001-c01"]
    assert nodes["it0000-c00"]["cost_usd"] == 0.01


def test_grid_history_replays_ties_and_migration(summary: dict) -> None:
    grid = summary["grid"]
    assert (grid["num_islands"], grid["obs_labels"], grid["ast_labels"]) == (2, ["1-10", "11+"],
                                                                             ["0-9", "10-19", "20+"])
    # it0001-c00 ties it0000-c00 in cell (0, 1): the incumbent stays; the short run never enters;
    # after iteration 2 each island's best migrates to the other island, same cell
    assert grid["snapshots"] == [
        {"iteration": 0, "cells": [[0, 0, 1, "it0000-c00", 0.5]]},
        {"iteration": 1, "cells": [[0, 0, 1, "it0000-c00", 0.5], [1, 1, 2, "it0001-c01", 0.75]]},
        {"iteration": 2, "cells": [[0, 0, 1, "it0000-c00", 0.5], [0, 1, 2, "it0001-c01", 0.75],
                                   [1, 0, 1, "it0000-c00", 0.5], [1, 1, 2, "it0001-c01", 0.75]]},
    ]
    assert grid["exact"] is True


def test_progress_best_so_far_and_cost(summary: dict) -> None:
    prog = summary["progress"]
    assert [p["iteration"] for p in prog] == [0, 1, 2]
    assert [(p["candidates"], p["rejected"]) for p in prog] == [(2, 1), (2, 0), (1, 0)]
    # the short-run 0.9 of iteration 2 is not a best
    assert [(p["best"], p["best_id"]) for p in prog] == [(0.5, "it0000-c00"), (0.75, "it0001-c01"),
                                                        (0.75, "it0001-c01")]
    # fresh calls only: it0001-c00's answer came from the cache; the text request counts in iteration 1
    assert [p["calls"] for p in prog] == [2, 2, 1]
    assert [p["cost_usd"] for p in prog] == pytest.approx([0.01 + 0.02, 0.005 + 0.04, 0.001], abs=1e-12)
    assert [p["cost_total_usd"] for p in prog] == pytest.approx([0.03, 0.075, 0.076], abs=1e-12)
    assert prog[0]["timings"] == {"llm_s": 1.0, "check_s": 0.5, "train_s": 2.0, "wall_s": 3.5}


def test_texts_evaluations_strategy_log(summary: dict) -> None:
    assert summary["texts"] == [{
        "id": "it0001-t00", "iteration": 1, "role": "plan", "system": "You plan.", "user": "Plan three rewards.",
        "answer": "1. goal\n2. approach", "error": None, "cost_usd": 0.005, "input_tokens": 10, "output_tokens": 5,
        "answered": True}]
    assert summary["evaluations"] == [{
        "id": "it0002-e00", "iteration": 2, "kind": "retrain", "programs": ["it0001-c01"], "options": {"seeds": 2},
        "results": {"it0001-c01": {"success": 0.7, "success_per_seed": [0.6, 0.8]}}}]
    assert summary["strategy"] == {"tree": {"root": {"visits": 3, "value": 0.5,
                                                     "children": [{"id": "it0000-c00", "visits": 2}]}}}
    assert [e["event"] for e in summary["log"]] == ["plan_then_mutate", "migrate"]
    info = summary["run"]
    assert (info["task"], info["strategy"], info["iteration"], info["live"], info["status"]) == (
        "toy", "map_elites", 2, True, "running")


def test_detail_code_diff_prompt_reply_curves(run: data.Run) -> None:
    d = data.detail(run, "it0001-c00")
    assert d["code"] == run.records["it0001-c00"]["code"]
    assert d["parents"][0]["id"] == "it0000-c00"
    assert d["parents"][0]["diff"].splitlines() == [
        "--- it0000-c00", "+++ it0001-c00", "@@ -1,5 +1,5 @@", " import jax.numpy as jnp", "-", "+X = 1", " ",
        " def get_observation(state):", "     # a"]
    assert d["prompt"]["user"] == "Improve it0001-c00."
    assert d["prompt"]["operator"] == "mutate"
    assert d["response"]["cached"] is True and d["response"]["text"].startswith("\n```python\nimport")
    assert d["parent_curves"] == {"id": "it0000-c00", "curves": run.records["it0000-c00"]["curves"]}
    first = data.detail(run, "it0000-c00")
    # success and return first, then the named reward terms (sorted), then the rest as recorded
    assert first["curve_keys"] == ["success", "return", "reward/approach", "reward/goal", "entropy"]
    assert first["thought"] == "first thought" and first["feedback"] == {"trend": "up"}
    assert first["parent_curves"] is None and first["parents"] == []
    cross = data.detail(run, "it0001-c01")
    assert [p["id"] for p in cross["parents"]] == ["it0000-c00", "it0000-c01"]
    assert cross["policy"] == [{"name": "params.msgpack", "bytes": 10}]
    rejected = data.detail(run, "it0000-c01")
    assert rejected["error"]["trace"] == "Trace\n" and rejected["curve_keys"] == []


def test_detail_of_a_pending_program_and_unknown_ids(run: data.Run) -> None:
    d = data.detail(run, "it0003-c00")
    assert (d["stage"], d["code"], d["response"]) == ("pending", "", None)
    assert d["parents"][0]["id"] == "it0001-c01" and d["parents"][0]["diff"].startswith("--- it0001-c01")
    for bad in ("nope", "it0001-t00", "../config", "../../etc/passwd"):
        with pytest.raises(KeyError):
            data.detail(run, bad)


def test_bundle_holds_every_detail_and_is_json(run: data.Run) -> None:
    b = data.bundle(run)
    assert set(b["details"]) == {p["id"] for p in b["programs"]}
    assert json.loads(data.to_json(b))["details"]["it0000-c00"]["code"] == run.records["it0000-c00"]["code"]


def test_nan_and_infinity_become_null() -> None:
    assert data.finite({"a": [1.0, float("nan"), float("inf")], "b": (float("-inf"), "x", 2)}) == {
        "a": [1.0, None, None], "b": [None, "x", 2]}
    assert data.to_json({"c": [float("nan")]}) == '{"c":[null]}'


def test_stamp_changes_when_the_run_writes(tmp_path: Path) -> None:
    root = small_run(tmp_path / "run")
    before = data.stamp(root)
    with open(root / "events.jsonl", "a") as fh:
        fh.write('"\n{"event": "run_end", "stopped": "finished", "best": "it0001-c01"}\n')
    assert data.stamp(root) != before
    info = data.summary(data.load(root))["run"]
    assert (info["live"], info["status"], info["best"]) == (False, "finished", "it0001-c01")


def test_older_record_fields_get_defaults(tmp_path: Path) -> None:
    root = small_run(tmp_path / "run")
    state = json.loads((root / "state.json").read_text())
    for rec in state["archive"]["programs"]:
        for key in ("thought", "evaluations", "feedback", "metadata"):
            del rec[key]
    (root / "state.json").write_text(json.dumps(state))
    run = data.load(root)
    d = data.detail(run, "it0000-c00")
    assert (d["thought"], d["evaluations"], d["feedback"], d["metadata"]) == ("", {}, {}, {})
    assert data.summary(run)["programs"][0]["operator"] == "from_scratch"


def test_per_episode_curves_start_once_a_wave_of_episodes_has_ended() -> None:
    # the quick start's first updates: a few quick successes end, then the timeouts
    curves = {"success": [1.0, 1.0, 1.0, 1.0, 0.05, 0.71], "episodes": [10.0, 10.0, 9.0, 7.5, 225.0, 24.0],
              "reward/goal": [9.0, 9.0, 9.0, 9.0, 0.5, 6.0], "entropy": [1.0, 0.9, 0.8, 0.7, 0.6, 0.5]}
    out = data.settled(curves)
    assert out["success"] == [None, None, None, None, 0.05, 0.71]  # 261 ended by update 4, >= 225
    assert out["reward/goal"] == [None, None, None, None, 0.5, 6.0]
    assert out["entropy"] == curves["entropy"] and out["episodes"] == curves["episodes"]
    assert data.settled({"success": [0.5]}) == {"success": [0.5]}  # no counts: drawn as recorded


def test_a_diff_that_difflib_would_take_minutes_on_is_not_made() -> None:
    import time
    # 10,000 lines of 99 values, each just under difflib's autojunk threshold: ~30 s to diff
    old = "\n".join(str(i % 99) for i in range(10_000))
    new = "\n".join(str((i * 7 + 3) % 99) for i in range(10_000))
    start = time.perf_counter()
    assert data.diff(old, new, "a", "b").startswith("(not diffed: a program over")
    assert time.perf_counter() - start < 1.0


def test_only_the_first_parents_are_diffed(run: data.Run) -> None:
    record = dict(run.records["it0001-c01"])
    import dataclasses
    x = {**record, "id": "x", "parent_ids": ["it0000-c00"] * 1000}
    many = dataclasses.replace(run, records={**run.records, "x": x})
    parents = data.detail(many, "x")["parents"]
    assert len(parents) == 1000 and parents[0]["diff"].startswith("--- it0000-c00")
    assert parents[-1]["diff"].startswith("(not diffed: only the first")
