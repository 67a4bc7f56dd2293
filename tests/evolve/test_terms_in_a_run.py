"""Issue 26 end to end through a search: a program written apart from the engine, whose
compute_reward returns a dict of terms, is checked, trained, and shows each term's curve
in the run dir and in the next prompt; the best policy of the run is kept with orbax and
rolls out from the CLI with per-term sums."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from programs import two_terms
from test_evolve import toy_config

import limen_jax as lj
from limen_jax.llm import Completion

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


class WritesTerms:
    """Answers every request with a dict-of-terms program, saying why first; each answer
    weighs ``closer`` more (a program that repeats an earlier one would not be trained)."""

    name = "writes_terms"

    def __init__(self) -> None:
        self.requests = []

    def complete(self, system, user, images=(), seed=0):
        self.requests.append(user)
        code = two_terms(0.1 * len(self.requests))
        return Completion(text=f"Reward reaching the goal and each step closer.\n\n```python\n{code}```\n")


def test_dict_terms_train_show_their_curves_and_the_best_policy_rolls_out(tmp_path):
    mutator = WritesTerms()
    # pipeline off: iteration 1 mutates iteration 0's program
    config = toy_config(search={"iterations": 1, "candidates": 1, "seeds": 2, "pipeline": "off"})
    run = lj.evolve("toy_corridor", config, run_dir=tmp_path / "run", mutator=mutator, verbose=False)
    assert run.complete and [r.id for r in run.records] == ["it0000-c00", "it0001-c00"]
    first = run.records[0]
    assert first.thought == "Reward reaching the goal and each step closer."
    assert {"reward/goal", "reward/closer"} <= set(first.curves)
    assert len(first.curves["reward/goal"]) == len(first.curves["return"])
    assert set(first.eval_terms) == {"closer", "goal"}
    assert abs(first.eval_terms["goal"] - first.success) < 1e-6  # paid once per successful episode
    state = json.loads((run.run_dir / "state.json").read_text())
    saved = {r["id"]: r for r in state["archive"]["programs"]}
    assert saved[first.id]["curves"]["reward/goal"] == first.curves["reward/goal"]

    # the second prompt improves the first program and shows its terms' curves
    user = mutator.requests[1]
    events = [json.loads(line) for line in (run.run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["parent"] for e in events if e["event"] == "prompt"] == [None, first.id]
    assert "goal" in user and "closer" in user and "max" in user and "min" in user

    # the best of each batch keeps its policies; the run's best rolls out from the CLI
    kept = sorted(p.name for p in (run.run_dir / "policies").iterdir())
    assert kept == ["it0000-c00", "it0001-c00"]
    assert sorted(p.name for p in (run.run_dir / "policies" / run.best.id).iterdir()) == ["seed0", "seed1"]
    events = [json.loads(x) for x in (run.run_dir / "events.jsonl").read_text().splitlines()]
    # one event per kept program, naming its seeds
    policies = [(e["id"], e["seeds"], e["path"]) for e in events if e["event"] == "policy"]
    assert sorted(policies) == [(pid, [0, 1], f"policies/{pid}") for pid in kept]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    out = subprocess.run([sys.executable, "-m", "limen_jax.rollout", str(run.run_dir), run.best.id, "--episodes",
                          "16", "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    assert lines[0].startswith(f"{run.best.id} seed 0 on toy_corridor: success ")
    assert set(result["terms"]) == {"closer", "goal"} and result["terms"]["goal"] == result["success"]


def test_keep_policies_none_keeps_nothing(tmp_path):
    config = toy_config(search={"iterations": 0, "candidates": 1, "seeds": 1})
    run = lj.evolve("toy_corridor", {**config, "keep_policies": "none"}, run_dir=tmp_path / "none",
                    mutator=WritesTerms(), verbose=False)
    assert run.best is not None and not (run.run_dir / "policies").exists()
