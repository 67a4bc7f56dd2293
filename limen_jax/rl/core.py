"""The trainer's pure functions, none of which sees an interface program.

PureJaxRL's ``make_train -> (init, update, evaluate)`` split, cut once more at the
programs: a PPO update is ``begin`` (split keys, draw the reset pool's task states),
then per rollout step ``act`` (policy + task step) and ``settle`` (auto-reset, bootstrap
value, records), then ``update`` (GAE, PPO, statistics, freezing, metrics). The K
candidates' φ and R run between them in the per-batch kernel (``limen_jax.rl.kernel``),
called from the host. Every function here is built from shapes and the config alone,
so one compile serves every batch of programs of the same (task, K, S, width, config),
in this process (``Core.compiled``) and across processes (JAX's persistent cache).

Every leaf leads with [K, S] (candidates, seeds); environments add [N].
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from limen_jax.rl.compiled import CompileOnce, Wrap
from limen_jax.rl.config import PPOConfig
from limen_jax.rl.env import EnvState, ResetPool, take_fresh, vmap_lead
from limen_jax.rl.networks import ActorCritic
from limen_jax.rl.normalize import ObsStats, batch_moments, init_stats, normalize, update_stats
from limen_jax.rl.ppo import Batch, FlatTree
from limen_jax.rl.state import Acted, Rollout, TrainState
from limen_jax.rl.update import Records, finish_update, stack_records
from limen_jax.task import Task, TaskState, tree_where
from limen_jax.xla_options import run_once


def slots(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` vmapped over the two slot axes [K, S]."""
    return vmap_lead(fn, 2)


class Core:
    """The static parts of a trainer: task, config, network, optimiser, shapes.

    Not a pytree; its methods are the pure functions, jitted by ``compiled``.
    """

    def __init__(self, task: Task, config: PPOConfig, width: int, num_terms: int = 0) -> None:
        self.task, self.config, self.width = task, config, int(width)
        # reward-term slots the environments carry (0: a batch of scalar rewards, which
        # then computes exactly what it did before terms existed)
        self.num_terms = int(num_terms)
        self.net = ActorCritic(config, task.action_space)
        # success is judged at the task's horizon; training may run longer episodes
        self.eval_horizon = int(task.episode_length)
        if self.eval_horizon < 1:
            raise ValueError(f"task {task.name!r} has episode_length {self.eval_horizon}")
        self.horizon = int(config.train_horizon or self.eval_horizon)
        self.optimizer = optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm), optax.scale_by_adam(eps=config.adam_eps)
        )
        # Parameters and Adam moments live as one flat vector per slot: the optimiser,
        # the gradient clip and the freeze-select then compile to a handful of kernels
        # instead of a few per parameter leaf (XLA's CPU compile time scales with those).
        template = jax.eval_shape(lambda k: self.net.init(k, self.width), jax.random.key(0))
        self.flat = FlatTree(template)
        self._compiled: CompileOnce[jax.stages.Compiled] = CompileOnce()  # the training and compile-ahead threads
        self.compile_times: dict[str, float] = {}  # name -> seconds compiling it (all shapes)
        self._times_lock = threading.Lock()

    # --- compiled entry points ----------------------------------------------------------

    def compiled(
        self, name: str, fn: Callable[..., Any], wrap: Wrap | None, *args: Any, once: bool = False
    ) -> tuple[jax.stages.Compiled, float]:
        """``fn`` (pure, built from this core alone; ``name`` identifies it) compiled for
        these arguments' shapes (arrays or ``jax.ShapeDtypeStruct``), and the seconds this
        call spent compiling it or waiting for another thread's compile of it (0 when it
        was compiled before in this process). ``wrap(fn, nargs)``: e.g. a shard_map.
        ``once``: ``fn`` runs once per update or per run, so it compiles with
        :func:`limen_jax.xla_options.run_once` (a separate executable from the per-step one)."""
        leaves, treedef = jax.tree.flatten(args)
        # dtype objects, not their names: str(dtype) is slow on the per-step path
        sig = (name, once, treedef, tuple((x.shape, x.dtype) for x in leaves))

        def build() -> jax.stages.Compiled:
            start = time.perf_counter()
            lowered = jax.jit(wrap(fn, len(args)) if wrap is not None else fn).lower(*args)
            exe = lowered.compile(run_once() if once else None)
            with self._times_lock:  # the compile itself, once, whichever thread ran it
                self.compile_times[name] = self.compile_times.get(name, 0.0) + time.perf_counter() - start
            return exe

        return self._compiled.get(sig, build)

    # --- initial state ------------------------------------------------------------------

    def init(self, seeds: jax.Array, dims: jax.Array, total_updates: jax.Array) -> TrainState:
        """Fresh slots: seeds int32[S], dims int32[K] -> TrainState [K, S]. Environments are
        placeholders (t = -1) that the first update starts from its reset pool."""
        cfg, net, W = self.config, self.net, self.width
        K, S, N = dims.shape[0], seeds.shape[0], cfg.num_envs
        keys = jax.vmap(jax.random.key)(seeds)
        k_init, _, k_train = jnp.moveaxis(jax.vmap(lambda k: jax.random.split(k, 3))(keys), 1, 0)
        dims_ks = jnp.broadcast_to(dims[:, None], (K, S))
        init_keys = jnp.broadcast_to(k_init, (K, S))
        # one slot at a time (lax.map, not vmap): the initialisers' Newton-Schulz loops
        # compile far more slowly batched over K x S
        flat_init = lambda kd: self.flat.ravel(net.init_padded(kd[0], W, kd[1]))  # noqa: E731
        params = jax.lax.map(flat_init, (init_keys.reshape(-1), dims_ks.reshape(-1))).reshape(K, S, -1)
        opt_state = slots(self.optimizer.init)(params)
        template = jax.eval_shape(self.reset_tasks, jax.random.split(jax.random.key(0), (K, S, N)))
        obs = jnp.zeros((K, S, N, W), jnp.float32)
        env = EnvState(jax.tree.map(_zeros, template), obs, jnp.full((K, S, N), -1, jnp.int32), jnp.zeros((K, S, N)),
                       jnp.zeros((K, S, N, self.num_terms)) if self.num_terms else None)  # fmt: skip
        stats = jax.tree.map(lambda x: jnp.broadcast_to(x, (K, S) + x.shape), init_stats(W))
        return TrainState(
            params=params,
            opt_state=opt_state,
            obs_stats=stats,
            env=env,
            carry=jnp.zeros((K, S, N, net.carry_dim), jnp.float32),
            prev_action=net.dummy_action((K, S, N)),
            prev_reward=jnp.zeros((K, S, N), jnp.float32),
            key=jnp.broadcast_to(k_train, (K, S)),
            update=jnp.zeros((K, S), jnp.int32),
            total_updates=jnp.broadcast_to(total_updates, (K, S)).astype(jnp.int32),
            seed=jnp.broadcast_to(seeds, (K, S)),
            dims=dims_ks.astype(jnp.int32),
            diverged_at=jnp.full((K, S), -1, jnp.int32),
        )

    def reset_tasks(self, keys: jax.Array) -> TaskState:
        """keys [K, S, B] -> task states [K, S, B] (φ comes from the kernel). Compiled once
        for B = num_envs and shared by the rollout's resets and evaluation's starts."""
        return vmap_lead(self.task.reset, keys.ndim)(keys)

    def mask(self, dims: jax.Array) -> jax.Array:
        """dims int32[K, S] -> bool[K, S, width], True for a candidate's real features."""
        return jnp.arange(self.width) < dims[..., None]

    def normalize(self, stats: ObsStats, dims: jax.Array, obs: jax.Array) -> jax.Array:
        """obs float32[K, S, N, W] with per-slot stats [K, S, W]."""
        expand = jax.tree.map(lambda x: x[:, :, None], stats)
        return normalize(expand, obs, self.mask(dims)[:, :, None], self.config.obs_clip, self.config.normalize_obs)

    def policy_step(self, params: jax.Array, *args: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """:meth:`ActorCritic.step` on one slot's flat parameters."""
        return self.net.step(self.flat.unravel(params), *args)

    # --- one update: begin, (act, kernel, settle) x T, update ---------------------------

    def begin(self, ts: TrainState) -> tuple[jax.Array, jax.Array, jax.Array, list[jax.Array]]:
        """Split the slots' keys; the keys of the update's fresh start states come as
        chunks of N (key[K, S, N]; reset_pool chunks, or one), each reset by
        :meth:`reset_tasks` and observed by the kernel (the same shapes as every step's)."""
        cfg, N = self.config, self.config.num_envs
        chunks = max(cfg.reset_pool, 1)
        # one split for all of them: each split is a threefry loop XLA compiles separately
        keys = slots(lambda k: jax.random.split(k, 3 + chunks * N))(ts.key)
        key, k_roll, k_ppo, reset_keys = keys[:, :, 0], keys[:, :, 1], keys[:, :, 2], keys[:, :, 3:]
        return key, k_roll, k_ppo, [reset_keys[:, :, i * N : (i + 1) * N] for i in range(chunks)]

    def split_envs(self, key: jax.Array) -> jax.Array:
        """key [K, S] -> N keys per slot, [K, S, N] (reset_pool = 0: a reset every step)."""
        return slots(lambda k: jax.random.split(k, self.config.num_envs))(key)

    def start(
        self, ts: TrainState, key: jax.Array, k_roll: jax.Array, k_ppo: jax.Array,
        tasks: list[TaskState], obs: list[jax.Array],
    ) -> tuple[TrainState, Rollout]:  # fmt: skip
        """Start the environments that never ran from the fresh states (now observed);
        a slot's statistics that saw nothing yet are seeded from those observations."""
        N = self.config.num_envs
        fresh = [fresh_env(t, o, self.num_terms) for t, o in zip(tasks, obs, strict=True)]
        states = jax.tree.map(lambda *x: jnp.concatenate(x, axis=2), *fresh)
        unstarted = ts.env.t < 0
        pool: ResetPool | None = None
        if self.config.reset_pool > 0:
            pool = ResetPool(states, jnp.zeros(ts.update.shape, jnp.int32))
            starts, pool = slots(take_fresh)(pool, unstarted)
        else:
            starts = jax.tree.map(lambda x: x[:, :, :N], states)
        env = tree_where(unstarted, starts, ts.env)
        all_obs = jnp.concatenate(obs, axis=2)
        seeded = slots(lambda s, o, m: update_stats(s, batch_moments(o), m))(ts.obs_stats, all_obs, self.mask(ts.dims))
        fresh_stats = (ts.obs_stats.count == 0)[..., None]
        stats = ObsStats(
            mean=jnp.where(fresh_stats, seeded.mean, ts.obs_stats.mean),
            var=jnp.where(fresh_stats, seeded.var, ts.obs_stats.var),
            count=jnp.where(fresh_stats[..., 0], seeded.count, ts.obs_stats.count),
        )
        ts = ts.replace(obs_stats=stats)
        started = unstarted.sum(-1).astype(jnp.int32)
        greedy = jnp.zeros(ts.update.shape, bool)
        ro = Rollout(env, ts.carry, ts.prev_action, ts.prev_reward, pool, k_roll, k_ppo, key, started, greedy)
        return ts, ro

    def act(
        self, ts: TrainState, env: EnvState, carry: jax.Array, prev_action: jax.Array, prev_reward: jax.Array,
        key: jax.Array, greedy: jax.Array,
    ) -> Acted:  # fmt: skip
        """The policy acts on ``env`` and the task steps (no φ, no R: the kernel's part).
        greedy: bool[K, S], take the mode instead of sampling (evaluation)."""
        net = self.net
        ks = slots(lambda k: jax.random.split(k, 3))(key)
        key, k_act, k_reset = ks[:, :, 0], ks[:, :, 1], ks[:, :, 2]
        obs = self.normalize(ts.obs_stats, ts.dims, env.obs)
        first = env.t == 0
        carry, dist, value = slots(self.policy_step)(ts.params, carry, obs, prev_action, prev_reward, first)
        sampled = slots(net.dist.sample)(k_act, dist)
        mode = net.dist.mode(dist)
        g = greedy.reshape(greedy.shape + (1,) * (sampled.ndim - 2))
        raw = jnp.where(g, mode, sampled)
        action = net.dist.to_env(raw)
        next_task = vmap_lead(self.task.step, 3)(env.task, action)
        return Acted(obs, raw, action, net.dist.log_prob(dist, raw), value, carry, next_task, key, k_reset)

    def step_env(
        self, env: EnvState, acted: Acted, reward: jax.Array, next_obs: jax.Array, terms: jax.Array | None = None
    ) -> tuple[EnvState, dict[str, jax.Array]]:
        """The stepped (pre-reset) environments and the episode records (with ``terms``
        [K, S, N, M], each reward term summed over the episode so far: "ep_terms")."""
        t = env.t + 1
        terminated = jnp.asarray(acted.next_task.done, bool)
        truncated = (t >= self.horizon) & ~terminated
        end = terminated | truncated
        ep_return = env.ep_return + reward
        ep_terms = None if terms is None or env.ep_terms is None else env.ep_terms + terms
        info = {
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "end": end,
            "ep_return": ep_return,
            "ep_length": t,
            "ep_success": jnp.asarray(acted.next_task.success, bool),
        }
        if ep_terms is not None:
            info["ep_terms"] = ep_terms
        return EnvState(acted.next_task, next_obs, t, ep_return, ep_terms), info

    def settle(
        self, ts: TrainState, ro: Rollout, acted: Acted, reward: jax.Array, next_obs: jax.Array,
        fresh_task: TaskState | None, fresh_obs: jax.Array | None, terms: jax.Array | None = None,
    ) -> tuple[Rollout, Records]:  # fmt: skip
        """Auto-reset the envs whose episode ended, bootstrap V of the true next state,
        and record the step. fresh_*: start states for every env (reset_pool = 0 only).
        terms: the step's reward terms [K, S, N, num_terms] (None when num_terms = 0)."""
        stepped, info = self.step_env(ro.env, acted, reward, next_obs, terms)
        end = info["end"]
        if ro.pool is not None:
            starts, pool = slots(take_fresh)(ro.pool, end)
        else:
            assert fresh_task is not None and fresh_obs is not None
            starts, pool = fresh_env(fresh_task, fresh_obs, self.num_terms), None
        env = tree_where(end, starts, stepped)
        # V of the true (pre-reset) next state, to bootstrap where the horizon cut
        no = jnp.zeros_like(end)
        obs_n = self.normalize(ts.obs_stats, ts.dims, next_obs)
        _, _, next_value = slots(self.policy_step)(ts.params, acted.carry, obs_n, acted.action, reward, no)
        batch = Batch(
            obs=acted.obs, first=ro.env.t == 0, prev_action=ro.prev_action, prev_reward=ro.prev_reward,
            action=acted.raw, log_prob=acted.log_prob, value=acted.value,
            advantage=jnp.zeros_like(acted.value), target=jnp.zeros_like(acted.value),
        )  # fmt: skip
        extra = {
            "reward": reward,
            "terminated": info["terminated"],
            "truncated": info["truncated"],
            "next_value": next_value,
            "end": end,
            "ep_return": jnp.where(end, info["ep_return"], 0.0),
            "ep_success": (end & info["ep_success"]).astype(jnp.float32),
            "ep_length": jnp.where(end, info["ep_length"], 0).astype(jnp.float32),
            "finite": jnp.isfinite(next_obs).all(-1) & jnp.isfinite(reward) & jnp.isfinite(ro.env.obs).all(-1),
        }
        if "ep_terms" in info:  # each ended episode's term sums, as "ep_return" its return
            extra["ep_terms"] = jnp.where(end[..., None], info["ep_terms"], 0.0)
        moments = slots(batch_moments)(ro.env.obs)
        nxt = ro.replace(env=env, carry=acted.carry, prev_action=acted.action, prev_reward=reward, pool=pool,
                         key=acted.key)  # fmt: skip
        return nxt, (batch, extra, moments)

    def update(self, ts: TrainState, ro: Rollout, records: list[Records]) -> tuple[TrainState, dict[str, jax.Array]]:
        """GAE and PPO on the rollout's records (one per step), statistics, freezing and metrics."""
        return finish_update(self, ts, ro, stack_records(records))

    def update_stacked(self, ts: TrainState, ro: Rollout, stacked: Records) -> tuple[TrainState, dict[str, jax.Array]]:
        """:meth:`update` on records already stacked per slot, leaves [K, S, T, N, ...]
        (what a fused rollout returns)."""
        return finish_update(self, ts, ro, stacked)


def fresh_env(task: TaskState, obs: jax.Array, num_terms: int = 0) -> EnvState:
    """Environments at the start of an episode (t = 0, no return yet) in these states,
    with ``num_terms`` reward-term sums (none when 0)."""
    zeros = jnp.zeros(obs.shape[:-1], jnp.int32)
    terms = jnp.zeros(obs.shape[:-1] + (num_terms,), jnp.float32) if num_terms else None
    return EnvState(task, obs, zeros, zeros.astype(jnp.float32), terms)


def _zeros(x: jax.ShapeDtypeStruct) -> jax.Array:
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.split(jax.random.key(0), x.shape)
    return jnp.zeros(x.shape, x.dtype)
