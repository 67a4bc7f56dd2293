"""python -m limen_jax.train on a tiny budget."""

import json

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
    assert any(line.startswith("seed 0: success") for line in lines)


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
