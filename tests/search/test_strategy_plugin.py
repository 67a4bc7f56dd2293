"""A strategy written outside the package (examples/plan_then_mutate.py, the one
docs/howto/write-a-strategy.md shows) runs with no change to the loop: registered by entry point and
driven from the CLI with --set options, killed with SIGKILL and resumed with its memory,
and passed as an object to lj.evolve; it asks for text, programs and a retrain.

The entry point comes from a .dist-info folder written into tmp_path (what ``pip
install`` would write; installing needs a build backend a test must not download), found
by a subprocess through ``importlib.metadata`` on its PYTHONPATH."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from cli_runs import assert_same_programs, checkpoint, checkpointed, cli_env, events, kill_and_resume
from test_evolve import toy_config

import limen_jax as lj
from limen_jax.stats import success_interval

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "examples"))
from plan_then_mutate import PlanThenMutate  # noqa: E402

CONFIG = toy_config(search={"iterations": 4, "candidates": 1, "seeds": 2})


def dist_info(root: Path) -> Path:
    info = root / "limen_plan-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: limen-plan\nVersion: 0.1.0\n")
    entry = "[limen_jax.strategies]\nplan_then_mutate = plan_then_mutate:PlanThenMutate\n"
    (info / "entry_points.txt").write_text(entry)
    return root


def test_a_plugin_strategy_runs_from_the_cli_survives_kill_9_and_matches_the_object_run(tmp_path):
    run_dir = tmp_path / "cli"
    killed = kill_and_resume(run_dir, CONFIG, checkpointed(2),
                             ["--strategy", "plan_then_mutate", "--set", "search.options.k=1",
                              "--set", "search.options.retrain_seeds=2"],
                             env=cli_env(ROOT / "examples", dist_info(tmp_path / "site")))
    assert killed["iteration"] < 4 and killed["strategy"]["plan"].startswith("Offline plan:")
    config = json.loads((run_dir / "config.json").read_text())
    assert config["search"]["strategy"] == "plan_then_mutate" and config["search"]["options"] == {"k": 1,
                                                                                                   "retrain_seeds": 2}
    assert config["search"]["pipeline"] == "off"  # lookahead 0: every outcome is told before the next batch

    # the same strategy, handed in as an object, uninterrupted: the same run
    strategy = PlanThenMutate(PlanThenMutate.Options(k=1, retrain_seeds=2))
    same = lj.evolve("toy_corridor", CONFIG, run_dir=tmp_path / "object", strategy=strategy, verbose=False)
    assert sorted(r.id for r in same.records) == [f"it000{i}-c00" for i in range(1, 5)]
    assert_same_programs(run_dir, same.records, lambda r: (r.code, r.success_per_seed, r.parent_ids, r.evaluations))
    assert checkpoint(run_dir)["strategy"] == strategy.to_dict()

    # text requests are recorded like programs: a replay from the cache is the same run, at no cost
    replay = PlanThenMutate(PlanThenMutate.Options(k=1, retrain_seeds=2))
    again = lj.evolve("toy_corridor", {**CONFIG, "llm": {"mutator": "replay", "replay_from": str(run_dir)}},
                      run_dir=tmp_path / "replay", strategy=replay, verbose=False)
    assert [(r.id, r.code, r.success_per_seed, r.evaluations) for r in again.records] == [
        (r.id, r.code, r.success_per_seed, r.evaluations) for r in same.records]
    assert replay.to_dict() == strategy.to_dict()

    # what it asked: a plan (text), programs with the plan in their prompts, a retrain of each new best
    log = events(run_dir)
    plan = [e for e in log if e["event"] == "prompt" and e.get("kind") == "text"]
    assert [(e["id"], e["role"]) for e in plan] == [("it0000-t00", "plan")]
    programs = [e for e in log if e["event"] == "prompt" and e.get("kind") != "text"]
    assert programs and all(f"## A plan to draw on\n{strategy.plan}\n" in e["user"] for e in programs)
    retrained = [r for r in same.records if r.evaluations]
    assert retrained and [r.id for r in retrained] == strategy.retrained
    for r in retrained:
        ev = r.evaluations["retrain"]
        assert len(ev["success_per_seed"]) == 2 and ev["seeds"] == [500, 501] and ev["steps"] == 2048
        assert ev["success"] == sum(ev["success_per_seed"]) / 2
        assert ev["interval"] == list(success_interval(ev["success_per_seed"], ev["eval_episodes"]))
        assert ev["interval"][0] <= ev["success"] <= ev["interval"][1]
    assert {e["program"] for e in log if e["event"] == "evaluation"} == {r.id for r in retrained}


def test_the_docs_show_the_example_strategy_as_it_is_tested():
    doc = (ROOT / "docs" / "howto" / "write-a-strategy.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    source = (ROOT / "examples" / "plan_then_mutate.py").read_text()
    assert source in blocks
    assert len(source.splitlines()) <= 65
