"""The scripted XLand expert solves every episode of each task (the demonstrations the
reward ranking and GRACE rely on)."""

from __future__ import annotations

import jax
import pytest

from limen_jax import demos
from limen_jax.task import make

TASKS = ("xland_easy", "xland_medium", "xland_hard")


def success(name: str, episodes: int, seed: int) -> tuple[float, int]:
    task = make(name)
    ep = demos.rollout(task, demos.expert_policy(task), jax.random.key(seed), episodes)
    return float(ep.success.mean()), int(ep.length.max())


@pytest.mark.parametrize("name", TASKS)
def test_the_expert_solves_100_episodes(name):
    rate, longest = success(name, 100, 7)
    assert rate == 1.0
    assert longest < make(name).episode_length


@pytest.mark.slow
@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("seed", [1, 3])
def test_the_expert_solves_1000_episodes(name, seed):
    assert success(name, 1000, seed)[0] == 1.0
