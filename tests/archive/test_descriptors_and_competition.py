"""Deliverable 8: the reward-complexity descriptor follows helpers; only full-budget
records compete in the grid."""

from __future__ import annotations

from archive_helpers import TINY, rec

from limen_jax.archive import Archive, ArchiveConfig, ProgramRecord
from limen_jax.program.descriptors import reward_ast_size

INLINE = """\
def compute_reward(state, action, next_state):
    gap = abs(next_state.goal - next_state.pos)
    return (next_state.pos == next_state.goal) * 1.0 - 0.01 * gap + 0.1 * (abs(state.goal - state.pos) - gap)
"""
DELEGATED = """\
def shaping(state, next_state):
    gap = abs(next_state.goal - next_state.pos)
    return (next_state.pos == next_state.goal) * 1.0 - 0.01 * gap + 0.1 * (abs(state.goal - state.pos) - gap)

def unused(x):
    return x * 2 + 1 - 3 * x

def compute_reward(state, action, next_state):
    return helper(state, next_state)

helper = lambda s, n: shaping(s, n)
"""


def test_reward_size_counts_the_helpers_compute_reward_reaches():
    inline, delegated = reward_ast_size(INLINE), reward_ast_size(DELEGATED)
    assert inline == 64
    # compute_reward (13 nodes) + the lambda it calls (11) + the def the lambda calls (63);
    # the unused helper (19) is not counted. Before: 13, from bin 2 down to bin 0.
    assert delegated == 13 + 11 + 63
    assert delegated >= inline  # delegating never moves a program to a smaller-reward bin
    assert reward_ast_size("def get_observation(state):\n    return state\n") == 0


def test_a_short_run_score_never_displaces_a_multi_seed_full_run():
    archive = Archive(ArchiveConfig(num_islands=1, grid=TINY))
    assert archive.add(rec("full", 0.4))
    short = ProgramRecord("short", "# s", obs_dim=10, reward_ast_size=3, success=0.9, success_per_seed=[0.9],
                          stage="short")
    assert not archive.add(short)
    assert archive.best().id == "full" and archive.store.best().id == "full"
    assert [r.id for r in archive.store.top_k(5)] == ["full"]
