"""Hand-written test interfaces (plain Python; the program compiler is not needed here)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from limen_jax.interface import Interface, observation_dim
from limen_jax.task import Task

_DIRS = jnp.array([[-1, 0], [0, 1], [1, 0], [0, -1]], jnp.int32)
PYRAMID, BALL, WALL, FLOOR = 5, 3, 2, 1
BLUE, RED = 3, 1


def _locate(grid: jax.Array, tile: int, colour: int) -> tuple[jax.Array, jax.Array]:
    """(y, x) of the first matching cell and whether one exists."""
    hit = (grid[..., 0] == tile) & (grid[..., 1] == colour)
    idx = jnp.argmax(hit.reshape(-1))
    return jnp.stack([idx // grid.shape[1], idx % grid.shape[1]]).astype(jnp.int32), hit.any()


def _egocentric(state, target: jax.Array) -> jax.Array:
    d = target - state.agent.position
    fwd = _DIRS[state.agent.direction]
    right = _DIRS[(state.agent.direction + 1) % 4]
    return jnp.stack([jnp.dot(d, fwd), jnp.dot(d, right)]).astype(jnp.float32)


def xland_easy_observation(state) -> jax.Array:
    """17 features: egocentric offsets to the pyramid and the ball, front cell, pocket."""
    grid = state.grid
    pyr, _ = _locate(grid, PYRAMID, BLUE)
    ball, ball_there = _locate(grid, BALL, RED)
    front = state.agent.position + _DIRS[state.agent.direction]
    cell = grid[front[0], front[1]]
    size = float(grid.shape[0])
    feats = [
        _egocentric(state, pyr) / size,
        jnp.abs(pyr - state.agent.position).sum()[None] / size,
        jnp.where(ball_there, _egocentric(state, ball) / size, 0.0),
        jnp.stack(
            [
                (cell[0] == PYRAMID) & (cell[1] == BLUE),
                (cell[0] == BALL) & (cell[1] == RED),
                cell[0] == WALL,
                cell[0] == FLOOR,
                state.agent.pocket[0] != 0,
            ]
        ).astype(jnp.float32),
        jax.nn.one_hot(state.agent.direction, 4),
        state.agent.position.astype(jnp.float32) / size,
        ball_there[None].astype(jnp.float32),
    ]
    return jnp.concatenate(feats).astype(jnp.float32)


def xland_easy_reward(state, action, next_state) -> jax.Array:
    """10 on the goal transition (the blue pyramid enters the pocket), plus distance shaping."""
    got = (next_state.agent.pocket[0] == PYRAMID) & (next_state.agent.pocket[1] == BLUE)
    was = (state.agent.pocket[0] == PYRAMID) & (state.agent.pocket[1] == BLUE)
    pyr, _ = _locate(state.grid, PYRAMID, BLUE)
    before = jnp.abs(pyr - state.agent.position).sum()
    after = jnp.abs(pyr - next_state.agent.position).sum()
    shaping = 0.1 * (before - after).astype(jnp.float32)
    return (10.0 * (got & ~was) + jnp.where(got, 0.0, shaping)).astype(jnp.float32)


def goal_bonus_reward(state, action, next_state) -> jax.Array:
    """10.0 on the goal transition only (xland_easy): nothing else is ever paid."""
    got = (next_state.agent.pocket[0] == PYRAMID) & (next_state.agent.pocket[1] == BLUE)
    was = (state.agent.pocket[0] == PYRAMID) & (state.agent.pocket[1] == BLUE)
    return (10.0 * (got & ~was)).astype(jnp.float32)


def make(task: Task, observe, reward, name: str) -> Interface:
    return Interface(observe, reward, observation_dim(task, observe), 1, "", name)


def xland_easy_good(task: Task) -> Interface:
    return make(task, xland_easy_observation, xland_easy_reward, "xland_easy_good")


def xland_easy_goal_bonus(task: Task) -> Interface:
    return make(task, xland_easy_observation, goal_bonus_reward, "xland_easy_goal_bonus")


# --- the corridor (toy_tasks.Corridor) ---------------------------------------------------

_PROJ = jax.random.normal(jax.random.key(42), (4, 287))


def corridor_obs7(sim) -> jax.Array:
    p, g = sim.pos / 10.0, sim.goal / 10.0
    return jnp.stack(
        [p, g, p - g, (sim.goal > sim.pos).astype(jnp.float32), 1.0 - p, sim.step_num / 16.0, jnp.abs(p - g)]
    ).astype(jnp.float32)


def corridor_obs300(sim) -> jax.Array:
    """One-hot position and goal side, then 287 fixed random projections: 300 features."""
    base = jnp.concatenate([jax.nn.one_hot(sim.pos, 11), jax.nn.one_hot(sim.goal // 10, 2)])
    x = jnp.stack([sim.pos / 10.0, sim.goal / 10.0, sim.step_num / 16.0, 1.0])
    return jnp.concatenate([base, jnp.tanh(x @ _PROJ)]).astype(jnp.float32)


def corridor_goal_reward(sim, action, next_sim) -> jax.Array:
    return (next_sim.pos == next_sim.goal).astype(jnp.float32)


def corridor_blind_obs(sim) -> jax.Array:
    return jnp.zeros((3,), jnp.float32)


def corridor_stay_reward(sim, action, next_sim) -> jax.Array:
    """Pays for standing still: a policy that learns it never reaches a goal."""
    return (action == 1).astype(jnp.float32)


def corridor_interfaces() -> dict[str, Interface]:
    """obs7 / obs300: good interfaces of 7 and 300 features; blind: constant obs, rewarded
    for standing still (a bad candidate)."""
    return {
        "obs7": Interface(corridor_obs7, corridor_goal_reward, 7, 1, "", "obs7"),
        "obs300": Interface(corridor_obs300, corridor_goal_reward, 300, 1, "", "obs300"),
        "blind": Interface(corridor_blind_obs, corridor_stay_reward, 3, 1, "", "blind"),
    }
