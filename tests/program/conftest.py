"""Shared fixtures: one xland_easy task and one transition sample for the whole session.

Sampling compiles the task's rollout (the slow part of a check on a CPU); every program
test reuses this sample, so each check costs only its own tracing and compiling.
"""

from __future__ import annotations

import pytest

import limen_jax
from limen_jax.program import Limits, sample_for
from limen_jax.task import Task, Transition


@pytest.fixture(scope="session")
def easy_task() -> Task:
    return limen_jax.make("xland_easy")


@pytest.fixture(scope="session")
def easy_sample(easy_task: Task) -> Transition:
    # The same cache compile_interface uses, so checks without `sample=` hit it too.
    return sample_for(easy_task, Limits().sample_size, Limits().sample_seed)


@pytest.fixture(scope="session")
def quick_limits() -> Limits:
    """Short time limits so that endless loops are rejected within seconds."""
    return Limits(exec_seconds=2.0, trace_seconds=5.0)
