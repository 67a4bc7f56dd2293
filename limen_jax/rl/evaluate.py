"""Evaluation of success: fresh episodes at the training horizon with the trained policy.

Each slot (candidate k, seed s) runs ``config.eval_episodes`` new episodes, one per
environment, for at most ``task.episode_length`` steps, acting with actions *sampled*
from the policy (what the paper measures; ``config.eval_deterministic`` takes the mode
instead). A slot's score is the fraction of its episodes whose ``TaskState.success``
holds when the episode ends. Episodes derive from ``fold_in(key, seed)``, so every
candidate trained with the same seed is judged on the same start states.

The policy acts through :meth:`Core.act`, the very compiled step the rollout uses, and
the programs through the batch's kernel; these pure functions only start the episodes
and keep the score (the host loop is :meth:`BatchTrainer.evaluate_full`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from limen_jax.rl.core import Acted, Core, TrainState, slots
from limen_jax.rl.env import EnvState
from limen_jax.task import TaskState


class EvalCarry(struct.PyTreeNode):
    """Leaves [K, S, M] (M = ``Core.eval_envs``); key [K, S]."""

    env: EnvState
    carry: jax.Array
    prev_action: jax.Array
    prev_reward: jax.Array
    alive: jax.Array
    success: jax.Array
    returns: jax.Array
    key: jax.Array


def eval_begin(core: Core, state: TrainState, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """key [K, S] (one key, broadcast) -> the keys of the episodes' start states [K, S, M]
    (for :meth:`Core.reset_tasks`) and the acting keys [K, S]."""
    slot_keys = slots(jax.random.fold_in)(key, state.seed)
    ks = slots(lambda k: jax.random.split(k, 2))(slot_keys)
    k_reset, k_act = ks[:, :, 0], ks[:, :, 1]
    return slots(lambda k: jax.random.split(k, core.eval_envs))(k_reset), k_act


def eval_init(core: Core, tasks: TaskState, obs: jax.Array, k_act: jax.Array) -> EvalCarry:
    """The start states with their observations (from the kernel)."""
    shape = obs.shape[:-1]
    zeros = jnp.zeros(shape, jnp.int32)
    return EvalCarry(
        env=EnvState(tasks, obs, zeros, zeros.astype(jnp.float32)),
        carry=jnp.zeros(shape + (core.net.carry_dim,), jnp.float32),
        prev_action=core.net.dummy_action(shape),
        prev_reward=jnp.zeros(shape, jnp.float32),
        alive=jnp.ones(shape, bool),
        success=jnp.zeros(shape, bool),
        returns=jnp.zeros(shape, jnp.float32),
        key=k_act,
    )


def eval_settle(core: Core, c: EvalCarry, acted: Acted, reward: jax.Array, next_obs: jax.Array) -> EvalCarry:
    """Record the step; no reset: one episode per environment, finished ones masked out."""
    env, info = core.step_env(c.env, acted, reward, next_obs)
    end = info["end"]
    ended = c.alive & end
    return EvalCarry(
        env=env,
        carry=acted.carry,
        prev_action=acted.action,
        prev_reward=reward,
        alive=c.alive & ~end,
        success=jnp.where(ended, info["ep_success"], c.success),
        returns=jnp.where(ended, info["ep_return"], c.returns),
        key=acted.key,
    )
