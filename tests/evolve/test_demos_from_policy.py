"""``python -m limen_jax.demos --from-policy``: a demonstration set for a task with no
scripted expert, from a kept policy trained with a good interface (expert), random play
and an early checkpoint (negatives), that ``--prescreen demos`` and GRACE's ranking take."""

from __future__ import annotations

import numpy as np
import pytest
from toy_task import ToyCorridor

import limen_jax as lj
from limen_jax import demos
from limen_jax.demos import main as demos_main
from limen_jax.interface import default_interface
from limen_jax.program import compile_interface
from limen_jax.search.evaluation.demo_ranking import demo_rewards, ranking_accuracy
from limen_jax.train import main as train_main

REFERENCE = '''
import jax.numpy as jnp

def get_observation(state):
    return jnp.stack([state.pos / 10.0, state.goal / 10.0, jnp.sign(state.goal - state.pos) * 1.0]).astype(jnp.float32)

def compute_reward(state, action, next_state):
    closer = jnp.abs(state.pos - state.goal) - jnp.abs(next_state.pos - next_state.goal)
    return (next_state.pos == next_state.goal) * 1.0 + 0.1 * closer.astype(jnp.float32)
'''
PPO = ["--ppo", "num_envs=32", "eval_episodes=16", "lr=0.003"]


def train(tmp_path, steps):
    program = tmp_path / "reference.py"
    program.write_text(REFERENCE)
    out = tmp_path / f"ref{steps}"
    assert train_main(["--task", "toy_corridor", "--interface", str(program), "--seeds", "1",
                       "--steps", str(steps), *PPO, "--save-policy", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("policy_demos")
    ref, early = train(tmp, 16_384), train(tmp, 512)
    out = tmp / "toy_demos.npz"
    argv = ["--from-policy", str(ref), "reference", "--episodes", "8", "--random", "6",
            "--negatives-from", str(early), "reference", "--task", "toy_corridor", "--out", str(out)]
    return tmp, ref, out, argv


def test_the_set_holds_the_policys_successful_episodes_and_both_negatives(written, capsys):
    tmp, ref, out, argv = written
    capsys.readouterr()
    assert demos_main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    won = int(printed[0].split(": ")[1].split(" of ")[0])
    assert printed[0].startswith("reference seed 0 on toy_corridor: ") and won >= 6  # trained: mostly successful
    with np.load(out) as data:
        arrays = {k: data[k] for k in data.files}
    m = len(arrays["source"])
    assert sorted(arrays) == ["action", "episode", "next_sim/0", "next_sim/1", "next_sim/2", "round", "sim/0",
                              "sim/1", "sim/2", "source", "step"]
    assert all(arrays[k].shape == (m,) for k in arrays)  # toy_corridor: scalar leaves, scalar actions
    source = arrays["source"]
    assert set(source.tolist()) == {"expert", "random", "learner"}
    assert len(set(arrays["episode"][source == "expert"].tolist())) == won
    assert len(set(arrays["episode"][source == "random"].tolist())) == 6
    assert len(set(arrays["episode"][source == "learner"].tolist())) == 8
    # every expert episode reached its goal: its last transition stands on it
    expert = source == "expert"
    last = np.r_[arrays["episode"][1:] != arrays["episode"][:-1], True] & expert
    assert (arrays["next_sim/0"][last] == arrays["next_sim/1"][last]).all()  # pos == goal

    # GRACE's ranking takes it: the reference reward ranks the expert above the negatives
    task = ToyCorridor()
    data = demos.load_demos(out, task)
    ifaces = [compile_interface(REFERENCE, task, mode="reward_only"), default_interface(task)]
    reference, sparse = ranking_accuracy(demo_rewards(ifaces, data.transitions), data.expert)
    assert reference > 0.7 and reference > sparse > 0.5, (reference, sparse)


def test_prescreen_demos_accepts_it(written):
    tmp, _, out, argv = written
    if not out.exists():
        assert demos_main(argv) == 0
    run = lj.evolve("toy_corridor", {"seed": 1, "llm": {"mutator": "offline"},
                                             "search": {"iterations": 0, "candidates": 2, "prescreen": "demos:0.5",
                                                        "demos": str(out)},
                                             "cascade": {"full_steps": 2_000}},
                    run_dir=tmp / "run", verbose=False)
    assert run.complete and run.records
    kept = demos.load_demos(tmp / "run" / "demos.npz", ToyCorridor())
    assert kept.counts() == demos.load_demos(out, ToyCorridor()).counts()
    for r in run.records:
        score = r.metadata["scores"]["demos"]
        assert 0.0 <= score <= 1.0 and (r.error is None) == (score >= 0.5)


def test_bad_input_is_one_line_exit_2_and_writes_nothing(written, capsys):
    tmp, ref, _, _ = written
    out = tmp / "bad.npz"
    cases = [
        (["--from-policy", str(ref), "reference", "--out", str(tmp / "x.txt")], "--out needs a .npz path"),
        (["--from-policy", str(ref), "reference", "--out", str(out), "--random", "0"], "no negatives"),
        (["--from-policy", str(ref), "nope", "--out", str(out)], "no kept policy for 'nope'"),
        (["--from-policy", str(ref), "reference", "--task", "xland_easy", "--out", str(out)],
         "was trained on 'toy_corridor'"),
        (["--from-policy", str(ref), "reference", "--task", "nope", "--out", str(out)], "unknown task 'nope'"),
    ]
    for argv, message in cases:
        capsys.readouterr()
        assert demos_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("demos: ") and message in err, (argv, err)
        assert not out.exists() and not (tmp / "x.txt").exists()
