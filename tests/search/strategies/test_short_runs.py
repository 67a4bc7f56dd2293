"""Every shipped strategy's shortest run (one iteration of two candidates) leaves a trained
best, a baseline, and counts that agree with its event log."""

from __future__ import annotations

import json

import pytest

import limen_jax as lj

STRATEGIES = ("map_elites", "greedy", "independent", "sparse", "eureka", "forge", "grace", "mcts", "portfolio", "rda")


def _events(run_dir):
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_short_run_of_every_strategy_leaves_a_trained_best_and_its_baseline(strategy, tmp_path):
    config = {"seed": 1, "llm": {"mutator": "offline"}, "cascade": {"short_steps": 0, "full_steps": 2048},
              "search": {"iterations": 1, "candidates": 2, "seeds": 1, "strategy": strategy}}
    run = lj.evolve("xland_easy", config, run_dir=tmp_path / "run", verbose=False)
    assert (tmp_path / "run" / "best_interface.py").exists(), run.summary()
    assert run.best is not None and run.best.success is not None and run.best.stage == "full"
    events = _events(tmp_path / "run")
    scored = [e for e in events if e["event"] == "score"]
    rejected = [e for e in events if e["event"] == "reject"]
    # the log's records are the store's, and a record scored without an error is never "rejected"
    assert sorted(e["id"] for e in scored + rejected) == sorted(r.id for r in run.records)
    assert all(e["stage"] != "rejected" for e in scored)
    trained = sum(e["success"] is not None for e in scored)
    demos = sum(e["stage"] == "demos" for e in scored)
    counts = f"{len(run.records)} programs, {trained} trained, {len(rejected)} rejected"
    summary = run.summary()
    assert counts + (f", {demos} scored on demonstrations" if demos else "") in summary
    # the baseline: trained once (the sparse strategy's own default program is it), never in the store
    baselines = [e for e in events if e["event"] == "baseline"]
    assert len(baselines) == 1 and run.baseline == {k: v for k, v in baselines[0].items() if k in run.baseline}
    assert (run.baseline["id"] == "baseline") == (strategy != "sparse")
    assert "baseline" not in {r.id for r in run.records}
    assert f"baseline: success {run.baseline['success']:.3f} (default observation, sparse reward)" in summary
