"""Evaluation of success: fresh episodes at the training horizon with the trained policy.

Each slot (candidate k, seed s) runs ``config.eval_episodes`` new episodes, one per
environment, for at most ``task.episode_length`` steps, acting with actions *sampled*
from the policy (what the paper measures; ``config.eval_deterministic`` takes the mode
instead). A slot's score is the fraction of its episodes whose ``TaskState.success``
holds when the episode ends. Episodes derive from ``fold_in(key, seed)``, so every
candidate trained with the same seed is judged on the same start states.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from flax import struct

from limen_jax.rl.env import EnvState, vmap_lead

if TYPE_CHECKING:
    from limen_jax.rl.trainer import BatchTrainer, TrainState


class _EvalCarry(struct.PyTreeNode):
    env: EnvState
    carry: jax.Array
    prev_action: jax.Array
    prev_reward: jax.Array
    alive: jax.Array
    success: jax.Array
    returns: jax.Array
    key: jax.Array


def evaluate_slots(trainer: BatchTrainer, state: TrainState, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(success rate, mean episode return under R): float32[K, S]. Pure; jit it."""
    cfg, net, env = trainer.config, trainer.net, trainer.env
    slots = lambda f: vmap_lead(f, 2)  # noqa: E731
    E = cfg.eval_episodes
    slot_keys = slots(lambda s: jax.random.fold_in(key, s))(state.seed)
    k_reset, k_act = (x[:, :, 0] for x in jnp.split(slots(lambda k: jax.random.split(k, 2))(slot_keys), 2, axis=2))
    start = env.reset(slots(lambda k: jax.random.split(k, E))(k_reset))
    shape = start.t.shape
    c0 = _EvalCarry(
        env=start,
        carry=jnp.zeros(shape + (net.carry_dim,), jnp.float32),
        prev_action=net.dummy_action(shape),
        prev_reward=jnp.zeros(shape, jnp.float32),
        alive=jnp.ones(shape, bool),
        success=jnp.zeros(shape, bool),
        returns=jnp.zeros(shape, jnp.float32),
        key=k_act,
    )

    def body(c: _EvalCarry, _: None) -> tuple[_EvalCarry, None]:
        ks = slots(lambda k: jax.random.split(k, 2))(c.key)
        key, k = ks[:, :, 0], ks[:, :, 1]
        obs = trainer._normalize(state.obs_stats, c.env.obs)
        carry, dist, _ = slots(trainer._step)(state.params, c.carry, obs, c.prev_action, c.prev_reward, c.env.t == 0)
        raw = net.dist.mode(dist) if cfg.eval_deterministic else slots(net.dist.sample)(k, dist)
        action = net.dist.to_env(raw)
        # no reset: one episode per environment; finished ones are masked out
        nxt, info, _ = env.step(c.env, action, lambda end: (c.env, None))
        ended = c.alive & info.episode_end
        return _EvalCarry(
            env=nxt,
            carry=carry,
            prev_action=action,
            prev_reward=info.reward,
            alive=c.alive & ~info.episode_end,
            success=jnp.where(ended, info.episode_success, c.success),
            returns=jnp.where(ended, info.episode_return, c.returns),
            key=key,
        ), None

    c, _ = jax.lax.scan(body, c0, None, length=env.horizon)
    return c.success.astype(jnp.float32).mean(-1), c.returns.mean(-1)
