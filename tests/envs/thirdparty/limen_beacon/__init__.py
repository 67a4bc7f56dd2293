"""beacon: walk a point agent to a beacon on a 2-D plane (a third-party limen_jax task).

Everything limen_jax needs comes through the public task protocol: the dynamics, the
success signal, the LLM context, the offline catalog, and the PPO presets and evolve
budgets for a CPU and for the paper's scale.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from limen_jax.catalog import Catalog, Feature, Term
from limen_jax.task import Box, Budget, Task, TaskState

RADIUS = 0.1  # the agent reaches the beacon within this distance
SPEED = 0.1  # the displacement of one step at full action


class BeaconSim(struct.PyTreeNode):
    """What interface programs see as ``state``."""

    pos: jax.Array  # float32 (2,), the agent, in [-1, 1]^2
    beacon: jax.Array  # float32 (2,), the beacon, in [-1, 1]^2
    step_count: jax.Array  # int32 ()


class Beacon(Task):
    """Walk a point agent to a beacon on a 2-D plane."""

    name = "beacon"
    description = "2-D point agent: reach a randomly placed beacon within 20 steps (third-party example)"
    episode_length = 20
    action_space = Box(2, -1.0, 1.0)
    ppo_presets = {
        "cpu": dict(num_envs=32, rollout_len=8, epochs=2, minibatches=2, lr=3e-3, eval_episodes=32,
                    actor_hidden=(32,), critic_hidden=(32,)),
        "paper": dict(num_envs=1024, rollout_len=20, minibatches=8),
    }  # fmt: skip
    budgets = {
        "cpu": Budget(full_steps=4_096, iterations=0, candidates=2, seeds=1),  # one generation: a smoke run
        "paper": Budget(full_steps=1_000_000, short_steps=200_000, threshold=0.1, iterations=20, candidates=2, seeds=3),
    }

    def reset(self, key: jax.Array) -> TaskState:
        k_pos, k_beacon = jax.random.split(key)
        sim = BeaconSim(
            pos=jax.random.uniform(k_pos, (2,), jnp.float32, -1.0, 1.0),
            beacon=jax.random.uniform(k_beacon, (2,), jnp.float32, -1.0, 1.0),
            step_count=jnp.asarray(0, jnp.int32),
        )
        false = jnp.asarray(False)
        return TaskState(sim=sim, done=false, success=false)

    def step(self, state: TaskState, action: jax.Array) -> TaskState:
        sim = state.sim
        pos = jnp.clip(sim.pos + SPEED * jnp.clip(action, -1.0, 1.0), -1.0, 1.0)
        nxt = sim.replace(pos=pos, step_count=sim.step_count + 1)
        reached = jnp.linalg.norm(nxt.beacon - pos) < RADIUS
        return TaskState(sim=nxt, done=reached, success=state.success | reached)

    def default_observation(self, sim: Any) -> jax.Array:
        """The agent's position only: the beacon is what an interface must expose."""
        return sim.pos.astype(jnp.float32)

    def sparse_reward(self, sim: Any, action: jax.Array, next_sim: Any) -> jax.Array:
        return (jnp.linalg.norm(next_sim.beacon - next_sim.pos) < RADIUS).astype(jnp.float32)

    @property
    def context(self) -> str:
        return (
            "## Environment: beacon\n\nA point agent on the plane [-1, 1]^2 must reach a beacon "
            f"(within {RADIUS} of it) in {self.episode_length} steps.\n\n"
            "### State\n- `state.pos`: float32 (2,), the agent\n- `state.beacon`: float32 (2,), the beacon\n"
            "- `state.step_count`: int32 ()\n\n"
            f"### Actions (`action`, float32 (2,) in [-1, 1]): the agent moves by {SPEED} x action.\n"
        )

    def offline_catalog(self) -> Catalog:
        return Catalog(
            prelude=f"RADIUS = {RADIUS}\n",
            features=(
                Feature("pos", "f_pos = state.pos"),
                Feature("beacon", "f_beacon = state.beacon"),
                Feature("offset", "f_offset = state.beacon - state.pos", prior=2.0),
                Feature("time", "f_time = jnp.array([state.step_count / 20.0])"),
            ),
            terms=(
                Term("reach", "t_reach = (jnp.linalg.norm(next_state.beacon - next_state.pos) < RADIUS)"
                     ".astype(jnp.float32)", 1.0),  # fmt: skip
                Term("approach", "t_approach = jnp.linalg.norm(state.beacon - state.pos)"
                     " - jnp.linalg.norm(next_state.beacon - next_state.pos)", 1.0),  # fmt: skip
                Term("effort", "t_effort = -jnp.sum(jnp.square(action))", 0.01),
            ),
            required_features=("pos",),
            required_terms=("reach",),
            dense_terms=("approach",),
            seed_features=(1, 2),
        )
