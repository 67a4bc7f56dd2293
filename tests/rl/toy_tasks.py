"""Tiny tasks on the Task protocol, cheap enough to train inside the test suite."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from limen_jax.task import Box, Discrete, Task, TaskState


class CorridorSim(struct.PyTreeNode):
    pos: jax.Array  # int32, cell in [0, length)
    goal: jax.Array  # int32, 0 or length - 1 (drawn per episode)
    step_num: jax.Array


class Corridor(Task):
    """A 1-D corridor of 11 cells; start in the middle; the goal is one of the two ends,
    drawn per episode. Actions: 0 left, 1 stay, 2 right. Success: reach the goal within
    16 steps (a random walk does so about 4% of the time)."""

    name = "corridor"
    description = "1-D corridor: walk to the end marked as the goal"
    episode_length = 16
    action_space = Discrete(3)
    params = {"length": 11.0}  # a task parameter, for --perturb tests

    @property
    def length(self) -> int:
        return int(self.params["length"])

    def reset(self, key: jax.Array) -> TaskState:
        goal = jnp.where(jax.random.bernoulli(key), self.length - 1, 0).astype(jnp.int32)
        sim = CorridorSim(jnp.asarray(self.length // 2, jnp.int32), goal, jnp.asarray(0, jnp.int32))
        return TaskState(sim=sim, done=jnp.asarray(False), success=jnp.asarray(False))

    def step(self, state: TaskState, action: jax.Array) -> TaskState:
        sim = state.sim
        pos = jnp.clip(sim.pos + action.astype(jnp.int32) - 1, 0, self.length - 1)
        reached = pos == sim.goal
        new = sim.replace(pos=pos, step_num=sim.step_num + 1)
        return TaskState(sim=new, done=reached, success=state.success | reached)

    def default_observation(self, sim: Any) -> jax.Array:
        return jnp.stack([sim.pos / (self.length - 1), sim.goal / (self.length - 1)]).astype(jnp.float32)

    def sparse_reward(self, sim: Any, action: jax.Array, next_sim: Any) -> jax.Array:
        return (next_sim.pos == next_sim.goal).astype(jnp.float32)

    @property
    def context(self) -> str:
        return "A corridor; `state.pos`, `state.goal`; actions 0 left, 1 stay, 2 right."


class ReachSim(struct.PyTreeNode):
    pos: jax.Array  # float32
    target: jax.Array  # float32
    step_num: jax.Array


class Reach1D(Task):
    """Continuous 1-D reaching: pos += 0.25 * action, action in [-1, 1]; start at 0,
    target uniform in [-1, 1]; success: within 0.1 of the target after 10 steps."""

    name = "reach1d"
    description = "1-D continuous reaching"
    episode_length = 10
    action_space = Box(1)

    def reset(self, key: jax.Array) -> TaskState:
        target = jax.random.uniform(key, (), jnp.float32, -1.0, 1.0)
        sim = ReachSim(jnp.zeros((), jnp.float32), target, jnp.asarray(0, jnp.int32))
        return TaskState(sim=sim, done=jnp.asarray(False), success=jnp.asarray(False))

    def step(self, state: TaskState, action: jax.Array) -> TaskState:
        sim = state.sim
        new = sim.replace(pos=sim.pos + 0.25 * action[0], step_num=sim.step_num + 1)
        near = (jnp.abs(new.pos - new.target) < 0.1) & (new.step_num >= self.episode_length)
        return TaskState(sim=new, done=jnp.asarray(False), success=near)

    def default_observation(self, sim: Any) -> jax.Array:
        return jnp.stack([sim.pos, sim.target]).astype(jnp.float32)

    def sparse_reward(self, sim: Any, action: jax.Array, next_sim: Any) -> jax.Array:
        return -jnp.abs(next_sim.pos - next_sim.target)

    @property
    def context(self) -> str:
        return "Reach a target on a line."
