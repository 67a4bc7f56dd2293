"""``--prescreen demos[:threshold]``: reward programs that rank demonstrations below the
threshold are rejected between the checker and training, and the next prompt says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from limen_jax.search.evaluation.prescreen import Prescreen, parse_prescreen

ROOT = Path(__file__).resolve().parents[3]


def test_parse_prescreen():
    assert parse_prescreen(None) is None and parse_prescreen("none") is None
    assert parse_prescreen("demos") == Prescreen("demos", 0.5)
    assert parse_prescreen("demos:0.75") == Prescreen("demos", 0.75)
    for bad, why in (("demos:abc", "must be a number"), ("demos:1.5", "must be a number"),
                     ("ppo:0.5", "unknown kind 'ppo'")):
        with pytest.raises(ValueError, match=why):
            parse_prescreen(bad)


def cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "limen_jax.evolve", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=900)


def test_a_bad_value_is_one_clear_line_and_exit_2(tmp_path):
    out = cli("--task", "xland_easy", "--prescreen", "demos:abc", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: prescreen 'demos:abc': the threshold must be a number in [0, 1], got 'abc'"]


def test_rejected_before_training_and_told_to_the_llm(tmp_path):
    run = tmp_path / "run"
    out = cli("--task", "xland_easy", "--mutator", "offline", "--iterations", "1", "--candidates", "2",
              "--full-steps", "20000", "--seed", "3", "--prescreen", "demos:0.99", "--run-dir", str(run), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    screened = [e for e in events if e["event"] == "prescreen"]
    assert len(screened) == 4 and not any(e["passed"] for e in screened)
    assert all(0.0 <= e["score"] < 0.99 for e in screened)
    rejects = {e["id"]: e for e in events if e["event"] == "reject"}
    assert set(rejects) == {e["id"] for e in screened}
    for e in screened:
        error = rejects[e["id"]]["error"]
        assert error["stage"] == "prescreen" and error["blame"] == "program"
        assert f"accuracy {e['score']:.3f}" in error["message"] and "threshold 0.99" in error["message"]
    assert not any(e["event"] in ("score", "policy") for e in events)  # nothing was trained
    demos = [e for e in events if e["event"] == "demos"]
    assert len(demos) == 1 and demos[0]["expert"] > 0 and demos[0]["random"] > 0
    assert (run / "demos.npz").is_file()
    # the terminal shows each batch's verdicts, one line per batch
    lines = [line for line in out.stdout.splitlines() if line.startswith("  prescreen demos")]
    assert lines == ["  prescreen demos (threshold 0.99): " + "; ".join(
        f"{e['id']} {e['score']:.3f} rejected" for e in screened if e["iteration"] == it) for it in (0, 1)]
    # the second batch's prompts show the first batch's rejections with the accuracy
    prompts = [e for e in events if e["event"] == "prompt" and e["iteration"] == 1]
    first = [e for e in screened if e["iteration"] == 0]
    assert prompts and all(any(f"accuracy {e['score']:.3f}" in p["user"] for e in first) for p in prompts)


def test_a_task_without_an_expert_needs_demos(tmp_path, capsys):
    from limen_jax.run.cli import main

    assert main(["--task", "toy_corridor", "--prescreen", "demos", "--mutator", "offline",
                 "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --prescreen demos: task 'toy_corridor' has no scripted expert to build demonstrations "
                   "from; supply them with --demos PATH (python -m limen_jax.demos --from-policy writes them from a "
                   "trained policy)"]


def test_demonstrations_supplied_with_demos(tmp_path):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from toy_task import ToyCorridor

    import limen_jax as lj
    from limen_jax import demos

    task = ToyCorridor()
    walk = lambda sim, key: jnp.where(sim.goal > sim.pos, 2, 0).astype(jnp.int32)  # noqa: E731
    mine = demos.from_episodes(demos.rollout(task, walk, jax.random.key(0), 4), "expert").extend(
        demos.from_episodes(demos.rollout(task, demos.random_policy(task), jax.random.key(1), 4), "random"))
    path = mine.save(tmp_path / "mine.npz")
    run = lj.evolve("toy_corridor", {"seed": 1, "llm": {"mutator": "offline"},
                                             "search": {"iterations": 0, "candidates": 2, "prescreen": "demos:1.0",
                                                        "demos": str(path)},
                                             "cascade": {"full_steps": 2_000}},
                    run_dir=tmp_path / "run", verbose=False)
    kept = demos.load_demos(tmp_path / "run" / "demos.npz", task)
    assert kept.counts() == mine.counts()
    np.testing.assert_array_equal(kept.transitions.action, mine.transitions.action)
    # a threshold of 1.0 asks for a perfect ranking: what fell short was rejected, with its score
    for r in run.records:
        score = r.metadata["scores"]["demos"]
        assert (r.error is None) == (score >= 1.0)
        if r.error is not None:
            assert r.error["stage"] == "prescreen" and f"accuracy {score:.3f}" in r.error["message"]
