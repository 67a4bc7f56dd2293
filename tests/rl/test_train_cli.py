"""python -m limen_jax.train on a tiny budget."""

import json

from limen_jax.stats import success_interval
from limen_jax.train import main

TINY = ["--seeds", "2", "--steps", "2048", "--ppo", "num_envs=32", "eval_episodes=16", "--json"]


def _last_json(capsys):
    out = capsys.readouterr().out.strip().splitlines()
    return out, json.loads(out[-1])


def test_cli_default_interface_json(capsys):
    assert main(["--task", "toy_tasks:Corridor", "--default", *TINY]) == 0
    lines, record = _last_json(capsys)
    assert record["task"] == "corridor"
    assert len(record["success_per_seed"]) == 2 and all(0.0 <= x <= 1.0 for x in record["success_per_seed"])
    assert abs(record["success_mean"] - sum(record["success_per_seed"]) / 2) < 1e-6
    assert record["steps"] == 2048 and record["wall_s"] > 0
    assert record["rollout"] == "split"  # 64 updates of 32 x 16: "auto" keeps the once-compiled path
    assert any(line.startswith("seed 0: success") for line in lines)
    # the interval over the 2 seeds x 16 evaluation episodes, as limen_jax.stats computes it
    assert record["eval_episodes"] == 16
    assert record["success_interval"] == list(success_interval(record["success_per_seed"], 16))
    lo, hi = record["success_interval"]
    assert lo <= record["success_mean"] <= hi
    assert any(line.startswith(f"mean success {record['success_mean']:.3f} [{lo:.3f}, {hi:.3f}] over 2 seeds;")
               for line in lines)  # fmt: skip


PROGRAM = '''
import jax.numpy as jnp

def get_observation(state):
    return jnp.stack([state.pos / 10.0, state.goal / 10.0])

def compute_reward(state, action, next_state):
    return -jnp.abs(next_state.pos - next_state.goal) / 10.0
'''


def test_cli_interface_file(tmp_path, capsys):
    path = tmp_path / "corridor_iface.py"
    path.write_text(PROGRAM)
    assert main(["--task", "toy_tasks:Corridor", "--interface", str(path), *TINY]) == 0
    _, record = _last_json(capsys)
    assert record["interface"] == "corridor_iface" and len(record["success_per_seed"]) == 2


def test_cli_rejected_program(tmp_path, capsys):
    path = tmp_path / "bad.py"
    path.write_text("import os\ndef get_observation(state):\n    return os.getcwd()\n")
    assert main(["--task", "toy_tasks:Corridor", "--interface", str(path), *TINY]) == 2
    assert "rejected" in capsys.readouterr().err


def test_cli_perturb_trains_under_changed_task_parameters(capsys):
    """`--perturb` rebuilds the task with new parameters (the paper's robustness sweeps)."""
    assert main(["--task", "toy_tasks:Corridor", "--default", "--perturb", "length=5", *TINY]) == 0
    _, short = _last_json(capsys)
    assert short["params"] == {"length": 5.0}
    # a 5-cell corridor is walked in 2 steps: the default observation solves it at once
    assert short["success_mean"] > 0.9
    assert main(["--task", "toy_tasks:Corridor", "--default", "--perturb", "push_force=2", *TINY]) == 2
    assert "unknown task parameters" in capsys.readouterr().err


def test_bad_input_is_one_line_and_exit_2_and_creates_nothing(tmp_path, capsys):
    good = tmp_path / "good.py"
    good.write_text(PROGRAM)
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    out = tmp_path / "saved"
    task = ["--task", "toy_tasks:Corridor"]
    cases = [
        (["--task", "no_such_task", "--default"], "unknown task 'no_such_task'"),
        ([*task, "--interface", str(tmp_path / "missing.py")], "cannot be read (No such file or directory)"),
        ([*task, "--interface", str(tmp_path)], "cannot be read"),
        ([*task, "--interface", str(binary)], "is not text (UTF-8)"),
        ([*task, "--default", "--seeds", "0"], "--seeds must be at least 1, got 0"),
        ([*task, "--default", "--steps", "-5"], "--steps must be at least 1, got -5"),
        ([*task, "--default", "--ppo", "lr=abc"], "--ppo: PPOConfig.lr: expected"),
        ([*task, "--default", "--ppo", "learning_rate=0.1"], "--ppo: unknown PPOConfig fields ['learning_rate']"),
        ([*task, "--default", "--ppo", "lr"], "--ppo: expected KEY=VALUE, got 'lr'"),
        ([*task, "--default", "--perturb", "size=big"], "--perturb: size must be a number, got 'big'"),
        ([*task, "--interface", str(good), "--mode", "obs_only", "--ppo", "num_envs=3.5"], "--ppo: PPOConfig.num_envs"),
    ]
    for argv, says in cases:
        assert main([*argv, "--save-policy", str(out)]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("train: ") and says in err, (argv, err)
    assert not out.exists()


def test_steps_that_are_not_whole_updates_are_stated(capsys):
    assert main(["--task", "toy_tasks:Corridor", "--default", "--seeds", "1", "--steps", "3000", "--ppo",
                 "num_envs=32", "eval_episodes=16"]) == 0
    out = capsys.readouterr().out
    assert ("1 seeds x 2,560 steps (--steps 3,000 rounded to 5 whole PPO updates of 512 = 32 envs x 16 steps); "
            "cpu preset") in out
    assert "3,000" not in out.replace("(--steps 3,000 rounded", "")
