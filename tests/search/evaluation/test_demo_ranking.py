"""Ranking reward programs on demonstrations: the accuracy on hand-computed inputs, one
vmapped call equal to a loop over programs, the hard examples, the stored set, and the
ordering of reference, sparse and hackable rewards on xland_medium."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np
import pytest

from limen_jax import demos
from limen_jax.interface import default_interface
from limen_jax.program import compile_interface
from limen_jax.search.evaluation.demo_ranking import demo_rewards, hard_pairs, ranking_accuracy
from limen_jax.task import make

HERE = Path(__file__).parent
ROOT = HERE.parents[2]


def test_accuracy_by_hand():
    # expert [3, 2] vs negatives [1, 2]: 3>1, 3>2, 2>1, 2=2 -> (3 + 1/2) / 4
    expert = np.array([True, True, False, False])
    acc = ranking_accuracy(np.array([[3.0, 2.0, 1.0, 2.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 5.0, 1.0]]), expert)
    np.testing.assert_allclose(acc, [0.875, 0.5, 0.0])


def test_rewards_that_order_transitions_alike_score_alike():
    # what makes distinct programs score exactly alike: the accuracy sees only the order
    expert = np.array([True, True, False, False, False])
    base = np.array([10.5, 0.5, 0.5, 0.0, -0.5])
    shifted, reordered = 0.1 * base - 0.01, np.array([10.5, 0.5, 0.5, 0.7, -0.5])
    acc = ranking_accuracy(np.stack([base, shifted, reordered]), expert)
    assert acc[0] == acc[1] == np.float32(5.5 / 6) and acc[2] == np.float32(4.5 / 6)


def test_a_nan_ranks_an_expert_lowest_and_a_negative_highest():
    expert = np.array([True, True, False, False])
    # expert [nan, 2] vs [1, nan]: nan<1, nan<nan(inf)?: -inf < 1, -inf < inf, 2 > 1, 2 < inf -> 1/4
    np.testing.assert_allclose(ranking_accuracy(np.array([[np.nan, 2.0, 1.0, np.nan]]), expert), [0.25])


def test_hard_pairs_are_the_lowest_margin_misranked_ones():
    expert = np.array([True, True, False, False, False])
    pairs = hard_pairs(np.array([1.0, 3.0, 2.0, 0.5, 1.0]), expert, 3)
    assert [(p.expert, p.negative, p.margin) for p in pairs] == [(0, 2, -1.0), (0, 4, 0.0)]


@pytest.fixture(scope="module")
def medium():
    task = make("xland_medium")
    return task, demos.build_demos(task, 0, experts=16, negatives=16)


def interface(task, path):
    return compile_interface(Path(path).read_text(), task, mode="reward_only")


def test_one_vmapped_call_equals_a_loop_over_programs(medium):
    task, data = medium
    ifaces = [default_interface(task), interface(task, HERE / "hackable_xland_medium.py"),
              interface(task, HERE / "spin_xland_medium.py")]
    together = demo_rewards(ifaces, data.transitions)
    assert together.shape == (3, len(data)) and together.dtype == np.float32
    alone = np.stack([demo_rewards([i], data.transitions)[0] for i in ifaces])
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_array_equal(ranking_accuracy(together, data.expert),
                                  np.concatenate([ranking_accuracy(r[None], data.expert) for r in alone]))


def test_reference_reward_ranks_above_sparse_and_hackable(medium):
    task, data = medium
    ifaces = [interface(task, ROOT / "envs" / "interfaces" / "xland_medium.py"), default_interface(task),
              interface(task, HERE / "hackable_xland_medium.py"), interface(task, HERE / "spin_xland_medium.py")]
    reference, sparse, hackable, spin = ranking_accuracy(demo_rewards(ifaces, data.transitions), data.expert)
    assert reference > hackable > sparse > 0.5 > spin
    assert reference > 0.7


def test_the_set_is_tagged_and_round_trips_through_npz(medium, tmp_path):
    task, data = medium
    assert set(data.counts()) == {"expert", "random"}
    episodes = data.episode[data.expert]
    assert sorted(set(episodes.tolist())) == list(range(16))
    # each expert episode ends on its goal transition: the sparse reward pays exactly there
    sparse = demo_rewards([default_interface(task)], data.transitions)[0]
    last = np.r_[data.episode[1:] != data.episode[:-1], True] & data.expert
    np.testing.assert_array_equal(sparse[data.expert], last[data.expert].astype(np.float32))
    back = demos.load_demos(data.save(tmp_path / "d.npz"), task)
    assert back.counts() == data.counts()
    for a, b in zip(jax.tree.leaves(data.transitions), jax.tree.leaves(back.transitions)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(back.source, data.source)


def test_a_file_without_negatives_is_refused(medium, tmp_path):
    task, data = medium
    only = data.expert
    cut = demos.DemoSet(jax.tree.map(lambda x: np.asarray(x)[only], data.transitions), data.source[only],
                        data.round[only], data.episode[only], data.step[only])
    with pytest.raises(ValueError, match="needs both expert and negative"):
        demos.load_demos(cut.save(tmp_path / "x.npz"), task)


def test_a_round_added_again_replaces_itself(medium):
    _, data = medium
    learner = dataclasses.replace(data, source=np.full(len(data), "learner"), round=np.full(len(data), 2, np.int32))
    once = demos.without(data, "learner", 2).extend(learner)
    twice = demos.without(once, "learner", 2).extend(learner)
    assert once.counts() == twice.counts() == {**data.counts(), "learner": len(data)}
