"""A corridor task with an offline catalog: cheap enough to run whole searches in tests."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from limen_jax.catalog import Catalog, Feature, Term
from limen_jax.task import Discrete, Task, TaskState


class Sim(struct.PyTreeNode):
    pos: jax.Array  # int32 cell in [0, 11)
    goal: jax.Array  # int32, 0 or 10
    step_num: jax.Array


class ToyCorridor(Task):
    """11 cells, start in the middle, the goal is one end (drawn per episode); 16 steps.
    Actions: 0 left, 1 stay, 2 right."""

    name = "toy_corridor"
    description = "1-D corridor: walk to the end marked as the goal within 16 steps"
    episode_length = 16
    action_space = Discrete(3)

    def reset(self, key: jax.Array) -> TaskState:
        goal = jnp.where(jax.random.bernoulli(key), 10, 0).astype(jnp.int32)
        sim = Sim(jnp.int32(5), goal, jnp.int32(0))
        return TaskState(sim=sim, done=jnp.asarray(False), success=jnp.asarray(False))

    def step(self, state: TaskState, action: jax.Array) -> TaskState:
        sim = state.sim
        pos = jnp.clip(sim.pos + action.astype(jnp.int32) - 1, 0, 10)
        reached = pos == sim.goal
        return TaskState(sim=sim.replace(pos=pos, step_num=sim.step_num + 1), done=reached,
                         success=state.success | reached)

    def default_observation(self, sim: Any) -> jax.Array:
        return jnp.stack([sim.pos / 10.0, sim.step_num / 16.0]).astype(jnp.float32)  # no goal: weak baseline

    def sparse_reward(self, sim: Any, action: jax.Array, next_sim: Any) -> jax.Array:
        return (next_sim.pos == next_sim.goal).astype(jnp.float32)

    @property
    def context(self) -> str:
        return "`state.pos` (int32 cell 0..10), `state.goal` (0 or 10), `state.step_num`; actions 0 left 1 stay 2 right"

    def offline_catalog(self) -> Catalog:
        return Catalog(
            prelude="",
            features=(
                Feature("pos", "f_pos = jnp.array([state.pos / 10.0])"),
                Feature("goal", "f_goal = jnp.array([state.goal / 10.0])"),
                Feature("side", "f_side = jnp.array([jnp.sign(state.goal - state.pos)], dtype=jnp.float32)"),
                Feature("time", "f_time = jnp.array([state.step_num / 16.0])"),
            ),
            terms=(
                Term("goal", "t_goal = (next_state.pos == next_state.goal).astype(jnp.float32)", 1.0),
                Term("approach", "t_approach = (jnp.abs(state.goal - state.pos)"
                     " - jnp.abs(next_state.goal - next_state.pos)).astype(jnp.float32)", 0.1),
                Term("step_cost", "t_step_cost = -1.0", 0.01),
            ),
            required_terms=("goal",),
            dense_terms=("approach",),
            seed_features=(1, 2),
        )


class ToyCorridorNoCatalog(ToyCorridor):
    """The corridor without an offline catalog: only an LLM can write its programs."""

    def offline_catalog(self) -> Catalog | None:
        return None
