"""Rollouts of a trained policy through its interface, with per-step reward-term logs.

``rollouts(task, interface, policy, seed, episodes)`` runs ``episodes`` fresh episodes
side by side for the task's horizon, acting as the final evaluation does (actions
sampled from the policy, or its mode with the policy's ``eval_deterministic``), and
logs every step's reward and reward terms. Only each environment's first episode
counts: once it ends, the environment's later steps are masked out (``alive``). Pure
JAX inside one jitted scan; what strategies call to look at what a policy does (RDA's
critic, GRACE's learner negatives), and what ``python -m limen_jax.rollout`` prints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from limen_jax.interface import Interface
from limen_jax.rl.config import PPOConfig
from limen_jax.rl.networks import ActorCritic
from limen_jax.rl.normalize import ObsStats, normalize
from limen_jax.rl.policy import Policy
from limen_jax.task import Task


class RolloutLog(struct.PyTreeNode):
    """E episodes of T = ``task.episode_length`` steps.

    reward: float32[T, E], R of each step (0 after the episode ended).
    terms: float32[T, E, M], the M = len(interface.reward_terms) terms of each step
        (M = 0 for a scalar reward), 0 after the episode ended.
    alive: bool[T, E], the step belongs to the episode (it ends at its last step).
    success: bool[E], ``TaskState.success`` when the episode ended (False if it never did).
    length: int32[E], steps in the episode.
    sims: the task's simulator states of the first S = ``keep_sims`` episodes, leaves
        [T + 1, S, ...] (the start state first), for rendering; None when S is 0.
    """

    reward: jax.Array
    terms: jax.Array
    alive: jax.Array
    success: jax.Array
    length: jax.Array
    sims: Any = None

    @property
    def returns(self) -> np.ndarray:
        """float32[E], each episode's return under R."""
        return np.asarray(self.reward).sum(0)

    @property
    def episode_terms(self) -> np.ndarray:
        """float32[E, M], each episode's sum of each term."""
        return np.asarray(self.terms).sum(0)


def network_of(policy: Policy, task: Task) -> tuple[PPOConfig, ActorCritic]:
    """The PPO config the policy trained with and its network."""
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in policy.metadata["ppo"].items()}
    config = PPOConfig.from_dict(values)
    return config, ActorCritic(config, task.action_space)


MAX_WIDTH = 2**20  # observation features a kept policy may take (a real one has tens to thousands)


def check_network(policy: Policy, task: Task) -> None:
    """ValueError (one line) unless the policy's recorded PPO config and ``width`` describe a
    network whose parameters are exactly the arrays it holds, leaf for leaf (shapes and
    dtypes): a policy.json edited apart from its arrays would otherwise fail deep inside
    flax, or ask for a network of any size. Only shapes are computed (jax.eval_shape)."""
    meta = policy.metadata
    width, obs_dim = meta.get("width"), meta.get("obs_dim")
    if not (isinstance(width, int) and not isinstance(width, bool) and isinstance(obs_dim, int)
            and obs_dim <= width <= MAX_WIDTH):
        raise ValueError(f"policy.json: width: not a whole number from obs_dim to {MAX_WIDTH}")
    try:
        _, net = network_of(policy, task)
        expected = jax.eval_shape(lambda k: net.init_padded(k, width, jnp.asarray(obs_dim, jnp.int32)),
                                  jax.random.key(0))
    except Exception as exc:  # a config PPOConfig or the network refuses: the file's fault
        raise ValueError(f"policy.json: ppo: not a network this version builds ({type(exc).__name__}: "
                         f"{str(exc)[:120]})") from None
    want = jax.tree.map(lambda x: (tuple(x.shape), str(x.dtype)), expected)
    have = jax.tree.map(lambda x: (tuple(np.shape(x)), str(np.asarray(x).dtype)), policy.params)
    same_tree = str(jax.tree.structure(want)) == str(jax.tree.structure(have))
    if not same_tree or jax.tree.leaves(want) != jax.tree.leaves(have):
        raise ValueError("policy.json: ppo and width describe a network other than the one its arrays hold")


def rollouts(
    task: Task,
    interface: Interface,
    policy: Policy,
    seed: int,
    episodes: int,
    *,
    keep_sims: int = 0,
) -> RolloutLog:
    """Roll ``policy`` out through ``interface`` on ``episodes`` fresh episodes of ``task``.

    seed: the episodes' start states and the policy's action samples derive from
    ``jax.random.key(seed)``. keep_sims: also return the simulator states of this many
    leading episodes (at most ``episodes``).
    The interface must be the one the policy trained with (its ``obs_dim`` is checked).
    """
    if int(interface.obs_dim) != int(policy.metadata["obs_dim"]):
        raise ValueError(
            f"the policy was trained on {policy.metadata['obs_dim']} observation features; "
            f"this interface has {interface.obs_dim}"
        )
    if episodes < 1:
        raise ValueError("episodes must be at least 1")
    run = _compiled(task, interface, policy, int(episodes), min(int(keep_sims), int(episodes)))
    return run(policy.params, policy.obs_stats, jax.random.key(int(seed)))


def _compiled(
    task: Task, interface: Interface, policy: Policy, episodes: int, keep_sims: int
) -> Callable[[Any, ObsStats, jax.Array], RolloutLog]:
    config, net = network_of(policy, task)
    width, obs_dim = int(policy.metadata["width"]), int(interface.obs_dim)
    mask = jnp.arange(width) < obs_dim
    horizon = int(task.episode_length)
    num_terms = len(interface.reward_terms)

    def observe(sim: Any) -> jax.Array:
        obs = jax.vmap(lambda s: jnp.asarray(interface.observe(s), jnp.float32).reshape(-1))(sim)
        return jnp.pad(obs, [(0, 0), (0, width - obs_dim)])

    def reward_terms(sim: Any, action: jax.Array, next_sim: Any) -> tuple[jax.Array, jax.Array]:
        if interface.terms is None:
            reward = jax.vmap(lambda s, a, s2: jnp.asarray(interface.reward(s, a, s2), jnp.float32).reshape(()))
            r = reward(sim, action, next_sim)
            return r, jnp.zeros(r.shape + (0,), jnp.float32)
        fn = interface.terms
        terms = jax.vmap(lambda s, a, s2: jnp.asarray(fn(s, a, s2), jnp.float32).reshape(num_terms))
        t = terms(sim, action, next_sim)
        return t.sum(-1), t

    @jax.jit
    def run(params: Any, stats: ObsStats, key: jax.Array) -> RolloutLog:
        k_reset, k_act = jax.random.split(key)
        start = jax.vmap(task.reset)(jax.random.split(k_reset, episodes))

        def step(carry: Any, key: jax.Array) -> tuple[Any, Any]:
            ts, h, prev_action, prev_reward, alive, t = carry
            obs = normalize(stats, observe(ts.sim), mask, config.obs_clip, config.normalize_obs)
            first = jnp.full((episodes,), t == 0)
            h, dist, _ = net.step(params, h, obs, prev_action, prev_reward, first)
            raw = net.dist.mode(dist) if config.eval_deterministic else net.dist.sample(key, dist)
            action = net.dist.to_env(raw)
            nxt = jax.vmap(task.step)(ts, action)
            r, terms = reward_terms(ts.sim, action, nxt.sim)
            ended = jnp.asarray(nxt.done, bool) | (t + 1 >= horizon)
            log = (jnp.where(alive, r, 0.0), jnp.where(alive[:, None], terms, 0.0), alive,
                   alive & ended & jnp.asarray(nxt.success, bool),
                   jax.tree.map(lambda x: x[:keep_sims], nxt.sim) if keep_sims else None)  # fmt: skip
            return (nxt, h, raw, r, alive & ~ended, t + 1), log

        zeros, ones = jnp.zeros((episodes,), jnp.float32), jnp.ones((episodes,), bool)
        carry = (start, net.initial_carry(episodes), net.dummy_action((episodes,)), zeros, ones, jnp.asarray(0))
        _, (reward, terms, alive, won, sims) = jax.lax.scan(step, carry, jax.random.split(k_act, horizon))
        kept = None
        if keep_sims:
            first = jax.tree.map(lambda x: x[:keep_sims], start.sim)
            kept = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, sims)
        return RolloutLog(reward, terms, alive, won.any(0), alive.sum(0).astype(jnp.int32), kept)

    return run
