"""A long 1-D walk for the scripted-rollout tests: 101 cells, start in the middle, 200 steps.

Random play stays near cell 50 (a random walk of 200 steps drifts by about 12 cells);
repeating one action reaches a wall at step 50.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from limen_jax.task import Discrete, Task, TaskState


class WalkSim(struct.PyTreeNode):
    pos: jax.Array  # int32 cell in [0, 100]
    step_num: jax.Array


class Walk(Task):
    """Actions: 0 left, 1 stay, 2 right. Success: reach cell 100."""

    name = "walk_101"
    description = "1-D walk over 101 cells: reach the right end within 200 steps"
    episode_length = 200
    action_space = Discrete(3)

    def reset(self, key: jax.Array) -> TaskState:
        sim = WalkSim(jnp.int32(50), jnp.int32(0))
        return TaskState(sim=sim, done=jnp.asarray(False), success=jnp.asarray(False))

    def step(self, state: TaskState, action: jax.Array) -> TaskState:
        pos = jnp.clip(state.sim.pos + action.astype(jnp.int32) - 1, 0, 100)
        done = (pos == 100) | (state.sim.step_num + 1 >= self.episode_length)
        sim = WalkSim(pos, state.sim.step_num + 1)
        return TaskState(sim=sim, done=done, success=state.success | (pos == 100))

    def default_observation(self, sim: Any) -> jax.Array:
        return jnp.stack([sim.pos / 100.0, sim.step_num / 200.0]).astype(jnp.float32)

    def sparse_reward(self, sim: Any, action: jax.Array, next_sim: Any) -> jax.Array:
        return (next_sim.pos == 100).astype(jnp.float32)

    @property
    def context(self) -> str:
        return "`state.pos` (int32 cell 0..100, start 50), `state.step_num`; actions 0 left 1 stay 2 right"


class WalkRightOnly(Walk):
    """The same walk, whose own scripted policies all walk right."""

    name = "walk_101_right"

    def scripted_action(self, policy: jax.Array, t: jax.Array) -> jax.Array:
        return jnp.int32(2)
