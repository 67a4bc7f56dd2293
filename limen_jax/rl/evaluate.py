"""Evaluation of success: fresh episodes at the training horizon with the trained policy.

Each slot (candidate k, seed s) runs ``config.eval_episodes`` new episodes, one per
environment, for at least ``task.episode_length`` steps, acting with actions *sampled*
from the policy (what the paper measures; ``config.eval_deterministic`` takes the mode
instead). A slot's score is the fraction of its episodes whose ``TaskState.success``
holds when the episode ends within ``task.episode_length`` steps (training episodes may
run longer: ``PPOConfig.train_horizon``). Episodes derive from ``fold_in(key, seed)``, so every
candidate trained with the same seed is judged on the same start states.

The episodes run through the training rollout itself (per step ``act``, the kernel and
``settle``, or the fused rollout), ``rollout_len`` steps at a time from a rollout state
of fresh episodes, so evaluating compiles nothing that acts or steps the task: these pure
functions only start the episodes and keep the score. Only each environment's first
episode counts; once it ends the environment restarts from the pool, as in training,
and is ignored. More episodes than ``num_envs`` run in rounds of ``num_envs``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from limen_jax.rl.core import Core, Rollout, TrainState, fresh_env, slots
from limen_jax.rl.env import ResetPool
from limen_jax.task import TaskState


class Score(struct.PyTreeNode):
    """Each environment's first episode, leaves [K, S, N]: still running, and its success
    and return once it ended; terms [K, S, N, M]: its reward terms' sums (None without
    term programs)."""

    alive: jax.Array
    success: jax.Array
    returns: jax.Array
    terms: jax.Array | None = None


def eval_begin(core: Core, rounds: int, state: TrainState, key: jax.Array) -> tuple[list[jax.Array], list[jax.Array]]:
    """key [K, S] (one key, broadcast) -> per round, the keys of its episodes' start states
    [K, S, N] (for :meth:`Core.reset_tasks`) and its acting keys [K, S]."""
    N = core.config.num_envs
    slot_keys = slots(jax.random.fold_in)(key, state.seed)
    # one split for all of them: each split is a threefry loop XLA compiles separately
    ks = slots(lambda k: jax.random.split(k, rounds * (N + 1)))(slot_keys)
    acting = [ks[:, :, r] for r in range(rounds)]
    return [ks[:, :, rounds + r * N : rounds + (r + 1) * N] for r in range(rounds)], acting


def eval_start(
    core: Core, state: TrainState, tasks: TaskState, obs: jax.Array, k_act: jax.Array
) -> tuple[Rollout, Score]:
    """A rollout state of fresh episodes (their observations from the kernel) and an
    empty score. The reset pool holds the same start states: what an environment does
    after its first episode is not scored."""
    cfg, net = core.config, core.net
    env = fresh_env(tasks, obs, core.num_terms)
    shape = obs.shape[:-1]
    pool = None
    if cfg.reset_pool > 0:
        states = jax.tree.map(lambda x: jnp.concatenate([x] * cfg.reset_pool, axis=2), env)
        pool = ResetPool(states, jnp.zeros(state.update.shape, jnp.int32))
    ro = Rollout(
        env=env,
        carry=jnp.zeros(shape + (net.carry_dim,), jnp.float32),
        prev_action=net.dummy_action(shape),
        prev_reward=jnp.zeros(shape, jnp.float32),
        pool=pool,
        key=k_act,
        k_ppo=k_act,
        next_key=k_act,
        started=jnp.zeros(state.update.shape, jnp.int32),
        greedy=jnp.full(state.update.shape, cfg.eval_deterministic),
    )
    terms = jnp.zeros(shape + (core.num_terms,), jnp.float32) if core.num_terms else None
    return ro, Score(jnp.ones(shape, bool), jnp.zeros(shape, bool), jnp.zeros(shape, jnp.float32), terms)


def eval_tally(score: Score, extra: dict[str, jax.Array], limit: int | None = None) -> Score:
    """Fold a chunk of rollout records (``extra`` of :meth:`Core.settle`, stacked per slot
    [K, S, T, N]) into the score, step by step. ``limit``: an episode that ends after
    this many steps counts as a failure (training episodes may be longer than the task's
    horizon, ``PPOConfig.train_horizon``); None: no limit."""

    def step(s: Score, e: tuple[jax.Array, ...]) -> tuple[Score, None]:
        end, success, ret, length, *terms = e
        ended = s.alive & end
        won = (success > 0) & (length <= limit) if limit is not None else success > 0
        kept = jnp.where(ended[..., None], terms[0], s.terms) if terms and s.terms is not None else None
        return Score(s.alive & ~end, jnp.where(ended, won, s.success), jnp.where(ended, ret, s.returns),
                     kept), None  # fmt: skip

    names = ("end", "ep_success", "ep_return", "ep_length") + (("ep_terms",) if score.terms is not None else ())
    xs = tuple(jnp.moveaxis(extra[k], 2, 0) for k in names)
    return jax.lax.scan(step, score, xs)[0]
