"""The evolution loop end to end: artifacts, replay, resume after kill -9, robustness."""

from __future__ import annotations

import json
import os

import pytest
from cli_runs import assert_same_programs, checkpoint, checkpointed, kill_and_resume
from toy_task import ToyCorridor

import limen_jax as lj
from limen_jax.llm import Completion
from limen_jax.run.cli import main
from limen_jax.train import main as train_main

TINY_PPO = {"num_envs": 32, "rollout_len": 8, "epochs": 2, "minibatches": 2, "eval_episodes": 32,
            "actor_hidden": [16, 16], "critic_hidden": [16, 16]}
TOY = {
    "search": {"iterations": 1, "candidates": 2, "seeds": 2},
    "cascade": {"short_steps": 512, "full_steps": 2048, "threshold": 0.0},
    "archive": {"num_islands": 2, "migration_interval": 1},
    "llm": {"mutator": "offline"},
    "ppo": TINY_PPO,
}
lj.register("toy_corridor", ToyCorridor, overwrite=True)


def toy_config(**over):
    cfg = json.loads(json.dumps(TOY))
    for key, value in over.items():
        cfg[key] = {**cfg.get(key, {}), **value} if isinstance(value, dict) else value
    return cfg


def summary(run):
    return [(r.id, r.code, r.success_per_seed, r.stage, (r.error or {}).get("stage")) for r in run.records]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    return lj.evolve("toy_corridor", toy_config(), run_dir=tmp_path_factory.mktemp("runs") / "a", verbose=False)


def test_run_records_every_step_and_leaves_a_readable_directory(toy_run):
    d = toy_run.run_dir
    assert toy_run.stopped == "finished"
    for name in ("config.json", "events.jsonl", "state.json", "llm_cache.jsonl", "best_interface.py",
                 "progress.png", "archive.png"):
        assert (d / name).stat().st_size > 0, name
    assert len(toy_run.records) == 4  # 2 candidates x 2 generations
    kinds = [json.loads(line)["event"] for line in (d / "events.jsonl").read_text().splitlines()]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert kinds.count("prompt") == kinds.count("response") == 4
    assert kinds.count("score") + kinds.count("reject") == 4 and "migrate" in kinds
    # each iteration's phases: compiling (at least the batch's own kernel) and the final
    # evaluations, both inside the training wall time
    for it in [json.loads(line) for line in (d / "events.jsonl").read_text().splitlines()]:
        if it["event"] == "iteration":
            assert it["compile_s"] > 0 and it["eval_s"] > 0 and it["compile_s"] + it["eval_s"] <= it["train_s"]
    scored = [r for r in toy_run.records if r.success is not None]
    assert scored and all(len(r.success_per_seed) == 2 for r in scored if r.stage == "full")
    assert all(len(r.curves["success"]) > 0 for r in scored)
    best = toy_run.best
    assert best.success == max(r.success for r in scored)
    text = (d / "best_interface.py").read_text()
    assert f"success {best.success:.3f}" in text and best.code in text
    # the best interface is a file that `check` accepts
    assert main_check(d / "best_interface.py") == 0
    assert any(r.parent_ids for r in toy_run.records if r.iteration > 0)
    # the best's 95 % interval over its seeds and their evaluation episodes, at the run's episode count
    from limen_jax.rl.config import PPOConfig
    from limen_jax.stats import success_interval

    episodes = PPOConfig.preset("toy_corridor", toy_run.config.preset).replace(**toy_run.config.ppo).eval_episodes
    lo, hi = success_interval(best.success_per_seed, episodes)
    assert lo <= best.success <= hi
    assert f"best: {best.id} success {best.success:.3f} [{lo:.2f}, {hi:.2f}] (seeds " in toy_run.summary()


def test_each_trained_program_is_stored_as_the_checked_artifact(toy_run):
    """Beside each trained program's source lie the StableHLO bytes that trained: bytes a
    cluster worker or a later session loads without running the program's Python."""
    from jax import export

    programs = toy_run.run_dir / "programs"
    trained = [r for r in toy_run.records if r.success is not None]
    assert trained
    for r in trained:
        for name in ("obs", "reward"):
            blob = (programs / f"{r.id}.{name}.stablehlo").read_bytes()
            exported = export.deserialize(bytearray(blob))
            assert exported.out_avals[0].dtype.name == "float32"
    rejected = [r for r in toy_run.records if r.success is None]
    assert not any((programs / f"{r.id}.obs.stablehlo").exists() for r in rejected)


def main_check(path):
    from limen_jax.check import main as check_main

    return check_main(["--task", "toy_corridor", str(path)])


def test_replay_from_the_cache_reproduces_the_run_exactly(toy_run, tmp_path):
    again = lj.evolve("toy_corridor", toy_config(llm={"mutator": "replay", "replay_from": str(toy_run.run_dir)}),
                      run_dir=tmp_path / "b", verbose=False)
    assert summary(again) == summary(toy_run)
    assert again.archive.to_dict()["grid"] == toy_run.archive.to_dict()["grid"]


def test_kill_9_then_resume_finishes_the_same_run(toy_run, tmp_path):
    run_dir = tmp_path / "killed"
    killed = kill_and_resume(run_dir, toy_config(), checkpointed(0))
    assert killed["iteration"] < 1
    assert checkpoint(run_dir)["iteration"] == 1
    # the same seed makes the same choices: the resumed run equals the uninterrupted one
    assert_same_programs(run_dir, toy_run.records, lambda r: (r.code, r.success_per_seed))


class BrokenMutator:
    """Cycles through the ways an answer can be bad, then gives a good program."""

    name = "broken"

    def __init__(self, good: str) -> None:
        self.good = good
        self.calls = 0

    def complete(self, system, user, images=(), seed=0):
        self.calls += 1
        answers = [
            RuntimeError("connection reset"),
            Completion(text="I cannot help with that."),
            Completion(text="```python\ndef get_observation(state)\n    return 1\n```"),
            Completion(text="```python\nimport os\n" + self.good + "\n```"),
            Completion(text="", error="retries exhausted: 529 overloaded"),
            Completion(text="```python\n" + self.good + "\n```"),
        ]
        answer = answers[(self.calls - 1) % len(answers)]
        if isinstance(answer, Exception):
            raise answer
        return answer


GOOD = """\
import jax.numpy as jnp

def get_observation(state):
    return jnp.array([state.pos / 10.0, state.goal / 10.0], dtype=jnp.float32)

def compute_reward(state, action, next_state):
    gap = jnp.abs(next_state.goal - next_state.pos)
    return jnp.asarray(next_state.pos == next_state.goal, jnp.float32) - 0.01 * gap
"""


def test_broken_answers_and_crashing_training_never_stop_the_run(tmp_path, monkeypatch):
    import limen_jax.rl as rl

    real = rl.run_cascade

    def flaky(task, interfaces, **kw):
        if any(i.name == "it0001-c05" for i in interfaces):
            raise FloatingPointError("training diverged")
        return real(task, interfaces, **kw)

    monkeypatch.setattr(rl, "run_cascade", flaky)
    # BrokenMutator answers by call order: one call in flight at a time keeps that order; it0001-c05
    # repeats it0000-c05's program, which must train again (dedupe off) for its training to crash
    cfg = toy_config(search={"iterations": 1, "candidates": 6, "seeds": 1, "dedupe": False}, cascade={"short_steps": 0},
                     llm={"concurrency": 1})
    run = lj.evolve("toy_corridor", cfg,
                    run_dir=tmp_path / "broken", mutator=BrokenMutator(GOOD), verbose=False)
    assert run.stopped == "finished"
    stages = {r.id: (r.error or {}).get("stage") for r in run.records}
    assert stages["it0000-c00"] == "mutator"
    assert "connection reset" in run.archive.store.get("it0000-c00").error["message"]
    assert stages["it0000-c01"] == "extract"
    assert stages["it0000-c02"] == "syntax"
    assert stages["it0000-c03"] == "policy"
    assert stages["it0000-c04"] == "mutator"
    assert stages["it0000-c05"] is None and run.archive.store.get("it0000-c05").success is not None
    assert stages["it0001-c05"] == "train"
    # the good program trains to a score (8 tiny updates: learning is not the point here)
    good_code = run.archive.store.get("it0000-c05").code
    assert run.best is not None and run.best.code == good_code


def test_sparse_and_obs_only_modes(tmp_path):
    cfg = toy_config(search={"mode": "sparse", "seeds": 1}, cascade={"short_steps": 0})
    sparse = lj.evolve("toy_corridor", cfg, run_dir=tmp_path / "s", verbose=False)
    assert len(sparse.records) == 1 and sparse.records[0].success is not None
    obs = lj.evolve("toy_corridor", toy_config(search={"iterations": 0, "mode": "obs_only", "seeds": 1},
                                               cascade={"short_steps": 0}),
                    run_dir=tmp_path / "o", verbose=False)
    codes = [r.code for r in obs.records if r.code]
    assert codes and all("def compute_reward" not in c and "def get_observation" in c for c in codes)
    # the "Train it:" line of each run's best_interface.py runs as printed (a tiny budget added)
    for run, flags in ((sparse, "--default"), (obs, "--interface best_interface.py --mode obs_only")):
        header = (run.run_dir / "best_interface.py").read_text()
        command = next(line for line in header.splitlines() if line.startswith("Train it: "))
        assert command == f"Train it: python -m limen_jax.train --task toy_corridor {flags} --seeds 10"
        argv = command.split("python -m limen_jax.train ")[1].split()
        cwd = os.getcwd()
        os.chdir(run.run_dir)
        try:
            assert train_main([*argv, "--steps", "1024", "--ppo", *(f"{k}={v}" for k, v in TINY_PPO.items()
                                                                     if not isinstance(v, list))]) == 0
        finally:
            os.chdir(cwd)


def test_xland_easy_cli_end_to_end(tmp_path, capsys):
    run_dir = tmp_path / "xland"
    code = main(["--task", "xland_easy", "--iterations", "1", "--candidates", "2", "--seeds", "1",
                 "--short-steps", "0", "--full-steps", "8192", "--mutator", "offline", "--run-dir", str(run_dir)])
    out = capsys.readouterr().out
    assert code == 0
    assert "[iter 1/1]" in out and "best" in out and str(run_dir) in out
    # phase times of every iteration
    assert out.count("waited") == 2 and "check " in out and "train " in out
    for name in ("best_interface.py", "progress.png", "archive.png", "events.jsonl", "state.json"):
        assert (run_dir / name).exists(), name
    assert main(["--task", "no_such_task"]) == 2
