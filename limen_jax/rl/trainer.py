"""The batched PPO trainer: K candidate interfaces x S seeds in one compiled call.

Layout is candidate-major: every leaf of :class:`TrainState` has leading axes [K, S].
Networks, optimiser states and PPO updates are vmapped over (K, S); the environments
step as one [K, S, N] batch; candidate k's φ and R touch only slice k (a static Python
unroll inside the jitted function, :class:`~limen_jax.rl.env.BatchedInterface`).
Observations are padded to the batch's widest ``obs_dim``; padded features are zeroed,
kept out of the normalisation statistics, and meet zero rows of the input layers, so a
candidate trains exactly as it would alone with the same seed.

Slot (k, s) draws all its randomness from ``jax.random.key(seeds[s])`` (never from k),
which is what makes a batched run match single runs. One compile per (batch shape,
update count); the persistent compilation cache makes repeats cheap across processes.
With several devices (GPUs, or ``--xla_force_host_platform_device_count`` on a CPU) the
seed axis is sharded over them when S divides evenly (``shard_map``: no communication).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from limen_jax.interface import Interface
from limen_jax.rl.config import PPOConfig
from limen_jax.rl.env import (
    BatchedInterface,
    EnvState,
    InterfaceEnv,
    ResetPool,
    take_fresh,
    tree_where,
    vmap_lead,
)
from limen_jax.rl.losses import compute_gae
from limen_jax.rl.networks import ActorCritic
from limen_jax.rl.normalize import Moments, ObsStats, batch_moments, init_stats, normalize, update_stats
from limen_jax.rl.ppo import Batch, FlatTree, ppo_update
from limen_jax.rl.result import BatchResult
from limen_jax.task import Task
from limen_jax.xla_cache import enable_compilation_cache

PyTree = Any


enable_compilation_cache()


class TrainState(struct.PyTreeNode):
    """Everything the trainer carries between updates; leaves lead with [K, S].

    env, carry, prev_action, prev_reward: per environment, [K, S, N, ...].
    update: int32, updates done by the slot. total_updates: int32, the slot's budget:
    it is frozen once ``update`` reaches it, and learning-rate annealing runs over it.
    seed: int32, the seed the slot's randomness derives from.
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


class RolloutCarry(struct.PyTreeNode):
    """The rollout scan's carry; leaves [K, S, ...] (pool None when reset_pool = 0)."""

    env: EnvState
    carry: jax.Array
    prev_action: jax.Array
    prev_reward: jax.Array
    pool: ResetPool | None
    key: jax.Array


METRICS = (
    "return",
    "success",
    "episode_length",
    "episodes",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_frac",
)


class BatchTrainer:
    """Trains K interfaces x S seeds of one task with one PPO config.

    >>> trainer = BatchTrainer(task, interfaces, config, num_seeds=3)
    >>> state = trainer.init([0, 1, 2], total_updates=trainer.config.num_updates(1_000_000))
    >>> state, curves = trainer.run(state, num_updates=50)   # curves: name -> (K, S, 50)
    >>> success = trainer.evaluate(state, jax.random.key(0))  # (K, S)

    ``width``: pad observations to this many features (default: the widest candidate);
    the cascade keeps one width across stages so states can be carried over.
    """

    def __init__(
        self,
        task: Task,
        interfaces: Sequence[Interface],
        config: PPOConfig,
        num_seeds: int,
        *,
        width: int | None = None,
        shard: bool = True,
    ) -> None:
        self.task = task
        self.config = config
        self.iface = BatchedInterface(interfaces, width)
        self.env = InterfaceEnv(task, self.iface)
        self.net = ActorCritic(config, task.action_space)
        self.num_candidates = len(self.iface)
        self.num_seeds = int(num_seeds)
        self.width = self.iface.width
        self.optimizer = optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm), optax.scale_by_adam(eps=config.adam_eps)
        )
        # Parameters and Adam moments live as one flat vector per slot: the optimiser,
        # the gradient clip and the freeze-select then compile to a handful of kernels
        # instead of a few per parameter leaf (XLA's CPU compile time scales with those).
        template = jax.eval_shape(lambda k: self.net.pad_inputs(self.net.init(k, 1), self.width), jax.random.key(0))
        self.flat = FlatTree(template)
        self.compile_s = 0.0
        self._compiled: dict[tuple[str, int], Any] = {}
        devices = jax.devices()
        self.mesh: Mesh | None = None
        if shard and len(devices) > 1 and self.num_seeds % len(devices) == 0:
            self.mesh = Mesh(np.asarray(devices), ("seed",))

    @property
    def names(self) -> list[str]:
        return [i.name for i in self.iface.interfaces]

    # --- initial state ------------------------------------------------------------------

    def init(self, seeds: Sequence[int], total_updates: int | None = None) -> TrainState:
        """Fresh slots for ``seeds`` (length S), every candidate.

        total_updates: each slot's budget (it freezes once reached) and the horizon of
        learning-rate annealing; None = unbounded (then ``anneal_lr`` has no effect).
        """
        if total_updates is None:
            total_updates = 2**30
        seeds = [int(s) for s in seeds]
        if len(seeds) != self.num_seeds:
            raise ValueError(f"expected {self.num_seeds} seeds, got {len(seeds)}")
        fn = self._compile("init", 0, lambda: jax.jit(self._init), jnp.asarray(seeds, jnp.int32))
        state = fn(jnp.asarray(seeds, jnp.int32))
        state = state.replace(total_updates=jnp.full_like(state.update, int(total_updates)))
        return self._place(state)

    def _init(self, seeds: jax.Array) -> TrainState:
        K, S, N = self.num_candidates, self.num_seeds, self.config.num_envs
        keys = jax.vmap(jax.random.key)(seeds)
        k_init, k_env, k_train = jnp.moveaxis(jax.vmap(lambda k: jax.random.split(k, 3))(keys), 1, 0)
        # each candidate's networks are initialised at its own obs_dim, then padded
        params = jnp.stack(
            [
                jax.vmap(lambda k, d=d: self.flat.ravel(self.net.pad_inputs(self.net.init(k, d), self.width)))(k_init)
                for d in self.iface.dims
            ]
        )
        opt_state = vmap_lead(self.optimizer.init, 2)(params)
        del k_env  # kept so that the key derivation stays fixed
        # Placeholder environments (t = -1): the first update starts them from its reset
        # pool, so no compiled program but the update's contains the task's reset.
        template = jax.eval_shape(self.env.reset, jax.random.split(jax.random.key(0), (K, S, N)))
        env = jax.tree.map(_zeros, template).replace(t=jnp.full((K, S, N), -1, jnp.int32))
        stats = jax.tree.map(lambda x: jnp.broadcast_to(x, (K, S) + x.shape), init_stats(self.width))
        zeros = jnp.zeros((K, S), jnp.int32)
        return TrainState(
            params=params,
            opt_state=opt_state,
            obs_stats=stats,
            env=env,
            carry=jnp.zeros((K, S, N, self.net.carry_dim), jnp.float32),
            prev_action=self.net.dummy_action((K, S, N)),
            prev_reward=jnp.zeros((K, S, N), jnp.float32),
            key=jnp.broadcast_to(k_train, (K, S)),
            update=zeros,
            total_updates=zeros,
            seed=jnp.broadcast_to(seeds, (K, S)),
        )

    def _place(self, state: TrainState) -> TrainState:
        if self.mesh is None:
            return state
        return jax.device_put(state, NamedSharding(self.mesh, PartitionSpec(None, "seed")))

    def graft(self, state: TrainState, source: TrainState, source_k: Sequence[int], seed_index: int = 0) -> TrainState:
        """Copy slot (source_k[k], 0) of ``source`` into slot (k, seed_index) of ``state``.

        The cascade continues a short single-seed run this way: the copied slot keeps its
        update count, so it stops when it reaches its budget while the fresh seeds train.
        Both trainers must share the observation width.
        """
        idx = jnp.asarray(list(source_k), jnp.int32)
        moved = jax.tree.map(lambda x: x[idx, 0], source)
        return self._place(jax.tree.map(lambda x, y: x.at[:, seed_index].set(y), state, moved))

    # --- training -----------------------------------------------------------------------

    def run(self, state: TrainState, num_updates: int) -> tuple[TrainState, dict[str, np.ndarray]]:
        """``num_updates`` PPO updates of every slot in one compiled call (the input state
        is donated). Returns the new state and per-update curves name -> (K, S, U); NaN
        where a slot was frozen or no episode ended during the update."""
        fn = self._compile("run", int(num_updates), lambda: self._make_run(int(num_updates)), state)
        state, metrics = fn(state)
        return state, {k: np.asarray(v) for k, v in metrics.items()}

    def _make_run(self, num_updates: int) -> Any:
        def run(state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
            state, metrics = jax.lax.scan(lambda s, _: self._update(s), state, None, length=num_updates)
            return state, jax.tree.map(lambda x: jnp.moveaxis(x, 0, -1), metrics)

        if self.mesh is not None:
            spec = PartitionSpec(None, "seed")
            run = jax.shard_map(run, mesh=self.mesh, in_specs=spec, out_specs=spec, check_vma=False)
        return jax.jit(run, donate_argnums=0)

    def _compile(self, kind: str, count: int, make: Any, *args: Any) -> Any:
        if (kind, count) not in self._compiled:
            start = time.perf_counter()
            self._compiled[(kind, count)] = make().lower(*args).compile()
            self.compile_s += time.perf_counter() - start
        return self._compiled[(kind, count)]

    def _normalize(self, stats: ObsStats, obs: jax.Array) -> jax.Array:
        """obs float32[K, S, N, D] with per-slot stats [K, S, D] and per-candidate mask."""
        mask = jnp.asarray(self.iface.mask)[:, None, None, :]
        expand = jax.tree.map(lambda x: x[:, :, None], stats)
        return normalize(expand, obs, mask, self.config.obs_clip, self.config.normalize_obs)

    def _update(self, ts: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        cfg, net, N = self.config, self.net, self.config.num_envs
        K, S = ts.update.shape  # S is the local shard when the seed axis is sharded
        slots = lambda f: vmap_lead(f, 2)  # noqa: E731
        keys = slots(lambda k: jax.random.split(k, 4))(ts.key)
        key, k_pool, k_roll, k_ppo = (keys[:, :, i] for i in range(4))

        env0 = ts.env
        pool: ResetPool | None = None
        unstarted = env0.t < 0
        if cfg.reset_pool > 0:
            pool_keys = slots(lambda k: jax.random.split(k, cfg.reset_pool * N))(k_pool)
            pool = ResetPool(self.env.reset(pool_keys), jnp.zeros((K, S), jnp.int32))
            starts, pool = slots(take_fresh)(pool, unstarted)
        else:
            starts = self.env.reset(slots(lambda k: jax.random.split(k, N))(k_pool))
        env0 = tree_where(unstarted, starts, env0)

        def fresh_starts(c: RolloutCarry, k_reset: jax.Array):
            if c.pool is None:
                reset_keys = slots(lambda k: jax.random.split(k, N))(k_reset)
                return lambda end: (self.env.reset(reset_keys), None)
            return lambda end: slots(take_fresh)(c.pool, end)

        def env_step(c: RolloutCarry, _: None) -> tuple[RolloutCarry, tuple[Batch, dict[str, jax.Array], Moments]]:
            ks = slots(lambda k: jax.random.split(k, 3))(c.key)
            key, k_act, k_reset = ks[:, :, 0], ks[:, :, 1], ks[:, :, 2]
            obs = self._normalize(ts.obs_stats, c.env.obs)
            first = c.env.t == 0
            carry, dist, value = slots(self._step)(ts.params, c.carry, obs, c.prev_action, c.prev_reward, first)
            raw = slots(net.dist.sample)(k_act, dist)
            log_prob = net.dist.log_prob(dist, raw)
            action = net.dist.to_env(raw)
            env, info, pool = self.env.step(c.env, action, fresh_starts(c, k_reset))
            # V of the true (pre-reset) next state, to bootstrap where the horizon cut
            next_obs = self._normalize(ts.obs_stats, info.next_obs)
            no = jnp.zeros_like(first)
            _, _, next_value = slots(self._step)(ts.params, carry, next_obs, action, info.reward, no)
            end = info.episode_end
            batch = Batch(
                obs=obs,
                first=first,
                prev_action=c.prev_action,
                prev_reward=c.prev_reward,
                action=raw,
                log_prob=log_prob,
                value=value,
                advantage=jnp.zeros_like(value),
                target=jnp.zeros_like(value),
            )
            extra = {
                "reward": info.reward,
                "terminated": info.terminated,
                "truncated": info.truncated,
                "next_value": next_value,
                "end": end,
                "ep_return": jnp.where(end, info.episode_return, 0.0),
                "ep_success": (end & info.episode_success).astype(jnp.float32),
                "ep_length": jnp.where(end, info.episode_length, 0).astype(jnp.float32),
            }
            moments = slots(batch_moments)(c.env.obs)
            nxt = RolloutCarry(env, carry, action, info.reward, pool, key)
            return nxt, (batch, extra, moments)

        carry0 = ts.carry
        c0 = RolloutCarry(env0, ts.carry, ts.prev_action, ts.prev_reward, pool, k_roll)
        c, (batch, extra, moments) = jax.lax.scan(env_step, c0, None, length=cfg.rollout_len)
        # time-major [T, K, S, N] -> per slot [K, S, T, N]
        batch, extra = jax.tree.map(lambda x: jnp.moveaxis(x, 0, 2), (batch, extra))

        obs = self._normalize(ts.obs_stats, c.env.obs)
        _, _, last_value = slots(self._step)(ts.params, c.carry, obs, c.prev_action, c.prev_reward, c.env.t == 0)

        def gae(e: dict[str, jax.Array], value: jax.Array, last: jax.Array) -> tuple[jax.Array, jax.Array]:
            return compute_gae(
                e["reward"], value, e["terminated"], last, cfg.gamma, cfg.gae_lambda,
                truncated=e["truncated"], truncated_value=e["next_value"],
            )  # fmt: skip

        adv, target = slots(gae)(extra, batch.value, last_value)
        batch = batch.replace(advantage=adv, target=target)

        frac = 1.0 - ts.update.astype(jnp.float32) / jnp.maximum(ts.total_updates, 1).astype(jnp.float32)
        lr = cfg.lr * (jnp.clip(frac, 0.0, 1.0) if cfg.anneal_lr else jnp.ones_like(frac))
        ppo = lambda *a: ppo_update(net, self.optimizer, self.flat, cfg, *a)  # noqa: E731
        params, opt_state, losses = slots(ppo)(ts.params, ts.opt_state, batch, carry0, k_ppo, lr)

        mask = jnp.broadcast_to(jnp.asarray(self.iface.mask)[:, None, :], (K, S, self.width))
        step_moments = jax.tree.map(lambda x: jnp.moveaxis(x, 0, 2), moments)
        stats = slots(lambda s, m, mk: update_stats(s, _merge(m), mk))(ts.obs_stats, step_moments, mask)

        new = TrainState(
            params=params,
            opt_state=opt_state,
            obs_stats=stats,
            env=c.env,
            carry=c.carry,
            prev_action=c.prev_action,
            prev_reward=c.prev_reward,
            key=key,
            update=ts.update + 1,
            total_updates=ts.total_updates,
            seed=ts.seed,
        )
        active = ts.update < ts.total_updates
        new = jax.tree.map(
            lambda a, b: jnp.where(active.reshape(active.shape + (1,) * (a.ndim - 2)), a, b), new, ts
        )

        episodes = extra["end"].sum((2, 3)).astype(jnp.float32)
        per_episode = lambda x: jnp.where(episodes > 0, x.sum((2, 3)) / jnp.maximum(episodes, 1.0), jnp.nan)  # noqa: E731
        metrics = {
            "return": per_episode(extra["ep_return"]),
            "success": per_episode(extra["ep_success"]),
            "episode_length": per_episode(extra["ep_length"]),
            "episodes": episodes,
            **losses,
        }
        metrics = {k: jnp.where(active, v, jnp.nan) for k, v in metrics.items()}
        return new, metrics

    def _step(self, params: jax.Array, *args: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """:meth:`ActorCritic.step` on one slot's flat parameters."""
        return self.net.step(self.flat.unravel(params), *args)

    def params_tree(self, state: TrainState) -> PyTree:
        """The parameters as the network's pytree, leaves [K, S, ...]."""
        return vmap_lead(self.flat.unravel, 2)(state.params)

    # --- evaluation ---------------------------------------------------------------------

    def evaluate(self, state: TrainState, key: jax.Array) -> np.ndarray:
        """Success rate (K, S) on ``config.eval_episodes`` fresh episodes per slot."""
        return self.evaluate_full(state, key)[0]

    def evaluate_full(self, state: TrainState, key: jax.Array) -> tuple[np.ndarray, np.ndarray]:
        """(success rate, mean episode return under R), each float32 (K, S)."""
        from limen_jax.rl.evaluate import evaluate_slots

        fn = self._compile(
            "eval", 0, lambda: jax.jit(lambda s, k: evaluate_slots(self, s, k)), state, key
        )
        success, returns = fn(state, key)
        return np.asarray(success, np.float32), np.asarray(returns, np.float32)


def _zeros(x: jax.ShapeDtypeStruct) -> jax.Array:
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.split(jax.random.key(0), x.shape)
    return jnp.zeros(x.shape, x.dtype)


def _merge(m: Moments) -> Moments:
    """Merge T equal-count moments (leaves [T, ...]) into one."""
    mean = m.mean.mean(0)
    m2 = m.m2.sum(0) + (jnp.square(m.mean - mean) * m.count[:, None]).sum(0)
    return Moments(mean, m2, m.count.sum())


def train_batch(
    task: Task,
    interfaces: Sequence[Interface],
    *,
    seeds: int | Sequence[int],
    total_steps: int,
    config: PPOConfig,
    eval_key: int = 0,
) -> BatchResult:
    """Train every interface with every seed (K x S policies) in one compiled call, then
    evaluate each on fresh episodes. ``seeds``: a count (seeds 0..n-1) or explicit list.

    ``total_steps`` env steps per (candidate, seed), rounded down to whole updates of
    ``config.num_envs x config.rollout_len`` steps (at least one).
    """
    start = time.perf_counter()
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    trainer = BatchTrainer(task, interfaces, config, len(seed_list))
    updates = config.num_updates(total_steps)
    state = trainer.init(seed_list, updates)
    state, curves = trainer.run(state, updates)
    success, returns = trainer.evaluate_full(state, jax.random.key(eval_key))
    return BatchResult(
        names=trainer.names,
        seeds=seed_list,
        success=success,
        final_return=returns,
        curves=curves,
        steps=updates * config.steps_per_update,
        wall_s=time.perf_counter() - start,
        compile_s=trainer.compile_s,
    )
