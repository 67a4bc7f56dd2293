"""`python -m limen_jax.evolve` on the MuJoCo tasks: the offline mutator writes programs
from the task's catalog, the batched trainer scores them, every artifact is written.

The CLI default (``--preset cpu``) is a tiny run; here it is shrunk further through
``--config`` (a first generation of two programs, one compiled batch, a few updates) so
that the test spends its time on what it checks, not on training. Mutation of MuJoCo
programs is covered by tests/envs/test_mujoco_catalogs.py.
"""

from __future__ import annotations

import pytest
from mujoco_extra import TINY_EVOLVE, evolve_cli, require_mujoco

require_mujoco()


def scores(events: list[dict]) -> list[dict]:
    return [e for e in events if e["event"] == "score"]


def test_offline_evolve_on_go1_push(tmp_path):
    events, programs = evolve_cli("go1_push", tmp_path, TINY_EVOLVE)[:2]
    # both programs passed the checker and were trained together, nothing was rejected
    assert len(scores(events)) == 2 and not [e for e in events if e["event"] == "reject"]
    assert len(programs) == 2 and all("f_proprio" in p and "t_success" in p for p in programs)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["panda_track", "ant", "humanoid", "hopper", "walker2d", "halfcheetah"])
def test_offline_evolve_on_other_mujoco_tasks(task, tmp_path):
    events = evolve_cli(task, tmp_path, TINY_EVOLVE)[0]
    assert len(scores(events)) == 2
