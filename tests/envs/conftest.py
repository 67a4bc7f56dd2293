"""Session fixtures: one compiled rollout per MuJoCo task (skipped only without the extra)."""

from __future__ import annotations

import pytest
from mujoco_extra import require_mujoco


def _rollout(name: str):
    require_mujoco()
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
