"""Eureka (``--strategy eureka``): K samples per iteration from the best of the last batch,
each prompt with the reward reflection (each term's curve over training with max / mean
/ min, the success and episode-length curves, reading hints, a farmed term), as sent to a
local fake Messages API; the reflection's findings on hand-built curves; an offline CLI
run killed with SIGKILL mid-batch and resumed; an offline CLI run and its replay."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cli_runs import assert_same_programs, checkpoint, kill_and_resume, logged
from fake_anthropic import FakeAnthropic, Reply
from programs import two_terms
from test_evolve import toy_config

import limen_jax as lj
from limen_jax.archive import ProgramRecord
from limen_jax.llm.reflection import findings, reflection

HERE = Path(__file__).parent

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[2]), str(HERE.parents[1] / "evolve")])}

class ScriptedModel:
    """A fake model behind the Messages API: every answer is the two-term program with its
    own weight on ``closer`` (0.05, 0.10, ...), so each program's term values are known."""

    def __init__(self) -> None:
        self.count = itertools.count(1)
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        with self.lock:
            weight = 0.05 * next(self.count)
        code = two_terms(weight)
        return Reply(f"Pay for each step closer, weight {weight:.2f}.\n\n```python\n{code}```\n")


def points(curve) -> list[str]:
    """The 10 points of a curve, computed here from the raw curve: the mean of each tenth
    (updates with no finished episode, logged as None, skipped; "-" for a tenth of none)."""
    values = [math.nan if x is None else float(x) for x in curve]
    n = len(values)
    assert n >= 10
    out = []
    for i in range(10):
        chunk = [x for x in values[i * n // 10 : (i + 1) * n // 10] if math.isfinite(x)]
        out.append(sum(chunk) / len(chunk) if chunk else None)
    return out


def stats(curve) -> str:
    """A term's line as the reflection must show it: 10 points, then max / mean / min of the
    whole curve (4 significant digits)."""
    finite = [float(x) for x in curve if x is not None and math.isfinite(x)]
    shown = ", ".join("-" if x is None else f"{x:.4g}" for x in points(curve))
    return f"{shown} (max {max(finite):.4g}, mean {sum(finite) / len(finite):.4g}, min {min(finite):.4g})"


def test_each_iteration_reflects_on_the_best_of_the_last_batch_as_sent(tmp_path, monkeypatch):
    config = toy_config(search={"strategy": "eureka", "iterations": 1, "candidates": 3, "seeds": 1},
                        cascade={"short_steps": 0, "full_steps": 8192}, llm={"mutator": "anthropic"})
    with FakeAnthropic(responder=ScriptedModel()) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        run = lj.evolve("toy_corridor", config, run_dir=tmp_path / "run", verbose=False)
    assert run.complete and len(run.records) == 6
    users = [r["body"]["messages"][0]["content"] for r in fake.requests]
    by_iteration = {it: [r for r in run.records if r.iteration == it] for it in range(2)}
    # iteration 0 from scratch: no reflection, nothing shown but the task
    assert sum("## Reward reflection" in u for u in users) == 3 and all(not r.parent_ids for r in by_iteration[0])
    for it in (1,):
        batch = by_iteration[it - 1]
        best = max(batch, key=lambda r: r.success)  # the first of equals, as the strategy takes it
        assert all(r.parent_ids == [best.id] for r in by_iteration[it])  # all K name it
        prompts = [u for u in users if "## Reward reflection" in u and best.code.rstrip() in u]
        assert len(prompts) == 3
        for user in prompts:
            for term in ("closer", "goal"):
                assert f"`{term}`: {stats(best.curves[f'reward/{term}'])}" in user
            success = ", ".join("-" if x is None else f"{x:.3g}" for x in points(best.curves["success"]))
            assert f"Task success over training (10 points, first to last): {success}" in user
            assert "Episode length over training (10 points, first to last): " in user
            assert f"Evaluation success of the trained policy: {best.success:.2f}" in user
            assert "A term whose values never move is not being optimised" in user
            # Eureka sees the current best only: no archive sections, no other programs, no failures
            assert "Best programs discovered" not in user and "#### Program" not in user
            assert "Recent failures" not in user and "## Parent Program" in user
    state = json.loads((run.run_dir / "state.json").read_text())["strategy"]
    assert state == {"parent": max(by_iteration[1], key=lambda r: r.success).id}


def record(curves: dict[str, list[float]], success: float) -> ProgramRecord:
    return ProgramRecord(id="it0001-c00", code="", success=success, success_per_seed=[success], curves=curves)


def test_findings_name_a_frozen_term_a_drowning_term_and_a_farmed_term():
    curves = {"return": [0.0, 1.0, 2.0, 4.0], "success": [0.0, 0.0, 0.0, 0.0],
              "reward/idle": [0.5, 0.5, 0.5, 0.5], "reward/bonus": [0.0, 10.0, 20.0, 40.0],
              "reward/near": [0.1, 0.2, 0.3, 0.4]}
    found = findings(record(curves, 0.0))
    assert found[0] == "`idle` never moved (it stayed at 0.5): the policy is not optimising it."
    # bonus: mean size 17.5 > 10 x (0.5 + 0.25)
    assert found[1] == ("`bonus` is more than 10 times larger than the other terms together "
                        "(mean size 17.5 vs 0.75): it drowns them out.")
    assert found[2].startswith("The return rose from 0 to 4 while success stayed at 0")
    assert "the term `bonus` grew most" in found[2]
    text = reflection(record(curves, 0.0))
    assert "In this program:\n- `idle` never moved" in text
    assert "`bonus`: 0, 10, 20, 40 (max 40, mean 17.5, min 0)" in text
    # a healthy program: no findings; a scalar reward is named as such
    calm = {"success": [0.1, 0.5], "return": [1.0, 2.0], "reward/a": [1.0, 2.0], "reward/b": [2.0, 3.0]}
    assert findings(record(calm, 0.6)) == [] and "In this program" not in reflection(record(calm, 0.6))
    assert "The reward is a single scalar" in reflection(record({"success": [0.1, 0.5]}, 0.6))
    assert "Episode length over training (10 points, first to last): not recorded" in reflection(record(calm, 0.6))


@pytest.mark.slow
def test_cli_run_and_its_replay_are_the_same_run(tmp_path):
    cfg = toy_config(search={"iterations": 2, "candidates": 2})
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    runs = {}
    for name, extra in (("first", []), ("replayed", ["--replay-from", str(tmp_path / "first")])):
        out = subprocess.run([sys.executable, "-m", "limen_jax.evolve", "--task", "toy_corridor",
                              "--strategy", "eureka", "--config", str(tmp_path / "cfg.json"), "--run-dir",
                              str(tmp_path / name), *extra], env=ENV, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "strategy eureka" in out.stdout
        runs[name] = lj.resume(tmp_path / name, verbose=False)
    first, replayed = runs["first"], runs["replayed"]
    assert [(r.id, r.parent_ids, r.code, r.success_per_seed) for r in first.records] == \
        [(r.id, r.parent_ids, r.code, r.success_per_seed) for r in replayed.records]
    assert [r.metadata["operator"] for r in first.records] == ["from_scratch"] * 2 + ["reflect"] * 4
    for it in (1, 2):
        batch = [r for r in first.records if r.iteration == it - 1]
        best = max(batch, key=lambda r: r.success)
        assert all(r.parent_ids == [best.id] for r in first.records if r.iteration == it)


# cheap: 2 batches (from scratch, then reflect) of k = 3 programs, 1,024 steps x 1 seed, no cascade
CHEAP = toy_config(search={"strategy": "eureka", "iterations": 1, "candidates": 2, "seeds": 1, "options": {"k": 3}},
                   cascade={"short_steps": 0, "full_steps": 1024})


@pytest.mark.slow  # ~40 s; the CLI run and its replay stay in the default suite
def test_cli_run_killed_with_9_while_a_reflect_batch_trains_resumes_to_the_same_run(tmp_path):
    whole = lj.evolve("toy_corridor", CHEAP, run_dir=tmp_path / "whole", verbose=False)
    first = [r for r in whole.records if r.iteration == 0]
    best = max(first, key=lambda r: r.success)  # the first of equals, as the strategy takes it
    assert len(whole.records) == 6 and all(r.parent_ids == [best.id] for r in whole.records[3:])
    run_dir = tmp_path / "cli"
    config = {**CHEAP, "search": {k: v for k, v in CHEAP["search"].items() if k not in ("strategy", "options")}}
    # killed once batch 1's answers were checked, while they train: the checkpoint is batch 0's
    killed = kill_and_resume(run_dir, config, logged("program", "it0001"),
                             ["--strategy", "eureka", "--set", "search.options.k=3"])
    assert killed["iteration"] == 0 and killed["strategy"] == {"parent": best.id}
    assert sorted(p["id"] for p in killed["archive"]["programs"]) == [r.id for r in first]
    assert checkpoint(run_dir)["strategy"] == checkpoint(whole.run_dir)["strategy"]
    assert_same_programs(run_dir, whole.records,
                         lambda r: (r.code, r.parent_ids, r.success_per_seed, r.metadata["operator"]))
