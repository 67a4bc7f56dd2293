"""The candidates' side of the environments: :class:`BatchedInterface` applies K
interfaces' φ and R over a leading candidate axis (candidate k's programs touch only
slice k, a static unroll), :class:`EnvState` is the environments' state (the task's, φ
of it, the episode's step count and sums), :class:`ResetPool` hands out fresh episode
starts.

The trainer steps them (:mod:`limen_jax.rl.core`): R is computed on the true transition
(s, a, s') *before* the auto-reset replaces s', so a reward paid only on the goal
transition reaches the learner (computing R on the post-reset state silently drops
every terminal bonus). An episode ends when the task terminates (``TaskState.done``) or
at the horizon (truncation; the learner bootstraps from V(φ(s')) of the true, pre-reset
s').
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from limen_jax.interface import MAX_REWARD_TERMS, Interface
from limen_jax.task import TaskState

PyTree = Any


def vmap_lead(fn: Callable[..., Any], n: int) -> Callable[..., Any]:
    """``fn`` vmapped over ``n`` leading axes of every argument."""
    for _ in range(n):
        fn = jax.vmap(fn)
    return fn


class BatchedInterface:
    """K interfaces over a leading candidate axis; observations padded to ``width``.

    mask: bool[K, width], True for candidate k's real features. Not a pytree: the
    programs are Python functions, unrolled statically inside the jitted trainer.
    term_names: per candidate, the names of its reward terms (() for a scalar reward).
    num_terms: the term slots every candidate's terms are padded to:
    :data:`~limen_jax.interface.MAX_REWARD_TERMS` when any candidate has named terms, else
    0 (a batch of scalar rewards computes and carries no terms at all).
    """

    def __init__(self, interfaces: Sequence[Interface], width: int | None = None) -> None:
        if not interfaces:
            raise ValueError("at least one interface is required")
        self.interfaces = tuple(interfaces)
        self.dims = tuple(int(i.obs_dim) for i in self.interfaces)
        self.width = int(width or max(self.dims))
        if self.width < max(self.dims):
            raise ValueError(f"width {self.width} < largest obs_dim {max(self.dims)}")
        self.mask = np.arange(self.width)[None, :] < np.asarray(self.dims)[:, None]
        self.term_names = tuple(tuple(i.reward_terms) for i in self.interfaces)
        self.num_terms = MAX_REWARD_TERMS if any(self.term_names) else 0

    def __len__(self) -> int:
        return len(self.interfaces)

    def observe(self, sim: PyTree, nb: int) -> jax.Array:
        """sim leaves [K, *B, ...] with ``nb`` = len(B) -> float32[K, *B, width] (zeros past
        each obs_dim)."""
        outs = []
        for k, iface in enumerate(self.interfaces):
            sim_k = jax.tree.map(lambda x, k=k: x[k], sim)
            obs = vmap_lead(lambda s, f=iface.observe: jnp.asarray(f(s), jnp.float32).reshape(-1), nb)(sim_k)
            pad = [(0, 0)] * (obs.ndim - 1) + [(0, self.width - obs.shape[-1])]
            outs.append(jnp.pad(obs, pad))
        return jnp.stack(outs)

    def reward(self, sim: PyTree, action: jax.Array, next_sim: PyTree, nb: int) -> jax.Array:
        """Leaves [K, *B, ...] with ``nb`` = len(B) -> float32[K, *B], R_k on slice k."""
        outs = [_reward(iface, *_slice(k, sim, action, next_sim), nb) for k, iface in enumerate(self.interfaces)]
        return jnp.stack(outs)

    def reward_terms(self, sim: PyTree, action: jax.Array, next_sim: PyTree, nb: int) -> tuple[jax.Array, jax.Array]:
        """Leaves [K, *B, ...] -> (reward float32[K, *B], terms float32[K, *B, num_terms]):
        a term program's reward is the sum of its terms (computed once), which fill its
        first slots; the other slots, and every slot of a scalar reward, are 0."""
        rewards, terms = [], []
        for k, iface in enumerate(self.interfaces):
            s, a, s2 = _slice(k, sim, action, next_sim)
            if iface.terms is None:
                rewards.append(_reward(iface, s, a, s2, nb))
                terms.append(jnp.zeros(rewards[-1].shape + (self.num_terms,), jnp.float32))
                continue
            m = len(iface.reward_terms)

            def f(s: Any, a: jax.Array, s2: Any, fn: Callable[..., Any] = iface.terms, m: int = m) -> jax.Array:
                return jnp.asarray(fn(s, a, s2), jnp.float32).reshape(m)

            t = vmap_lead(f, nb)(s, a, s2)
            rewards.append(t.sum(-1))
            terms.append(jnp.pad(t, [(0, 0)] * (t.ndim - 1) + [(0, self.num_terms - m)]))
        return jnp.stack(rewards), jnp.stack(terms)


def _slice(k: int, sim: PyTree, action: jax.Array, next_sim: PyTree) -> tuple[PyTree, jax.Array, PyTree]:
    take = lambda x: x[k]  # noqa: E731
    return jax.tree.map(take, sim), action[k], jax.tree.map(take, next_sim)


def _reward(iface: Interface, s: PyTree, a: jax.Array, s2: PyTree, nb: int) -> jax.Array:
    def r(s: Any, a: jax.Array, s2: Any) -> jax.Array:
        return jnp.asarray(iface.reward(s, a, s2), jnp.float32).reshape(())

    return vmap_lead(r, nb)(s, a, s2)  # type: ignore[no-any-return]


class EnvState(struct.PyTreeNode):
    """The environments of a batch; every leaf has leading axes [K, *B].

    task: the task's state. obs: float32[..., width], φ of the current state.
    t: int32, steps taken in the current episode. ep_return: float32, R summed so far.
    ep_terms: float32[..., M], each reward term summed so far (None when the batch has
    no term programs: M = 0).
    """

    task: TaskState
    obs: jax.Array
    t: jax.Array
    ep_return: jax.Array
    ep_terms: jax.Array | None = None


# Resetting costs far more than stepping for some simulators (xminigrid's among them), and
# under vmap an auto-reset computes a reset for every env at every step. A pool of fresh
# states drawn once per rollout, handed out in order to the envs that end, makes that
# cost P per rollout instead of N per step.


class ResetPool(struct.PyTreeNode):
    """Fresh episode-start states for one rollout of one slot: leaves [P, ...]; ``next``
    is the index of the next unused state (wraps around when more than P episodes end)."""

    states: EnvState
    next: jax.Array


def take_fresh(pool: ResetPool, end: jax.Array) -> tuple[EnvState, ResetPool]:
    """Start states for the envs of one slot: end bool[N] -> (EnvState [N, ...], pool).

    Env i, if it ends, gets pool entry next + (number of ending envs before i); envs
    that do not end get some entry that the caller discards.
    """
    size = jax.tree.leaves(pool.states)[0].shape[0]
    order = jnp.cumsum(end.astype(jnp.int32)) - 1
    idx = (pool.next + jnp.maximum(order, 0)) % size
    fresh = jax.tree.map(lambda x: x[idx], pool.states)
    return fresh, pool.replace(next=(pool.next + end.sum(dtype=jnp.int32)) % size)
