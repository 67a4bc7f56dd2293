"""The end of one PPO update: GAE, the PPO epochs, observation statistics, freezing
(budget reached or non-finite values) and the per-update metrics. Pure; jitted by
:class:`limen_jax.rl.core.Core`."""

from __future__ import annotations

from typing import Protocol, TypeVar

import jax
import jax.numpy as jnp
import optax

from limen_jax.rl.config import PPOConfig
from limen_jax.rl.env import vmap_lead
from limen_jax.rl.losses import compute_gae
from limen_jax.rl.networks import ActorCritic
from limen_jax.rl.normalize import Moments, ObsStats, update_stats
from limen_jax.rl.ppo import Batch, FlatTree, ppo_update
from limen_jax.rl.state import Rollout, TrainState


class UpdateCore(Protocol):
    """What an update needs of :class:`limen_jax.rl.core.Core` (which imports this module)."""

    config: PPOConfig
    net: ActorCritic
    optimizer: optax.GradientTransformation
    flat: FlatTree

    def normalize(self, stats: ObsStats, dims: jax.Array, obs: jax.Array) -> jax.Array: ...

    def policy_step(self, params: jax.Array, *args: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]: ...

    def mask(self, dims: jax.Array) -> jax.Array: ...


METRICS = (
    "return",
    "success",
    "episode_length",
    "episodes",
    "pool_overflow",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_frac",
)


# one rollout step's records, or the rollout's stacked: (what PPO trains on, the step's
# rewards, ends and episode figures, the observation moments for the statistics)
Records = tuple[Batch, dict[str, jax.Array], Moments]
R = TypeVar("R")


def stack_records(records: list[R]) -> R:
    """The T steps' records (e.g. (Batch, extra, Moments)), leaves [K, S, N, ...], stacked
    per slot time-major: leaves [K, S, T, N, ...]."""
    return jax.tree.map(lambda *x: jnp.stack(x, axis=2), *records)


def finish_update(
    core: UpdateCore, ts: TrainState, ro: Rollout, stacked: Records
) -> tuple[TrainState, dict[str, jax.Array]]:
    """stacked: the rollout's (Batch, extra, Moments), leaves [K, S, T, N, ...] (see
    :func:`stack_records`) -> the new state and metrics name -> float32[K, S] (NaN where
    the slot is frozen), and with reward terms "terms" float32[K, S, M]."""
    slots = lambda f: vmap_lead(f, 2)  # noqa: E731
    cfg = core.config
    K, S = ts.update.shape  # S is the local shard when the seed axis is sharded
    batch, extra, moments = stacked

    obs = core.normalize(ts.obs_stats, ts.dims, ro.env.obs)
    last = slots(core.policy_step)(ts.params, ro.carry, obs, ro.prev_action, ro.prev_reward, ro.env.t == 0)[2]

    def gae(e: dict[str, jax.Array], value: jax.Array, last: jax.Array) -> tuple[jax.Array, jax.Array]:
        if not cfg.bootstrap_truncation:  # a horizon cut ends the episode as a termination does
            return compute_gae(e["reward"], value, e["terminated"] | e["truncated"], last, cfg.gamma, cfg.gae_lambda)
        return compute_gae(
            e["reward"], value, e["terminated"], last, cfg.gamma, cfg.gae_lambda,
            truncated=e["truncated"], truncated_value=e["next_value"],
        )  # fmt: skip

    adv, target = slots(gae)(extra, batch.value, last)
    batch = batch.replace(advantage=adv, target=target)

    frac = 1.0 - ts.update.astype(jnp.float32) / jnp.maximum(ts.total_updates, 1).astype(jnp.float32)
    lr = cfg.lr * (jnp.clip(frac, 0.0, 1.0) if cfg.anneal_lr else jnp.ones_like(frac))
    ppo = lambda *a: ppo_update(core.net, core.optimizer, core.flat, cfg, *a)  # noqa: E731
    params, opt_state, losses = slots(ppo)(ts.params, ts.opt_state, batch, ts.carry, ro.k_ppo, lr)

    stats = slots(lambda s, m, mk: update_stats(s, _merge(m), mk))(ts.obs_stats, moments, core.mask(ts.dims))

    new = ts.replace(
        params=params,
        opt_state=opt_state,
        obs_stats=stats,
        env=ro.env,
        carry=ro.carry,
        prev_action=ro.prev_action,
        prev_reward=ro.prev_reward,
        key=ro.next_key,
        update=ts.update + 1,
    )
    # A program that emits NaN or inf (or drives the parameters there) freezes its slot:
    # the update is discarded and the slot reports the update where it happened.
    finite = extra["finite"].all((2, 3)) & jnp.isfinite(params).all(-1)
    active = (ts.update < ts.total_updates) & (ts.diverged_at < 0)
    keep = active & finite
    new = jax.tree.map(lambda a, b: jnp.where(keep.reshape(keep.shape + (1,) * (a.ndim - 2)), a, b), new, ts)
    new = new.replace(diverged_at=jnp.where(active & ~finite, ts.update, ts.diverged_at))

    end = extra["end"]
    episodes = end.sum((2, 3)).astype(jnp.float32)
    per_episode = lambda x: jnp.where(episodes > 0, x.sum((2, 3)) / jnp.maximum(episodes, 1.0), jnp.nan)  # noqa: E731
    pool_size = cfg.reset_pool * cfg.num_envs
    taken = episodes + ro.started.astype(jnp.float32)
    metrics = {
        "return": per_episode(extra["ep_return"]),
        "success": per_episode(extra["ep_success"]),
        "episode_length": per_episode(extra["ep_length"]),
        "episodes": episodes,
        # starts handed out twice in this rollout (the pool wrapped around)
        "pool_overflow": jnp.maximum(taken - pool_size, 0.0) if pool_size else jnp.zeros_like(episodes),
        **losses,
    }
    metrics = {k: jnp.where(keep, v, jnp.nan) for k, v in metrics.items()}
    if "ep_terms" in extra:  # [K, S, M]: each reward term's mean sum over the ended episodes
        terms = extra["ep_terms"].sum((2, 3)) / jnp.maximum(episodes, 1.0)[..., None]
        metrics["terms"] = jnp.where((keep & (episodes > 0))[..., None], terms, jnp.nan)
    return new, metrics


def _merge(m: Moments) -> Moments:
    """Merge T equal-count moments (leaves [T, ...]) into one."""
    mean = m.mean.mean(0)
    m2 = m.m2.sum(0) + (jnp.square(m.mean - mean) * m.count[:, None]).sum(0)
    return Moments(mean, m2, m.count.sum())
