"""Transitions from scripted rollouts: states far from the start that random play rarely reaches.

Random actions keep an agent near where it started (a random walk drifts by the square
root of the steps taken); a program that divides by a distance to a far wall, or
overflows after step 100, passes a check on random rollouts and breaks in training. So
the check sample also holds transitions from rollouts in which environment i follows
the task's scripted policy i (:meth:`limen_jax.task.Task.scripted_action`: by default
one action repeated, short cycles of actions, constant extreme continuous actions).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from limen_jax.task import Task, TaskState, Transition, tree_where


def scripted_transitions(task: Task, key: jax.Array, num: int, horizon: int) -> Transition:
    """``num`` transitions: environment i follows scripted policy i for ``horizon`` steps
    (auto-resetting when an episode ends) and gives the transition at one step drawn from
    the second half of its rollout. Pure and jit-able (``num``, ``horizon`` static)."""
    k_reset, k_again, k_pick = jax.random.split(key, 3)
    states = jax.vmap(task.reset)(jax.random.split(k_reset, num))
    policies = jnp.arange(num, dtype=jnp.int32)
    pick = jax.random.randint(k_pick, (num,), horizon // 2, horizon)
    act = jax.vmap(task.scripted_action, in_axes=(0, None))
    first = jax.eval_shape(lambda s: Transition(s.sim, act(policies, jnp.int32(0)), s.sim), states)
    kept = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), first)

    def advance(carry: tuple[TaskState, Transition], xs: tuple[jax.Array, jax.Array]) -> tuple[Any, None]:
        states, kept = carry
        t, rkeys = xs
        actions = act(policies, t)
        nxt = jax.vmap(task.step)(states, actions)
        kept = tree_where(pick == t, Transition(sim=states.sim, action=actions, next_sim=nxt.sim), kept)
        fresh = jax.vmap(task.reset)(rkeys)
        return (tree_where(nxt.done, fresh, nxt), kept), None

    steps = jnp.arange(horizon, dtype=jnp.int32)
    (_, kept), _ = jax.lax.scan(advance, (states, kept), (steps, jax.random.split(k_again, (horizon, num))))
    return kept
