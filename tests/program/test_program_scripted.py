"""Scripted rollouts in the check sample: states random play does not reach."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from walk_task import Walk, WalkRightOnly

from limen_jax.program import Limits, check_sample, check_source

# Finite everywhere random play goes; log of a non-positive number at the left wall.
WALL_NAN = """
import jax.numpy as jnp

def get_observation(state):
    return jnp.stack([state.pos / 100.0, state.step_num / 200.0]).astype(jnp.float32)

def compute_reward(state, action, next_state):
    return (0.01 * jnp.log(next_state.pos.astype(jnp.float32) - 2.0) + next_state.pos / 100.0).astype(jnp.float32)
"""


@pytest.fixture(scope="module")
def walk() -> Walk:
    return Walk()


def test_random_rollouts_alone_miss_the_far_wall(walk: Walk) -> None:
    limits = Limits(scripted_sample_size=0)  # the sample as it was before scripted rollouts
    sample = check_sample(walk, limits)
    assert int(jnp.min(sample.next_sim.pos)) > 2
    report = check_source(WALL_NAN, walk, limits=limits)
    assert report.ok, report.error


def test_scripted_rollouts_reach_it_and_the_program_is_refused(walk: Walk) -> None:
    sample = check_sample(walk, Limits())
    assert len(sample.action) == Limits().sample_size + Limits().long_sample_size + Limits().scripted_sample_size
    # the left wall, and far right (reaching cell 100 ends the episode)
    assert int(jnp.min(sample.next_sim.pos)) == 0 and int(jnp.max(sample.next_sim.pos)) > 75
    report = check_source(WALL_NAN, walk)
    assert not report.ok and report.error is not None and report.error.stage == "nonfinite"
    assert "`compute_reward` returned NaN" in report.error.message


def test_default_scripted_policies_repeat_and_cycle_actions(walk: Walk) -> None:
    act = jax.vmap(jax.vmap(walk.scripted_action, in_axes=(None, 0)), in_axes=(0, None))
    table = np.asarray(act(jnp.arange(6), jnp.arange(6)))
    np.testing.assert_array_equal(table[:3], [[0] * 6, [1] * 6, [2] * 6])  # one action repeated
    np.testing.assert_array_equal(table[3], [0, 0, 1, 1, 2, 2])  # every action in turn, two steps each
    np.testing.assert_array_equal(table[5], [2, 2, 0, 0, 1, 1])


def test_continuous_scripted_policies_are_the_extremes_and_zero() -> None:
    from limen_jax.task import Box

    class Arm(Walk):
        action_space = Box(2, -1.0, 1.0)

    act = jax.vmap(Arm().scripted_action, in_axes=(0, None))
    table = np.asarray(act(jnp.arange(7), jnp.int32(3)))
    np.testing.assert_array_equal(table, [[0, 0], [1, 1], [-1, -1], [1, 0], [-1, 0], [0, 1], [0, -1]])


def test_a_task_supplies_its_own_scripted_policy() -> None:
    limits = Limits()
    sample = check_sample(WalkRightOnly(), limits)
    scripted = sample.next_sim.pos[-limits.scripted_sample_size :]
    np.testing.assert_array_equal(np.asarray(sample.action[-limits.scripted_sample_size :]), 2)
    assert int(jnp.min(scripted)) >= 50
