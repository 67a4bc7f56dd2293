"""The trainer's carried state as pytrees: :class:`TrainState` between updates,
:class:`Rollout` between the rollout's host calls, :class:`Acted` from ``act`` to the
kernel and ``settle`` (see :mod:`limen_jax.rl.core`)."""

from __future__ import annotations

from typing import Any

import jax
from flax import struct

from limen_jax.rl.env import EnvState, ResetPool
from limen_jax.rl.normalize import ObsStats
from limen_jax.task import TaskState

PyTree = Any


class TrainState(struct.PyTreeNode):
    """Everything the trainer carries between updates; leaves lead with [K, S].

    env, carry, prev_action, prev_reward: per environment, [K, S, N, ...].
    update: int32, updates done by the slot. total_updates: int32, the slot's budget:
    it is frozen once ``update`` reaches it, and learning-rate annealing runs over it.
    seed: int32, the seed the slot's randomness derives from. dims: int32, the
    candidate's obs_dim (features past it are padding). diverged_at: int32, the first
    update whose observations, rewards or parameters were not finite (-1: never); such
    a slot is frozen from then on.
    """

    params: jax.Array  # float32[K, S, P]: the network parameters, flattened (FlatTree)
    opt_state: PyTree
    obs_stats: ObsStats
    env: EnvState
    carry: jax.Array
    prev_action: jax.Array
    prev_reward: jax.Array
    key: jax.Array
    update: jax.Array
    total_updates: jax.Array
    seed: jax.Array
    dims: jax.Array
    diverged_at: jax.Array


class Rollout(struct.PyTreeNode):
    """The rollout's carry between host calls; leaves [K, S, ...] (pool None when
    reset_pool = 0). started: envs that had not started before this update (int32[K, S]).
    greedy: bool[K, S], act with the mode instead of sampling (evaluation only)."""

    env: EnvState
    carry: jax.Array
    prev_action: jax.Array
    prev_reward: jax.Array
    pool: ResetPool | None
    key: jax.Array
    k_ppo: jax.Array
    next_key: jax.Array
    started: jax.Array
    greedy: jax.Array


class Acted(struct.PyTreeNode):
    """What ``act`` hands to the kernel and to ``settle``; leaves [K, S, N, ...]."""

    obs: jax.Array  # the normalised observation the policy saw
    raw: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    carry: jax.Array
    next_task: TaskState
    key: jax.Array  # [K, S]: the carried key
    k_reset: jax.Array  # [K, S]: for reset_pool = 0
