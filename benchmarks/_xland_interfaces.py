"""Interface programs for the benchmarks: a family of xland_easy candidates of varied
observation sizes and reward weights, standing in for an LLM's candidates."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from limen_jax.interface import Interface, observation_dim
from limen_jax.task import Task

DIRS = jnp.array([[-1, 0], [0, 1], [1, 0], [0, -1]], jnp.int32)
PYRAMID, BALL, WALL, FLOOR, BLUE, RED = 5, 3, 2, 1, 3, 1


def _locate(grid, tile, colour):
    hit = (grid[..., 0] == tile) & (grid[..., 1] == colour)
    idx = jnp.argmax(hit.reshape(-1))
    return jnp.stack([idx // grid.shape[1], idx % grid.shape[1]]).astype(jnp.int32)


def compact(state):
    """17 features: egocentric offsets to the pyramid and the ball, the front cell, pocket."""
    grid, agent = state.grid, state.agent
    fwd, right = DIRS[agent.direction], DIRS[(agent.direction + 1) % 4]

    def ego(p):
        d = p - agent.position
        return jnp.stack([jnp.dot(d, fwd), jnp.dot(d, right)]).astype(jnp.float32) / 9.0

    pyr, ball = _locate(grid, PYRAMID, BLUE), _locate(grid, BALL, RED)
    front = agent.position + fwd
    cell = grid[front[0], front[1]]
    flags = jnp.stack([(cell[0] == PYRAMID) & (cell[1] == BLUE), (cell[0] == BALL) & (cell[1] == RED),
                       cell[0] == WALL, cell[0] == FLOOR, agent.pocket[0] != 0]).astype(jnp.float32)  # fmt: skip
    return jnp.concatenate([ego(pyr), jnp.abs(pyr - agent.position).sum()[None] / 9.0, ego(ball), flags,
                            jax.nn.one_hot(agent.direction, 4), agent.position / 9.0, jnp.ones(1)])  # fmt: skip


def position_one_hot(state):  # 81
    return jax.nn.one_hot(state.agent.position[0] * 9 + state.agent.position[1], 81)


def local_view(state):  # 49: tile ids of the 7x7 window around the agent, scaled
    grid = jnp.pad(state.grid[..., 0], 3, constant_values=WALL)
    y, x = state.agent.position
    return jax.lax.dynamic_slice(grid, (y, x), (7, 7)).reshape(-1).astype(jnp.float32) / 12.0


def walls_3x3(state):  # 9
    grid = jnp.pad(state.grid[..., 0], 1, constant_values=WALL)
    y, x = state.agent.position
    return (jax.lax.dynamic_slice(grid, (y, x), (3, 3)).reshape(-1) == WALL).astype(jnp.float32)


BLOCKS = {"compact": compact, "pos": position_one_hot, "view": local_view, "walls": walls_3x3}


def make_observe(blocks):
    def observe(state):
        return jnp.concatenate([BLOCKS[b](state) for b in blocks]).astype(jnp.float32)

    return observe


def make_reward(shaping, step_cost):
    def reward(state, action, next_state):
        got = (next_state.agent.pocket[0] == PYRAMID) & (next_state.agent.pocket[1] == BLUE)
        pyr = _locate(state.grid, PYRAMID, BLUE)
        before = jnp.abs(pyr - state.agent.position).sum()
        after = jnp.abs(pyr - next_state.agent.position).sum()
        shaped = jnp.where(got, 0.0, shaping * (before - after).astype(jnp.float32))
        return (10.0 * got + shaped - step_cost).astype(jnp.float32)

    return reward


def candidate(task: Task, blocks, shaping=0.1, step_cost=0.0, name=None) -> Interface:
    observe = make_observe(blocks)
    label = name or f"{'+'.join(blocks)}_s{shaping}_c{step_cost}"
    return Interface(observe, make_reward(shaping, step_cost), observation_dim(task, observe), 1, "", label)


_FAMILY = [
    (("compact",), 0.1, 0.0),
    (("compact", "walls"), 0.05, 0.01),
    (("compact", "pos"), 0.1, 0.0),
    (("compact", "view"), 0.2, 0.0),
    (("compact", "pos", "view"), 0.1, 0.01),
    (("compact", "walls", "view"), 0.0, 0.0),
    (("view", "pos"), 0.1, 0.0),
    (("compact", "walls", "pos"), 0.2, 0.01),
]


def family(task: Task, k: int) -> list[Interface]:
    """``k`` distinct candidates (cycling the family with new reward weights past 8)."""
    out = []
    for i in range(k):
        blocks, shaping, cost = _FAMILY[i % len(_FAMILY)]
        out.append(candidate(task, blocks, shaping + 0.01 * (i // len(_FAMILY)), cost))
    return out


def evolved_size(task: Task) -> Interface:
    """About 150 features (17 + 81 + 49), the size evolved programs tend to reach."""
    return candidate(task, ("compact", "pos", "view"), 0.1, 0.0, name="evolved_size_147")


def evolved_size_terms(task: Task) -> Interface:
    """:func:`evolved_size` with its reward as three named terms (goal, shaping, step
    cost): the same reward, summed by the engine, each term logged by the trainer."""
    base = evolved_size(task)

    def terms(state, action, next_state):
        got = (next_state.agent.pocket[0] == PYRAMID) & (next_state.agent.pocket[1] == BLUE)
        pyr = _locate(state.grid, PYRAMID, BLUE)
        before = jnp.abs(pyr - state.agent.position).sum()
        after = jnp.abs(pyr - next_state.agent.position).sum()
        shaped = jnp.where(got, 0.0, 0.1 * (before - after).astype(jnp.float32))
        return jnp.stack([10.0 * got, shaped, jnp.zeros(())]).astype(jnp.float32)

    return dataclasses.replace(base, name="evolved_size_147_terms", reward_terms=("goal", "shaping", "step_cost"),
                               terms=terms, reward=lambda s, a, s2: terms(s, a, s2).sum())  # fmt: skip


def family_with(task: Task, k: int, salt: float) -> list[Interface]:
    """``family`` with every reward weight shifted by ``salt``: programs no compilation
    cache has seen when ``salt`` is new."""
    out = []
    for i in range(k):
        blocks, shaping, cost = _FAMILY[i % len(_FAMILY)]
        out.append(candidate(task, blocks, shaping + salt + 0.01 * (i // len(_FAMILY)), cost + abs(salt)))
    return out
