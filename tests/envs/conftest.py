"""Session fixtures: one compiled rollout per MuJoCo task (skipped without the extra)."""

from __future__ import annotations

import pytest


def _rollout(name: str):
    pytest.importorskip("mujoco.mjx")
    pytest.importorskip("brax")
    pytest.importorskip("mujoco_playground")
    from mujoco_rollout import Rollout

    return Rollout(name)


@pytest.fixture(scope="session")
def go1():
    return _rollout("go1_push")


@pytest.fixture(scope="session")
def panda():
    return _rollout("panda_track")


@pytest.fixture(scope="session")
def ant():
    return _rollout("ant")
