"""A MuJoCo task with its compiled batched reset and step, shared by the env tests.

MJX compiles are slow on a CPU, so each task compiles one batched rollout (2 envs) once
per session (the fixtures in conftest.py) and every test of that task reuses it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import limen_jax as lj
from limen_jax.task import TaskState, Transition

N_ENVS, N_STEPS = 2, 3


class Rollout:
    """A task plus its compiled batched reset and rollout (``N_ENVS`` envs)."""

    def __init__(self, name: str) -> None:
        self.task = lj.make(name)
        self.reset = jax.jit(jax.vmap(self.task.reset))
        self.step = jax.jit(jax.vmap(self.task.step))
        self.states = self.reset(jax.random.split(jax.random.key(0), N_ENVS))

    def run(self, key: jax.Array, steps: int = N_STEPS) -> tuple[TaskState, Transition]:
        """``steps`` random-action steps from the fixture's reset states; all transitions."""
        states, seen = self.states, []
        for k in jax.random.split(key, steps):
            actions = jax.vmap(self.task.action_space.sample)(jax.random.split(k, N_ENVS))
            nxt = self.step(states, actions)
            seen.append(Transition(sim=states.sim, action=actions, next_sim=nxt.sim))
            states = nxt
        return states, jax.tree.map(lambda *x: jnp.concatenate(x), *seen)
