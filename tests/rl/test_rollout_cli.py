"""End to end: train a dict-reward program with --save-policy, then roll it out from the CLI."""

import json

from limen_jax.rollout import main as rollout_main
from limen_jax.train import main as train_main

PROGRAM = '''
import jax.numpy as jnp

def get_observation(state):
    return jnp.stack([state.pos / 10.0, state.goal / 10.0, (state.goal > state.pos) * 1.0]).astype(jnp.float32)

def compute_reward(state, action, next_state):
    closer = jnp.abs(state.pos - state.goal) - jnp.abs(next_state.pos - next_state.goal)
    return {"goal": (next_state.pos == next_state.goal) * 1.0, "closer": 0.1 * closer.astype(jnp.float32)}
'''
TINY = ["--seeds", "2", "--steps", "8192", "--ppo", "num_envs=32", "eval_episodes=16", "lr=0.003"]


def test_train_saves_policies_and_rollout_prints_success_and_term_sums(tmp_path, capsys):
    program = tmp_path / "walker.py"
    program.write_text(PROGRAM)
    out = tmp_path / "saved"
    assert train_main(["--task", "toy_tasks:Corridor", "--interface", str(program), *TINY, "--json",
                       "--save-policy", str(out)]) == 0  # fmt: skip
    lines = capsys.readouterr().out.strip().splitlines()
    record = json.loads(lines[-1])
    assert set(record["eval_terms"]) == {"closer", "goal"}
    assert abs(record["eval_terms"]["goal"] - record["success_mean"]) < 1e-6  # paid once per success
    assert len(record["term_curves"]["goal"]) == 16  # one point per update
    assert any(line.startswith("term goal: ") for line in lines)
    assert any(line.endswith(f"python -m limen_jax.rollout {out} walker --task toy_tasks:Corridor") for line in lines)
    assert sorted(p.name for p in (out / "policies" / "walker").iterdir()) == ["seed0", "seed1"]
    assert (out / "programs" / "walker.py").read_text() == PROGRAM.strip() + "\n"

    # the directory names a module:Class: a file names no code to import, the command line may
    assert rollout_main([str(out), "walker", "--seed", "1", "--episodes", "32"]) == 2
    assert "a run directory names no code to import" in capsys.readouterr().err
    assert rollout_main([str(out), "walker", "--task", "toy_tasks:Other"]) == 2
    assert "--task toy_tasks:Other: the policy trained on 'toy_tasks:Corridor'" in capsys.readouterr().err
    assert rollout_main([str(out), "walker", "--seed", "1", "--episodes", "32", "--json",
                         "--task", "toy_tasks:Corridor"]) == 0, capsys.readouterr()
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert lines[0].startswith("walker seed 1 on corridor: success ")
    assert set(result["terms"]) == {"closer", "goal"} and result["terms"]["goal"] == result["success"]
    assert [line.split(":")[0] for line in lines[1:3]] == ["term closer", "term goal"]  # sorted by name

    # the corridor does not render: said so, no file
    gif = tmp_path / "ep.gif"
    assert rollout_main([str(out), "walker", "--episodes", "4", "--frames", str(gif),
                         "--task", "toy_tasks:Corridor"]) == 0
    assert "no frames written: task 'corridor' does not render frames" in capsys.readouterr().out
    assert not gif.exists()


def test_rollout_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "policies" / "p" / "seed3").mkdir(parents=True)
    cases = [
        ([str(tmp_path / "missing"), "p"], "is not a directory"),
        ([str(tmp_path), "q"], "no kept policy for 'q'"),
        ([str(tmp_path), "../p"], "not a program id"),
        ([str(tmp_path), "p", "--seed", "1"], "kept seeds: 3"),
        ([str(tmp_path), "p", "--episodes", "0"], "--episodes must be at least 1"),
        ([str(tmp_path), "p", "--frames", str(tmp_path / "no" / "x.gif")], "existing directory"),
        ([str(tmp_path), "p"], "cannot be read"),  # a seed directory without a policy
    ]
    before = sorted(p for p in tmp_path.rglob("*"))
    for argv, message in cases:
        assert rollout_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("rollout: ") and message in err, (argv, err)
    assert sorted(p for p in tmp_path.rglob("*")) == before
