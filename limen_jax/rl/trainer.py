"""The batched PPO trainer: K candidate interfaces x S seeds, trained together.

Layout is candidate-major: every leaf of :class:`TrainState` has leading axes [K, S].
Networks, optimiser states and PPO updates are vmapped over (K, S); the environments
step as one [K, S, N] batch; candidate k's φ and R touch only slice k.
Observations are padded to a width bucket at least the batch's widest ``obs_dim``;
padded features are zeroed, kept out of the normalisation statistics, and meet zero
rows of the input layers, so a candidate trains exactly as it would alone with the
same seed.

Compiling is split at the programs. The pure functions of :mod:`limen_jax.rl.core`
(task step and reset, networks, PPO update, evaluation) never see a program: they are
compiled once per (task, K, S, width bucket, config) and reused by every later batch,
in this process (:mod:`limen_jax.rl.cache`) and, through JAX's persistent cache, across
processes. The K programs' φ and R form a small per-batch kernel
(:mod:`limen_jax.rl.kernel`), the only compile a new batch pays, and a search pays even
that off its critical path: :meth:`BatchTrainer.compile_ahead` compiles a batch on
another thread, running nothing, while the previous batch trains. The host drives each
update: begin, then per rollout step act -> kernel -> settle, then update (dispatch is
asynchronous, so the host loop overlaps the device work).

Slot (k, s) draws all its randomness from ``jax.random.key(seeds[s])`` (never from k),
which is what makes a batched run match single runs. With several devices (GPUs, or
``--xla_force_host_platform_device_count`` on a CPU) the K x S slots are sharded over
them (``shard_map`` over a ("cand", "seed") mesh: no communication), the layout chosen
to give each device the fewest slots (:func:`~limen_jax.rl.shapes.layout`); where K or
S does not divide, slots are padded (the last candidate or seed again, its results
dropped). A device holding a share of the candidates runs only their programs (a
switch on its index).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from limen_jax.interface import Interface
from limen_jax.rl.cache import PROCESS_CACHE, CompileCache
from limen_jax.rl.compiled import out_shapes
from limen_jax.rl.config import PPOConfig
from limen_jax.rl.core import Rollout, TrainState
from limen_jax.rl.env import BatchedInterface, vmap_lead
from limen_jax.rl.evaluate import Score, eval_begin, eval_start, eval_tally
from limen_jax.rl.fused import FusedRollout
from limen_jax.rl.kernel import ProgramKernel, kernel_fn
from limen_jax.rl.shapes import bucket_width, layout
from limen_jax.rl.update import METRICS, Records, stack_records
from limen_jax.rl.watchdog import check_deadline
from limen_jax.task import Task, TaskState
from limen_jax.xla_cache import enable_compilation_cache

__all__ = ["METRICS", "BatchTrainer", "TrainState", "term_curves"]

A = TypeVar("A", np.ndarray, jax.Array)
# a rollout's records: the split path's one per step, or the fused rollout's stacked
StepRecords = list[Records] | Records


class BatchTrainer:
    """Trains K interfaces x S seeds of one task with one PPO config.

    >>> trainer = BatchTrainer(task, interfaces, config, num_seeds=3)
    >>> state = trainer.init([0, 1, 2], total_updates=trainer.config.num_updates(1_000_000))
    >>> state, curves = trainer.run(state, num_updates=50)   # curves: name -> (K, S, 50)
    >>> success = trainer.evaluate(state, jax.random.key(0))  # (K, S)

    ``width``: pad observations to this many features (default: the bucket of the widest
    candidate, or with ``rollout="fused"`` its exact width); the cascade keeps one width
    across stages so states can be carried over.
    ``rollout``: "split" (default) steps each rollout through the shared, once-compiled
    ``act`` and ``settle`` and the batch's kernel, so a new batch compiles only its
    programs; "fused" compiles the whole rollout with the programs inside as one scan
    per batch (:mod:`limen_jax.rl.fused`): a few seconds more compiling, faster running.
    ``cache``: where compiled functions are shared with other trainers (default: the
    process's, :data:`~limen_jax.rl.cache.PROCESS_CACHE`).
    ``compile_s``: seconds this trainer spent compiling (kernel and any core function
    not compiled before in its cache).
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
        rollout: str = "split",
        cache: CompileCache | None = None,
    ) -> None:
        if rollout not in ("split", "fused"):
            raise ValueError(f"rollout must be 'split' or 'fused', got {rollout!r}")
        enable_compilation_cache()
        cache = PROCESS_CACHE if cache is None else cache
        self.task = task
        self.config = config
        # split: a width bucket, so that later batches reuse this one's compiled core;
        # fused compiles the rollout per batch anyway and is for running speed: the exact width
        widest = max((int(i.obs_dim) for i in interfaces), default=1)
        self.num_candidates = len(interfaces)  # K and S as asked; the state holds the padded slots
        self.num_seeds = int(num_seeds)
        devices = jax.devices()
        self.layout = layout(self.num_candidates, self.num_seeds, len(devices)) if shard else None
        dk, ds = self.layout or (1, 1)
        self._K, self._S = -(-self.num_candidates // dk) * dk, -(-self.num_seeds // ds) * ds
        padded = list(interfaces) + [interfaces[-1]] * (self._K - len(interfaces)) if interfaces else []
        self.iface = BatchedInterface(padded, width or (widest if rollout == "fused" else bucket_width(widest)))
        self.width = self.iface.width
        self.mesh: Mesh | None = None
        if self.layout is not None:
            self.mesh = Mesh(np.asarray(devices).reshape(dk, ds), ("cand", "seed"))
        self.core = cache.core(task, config, self.width, self.layout, self.iface.num_terms)
        self.net = self.core.net
        memo = cache.kernels(self.iface.interfaces, self.width, self.layout)
        self.kernel = ProgramKernel(self.iface, None if self.mesh is None else lambda f: self._shard(f, 4), memo,
                                    parts=dk)  # fmt: skip
        self.compile_s = 0.0
        self._core_compile_s = 0.0
        shape = (self._K, self._S, config.num_envs)
        self._no_action = self.net.dist.to_env(self.net.dummy_action(shape))
        self.fused: FusedRollout | None = None
        if rollout == "fused":
            wrap = None if self.mesh is None else self._shard
            memo = cache.kernels(self.iface.interfaces, self.width, self.layout, self.core)
            self.fused = FusedRollout(self.core, kernel_fn(self.iface, dk), self._no_action, wrap, memo)

    @property
    def names(self) -> list[str]:
        return [i.name for i in self.iface.interfaces[: self.num_candidates]]

    @property
    def term_names(self) -> list[tuple[str, ...]]:
        """Per candidate, its reward terms' names (() for a scalar reward)."""
        return list(self.iface.term_names[: self.num_candidates])

    def real(self, x: A) -> A:
        """``x`` (leading axes: the padded slots) cut to the K x S slots asked for."""
        return x[: self.num_candidates, : self.num_seeds]

    @property
    def kernel_compile_s(self) -> float:
        """Seconds spent compiling the per-batch part: the programs' kernel, and the fused
        rollout that contains them (``rollout="fused"``)."""
        return self.kernel.compile_s + (self.fused.compile_s if self.fused is not None else 0.0)

    def _account(self) -> None:
        self.compile_s = self._core_compile_s + self.kernel_compile_s

    def _shard(self, fn: Callable[..., Any], nargs: int) -> Callable[..., Any]:
        spec = PartitionSpec("cand", "seed")
        return jax.shard_map(fn, mesh=self.mesh, in_specs=(spec,) * nargs, out_specs=spec, check_vma=False)

    def _compiled(
        self, name: str, fn: Callable[..., Any], *args: Any, shard: bool = True, once: bool = False
    ) -> jax.stages.Compiled:
        """``fn`` of the core compiled for these arguments (``once``: see :meth:`Core.compiled`)."""
        wrap = self._shard if shard and self.mesh is not None else None
        exe, seconds = self.core.compiled(name, fn, wrap, *args, once=once)
        self._core_compile_s += seconds
        self._account()
        return exe

    def _call(self, name: str, fn: Callable[..., Any], *args: Any, shard: bool = True, once: bool = False) -> Any:
        """``fn`` of the core run on ``args``, compiled on first use."""
        exe = self._compiled(name, fn, *args, shard=shard, once=once)
        if self.mesh is not None:  # e.g. zero-size leaves come back replicated
            args = jax.device_put(args, exe.input_shardings[0])
        return exe(*args)

    def _reset(self, keys: jax.Array) -> TaskState:
        """Fresh task states for ``keys`` [K, S, N]: the reset pool's chunks every update,
        or every step on the split path without a pool. Compiled at full optimisation
        (not ``once``): resetting is a large share of an update for some tasks."""
        return self._call("reset", self.core.reset_tasks, keys)  # type: ignore[no-any-return]

    def _observe(self, tasks: TaskState) -> jax.Array:
        """φ of fresh task states [K, S, N] through the kernel (R skipped)."""
        obs = self.kernel(tasks.sim, self._no_action, tasks.sim, False)[1]
        self._account()
        return obs

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
        seeds += seeds[-1:] * (self._S - len(seeds))  # padding slots: dropped from every result
        args = (jnp.asarray(seeds, jnp.int32), jnp.asarray(self.iface.dims, jnp.int32),
                jnp.asarray(int(total_updates), jnp.int32))  # fmt: skip
        state = self._call("init", self.core.init, *args, shard=False, once=True)
        return self._place(state)

    def _place(self, state: TrainState) -> TrainState:
        if self.mesh is None:
            return state
        return jax.device_put(state, NamedSharding(self.mesh, PartitionSpec("cand", "seed")))

    def graft(self, state: TrainState, source: TrainState, source_k: Sequence[int], seed_index: int = 0) -> TrainState:
        """Copy slot (source_k[k], 0) of ``source`` into slot (k, seed_index) of ``state``.

        The cascade continues a short single-seed run this way: the copied slot keeps its
        update count, so it stops when it reaches its budget while the fresh seeds train.
        Both trainers must share the observation width.
        """
        rows = list(source_k)
        idx = jnp.asarray(rows + rows[-1:] * (self._K - len(rows)), jnp.int32)
        moved = jax.tree.map(lambda x: x[idx, 0], source)
        return self._place(jax.tree.map(lambda x, y: x.at[:, seed_index].set(y), state, moved))

    # --- training -----------------------------------------------------------------------

    def run(
        self, state: TrainState, num_updates: int, deadline: float | None = None
    ) -> tuple[TrainState, dict[str, np.ndarray]]:
        """``num_updates`` PPO updates of every slot (the input state is consumed).
        Returns the new state and per-update curves name -> (K, S, U); NaN where a slot
        was frozen or no episode ended during the update. A batch with term programs adds
        "reward/<term>" for each term name of any candidate: the term's mean sum over the
        episodes that ended (NaN in the rows of candidates without that term).

        deadline: ``time.monotonic()`` seconds; checked after each update, once that
        update's result is ready (the watchdog), raising :class:`BatchTimeout`.
        """
        metrics = []
        started = time.monotonic()
        for u in range(int(num_updates)):
            state, m = self.update(state)
            metrics.append(m)
            if deadline is not None:
                jax.block_until_ready(m)  # the time is the device's, not the dispatch's
                check_deadline(deadline, u + 1, started)
        curves = {k: self.real(np.stack([np.asarray(m[k]) for m in metrics], -1)) for k in METRICS}
        if self.iface.num_terms:
            terms = self.real(np.stack([np.asarray(m["terms"]) for m in metrics], -1))
            curves.update(term_curves(terms, self.term_names))
        return state, curves

    def update(self, ts: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        """One PPO update of every slot: begin, T x (act, kernel, settle), update."""
        core = self.core
        key, k_roll, k_ppo, reset_keys = self._call("begin", core.begin, ts, once=True)
        tasks = [self._reset(k) for k in reset_keys]
        obs = [self._observe(t) for t in tasks]
        ts, ro = self._call("start", core.start, ts, key, k_roll, k_ppo, tasks, obs, once=True)
        ro, records = self._steps(ts, ro)
        if self.fused is not None:
            return self._call("update_stacked", core.update_stacked, ts, ro, records)  # type: ignore[no-any-return]
        return self._call("update", core.update, ts, ro, records)  # type: ignore[no-any-return]

    def _steps(self, ts: TrainState, ro: Rollout) -> tuple[Rollout, StepRecords]:
        """``rollout_len`` steps from ``ro`` -> (ro, records): the fused rollout's records
        stacked per slot, or the split path's list of per-step records."""
        core, cfg = self.core, self.config
        if self.fused is not None:
            ro, stacked = self.fused(ts, ro)
            self._account()
            return ro, stacked
        records = []
        for _ in range(cfg.rollout_len):
            acted = self._call("act", core.act, ts, ro.env, ro.carry, ro.prev_action, ro.prev_reward, ro.key, ro.greedy)
            reward, next_obs, terms = self.kernel(ro.env.task.sim, acted.action, acted.next_task.sim, True)
            fresh_task, fresh_obs = None, None
            if cfg.reset_pool == 0:
                keys = self._call("split_envs", core.split_envs, acted.k_reset)
                fresh_task = self._reset(keys)
                fresh_obs = self._observe(fresh_task)
            ro, record = self._call("settle", core.settle, ts, ro, acted, reward, next_obs, fresh_task, fresh_obs,
                                    terms)  # fmt: skip
            records.append(record)
        return ro, records

    def params_tree(self, state: TrainState) -> Any:
        """The parameters as the network's pytree, leaves [K, S, ...]."""
        return vmap_lead(self.core.flat.unravel, 2)(state.params)

    # --- evaluation ---------------------------------------------------------------------

    def evaluate(self, state: TrainState, key: jax.Array) -> np.ndarray:
        """Success rate (K, S) on ``config.eval_episodes`` fresh episodes per slot."""
        return self.evaluate_full(state, key)[0]

    def evaluate_full(self, state: TrainState, key: jax.Array) -> tuple[np.ndarray, np.ndarray]:
        """(success rate, mean episode return under R), each float32 (K, S)."""
        return self.evaluate_terms(state, key)[:2]

    def evaluate_terms(self, state: TrainState, key: jax.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """:meth:`evaluate_full` and each reward term's mean episode sum, float32
        (K, S, num_terms) in :attr:`term_names` order per candidate (None when no
        candidate has terms)."""
        E = self.config.eval_episodes
        score = self._evaluation(state, key)
        success = self.real(np.asarray(score.success, np.float32)[..., :E].mean(-1))
        returns = self.real(np.asarray(score.returns, np.float32)[..., :E].mean(-1))
        terms = None if score.terms is None else self.real(np.asarray(score.terms, np.float32)[..., :E, :].mean(-2))
        return success, returns, terms

    def _evaluation(self, state: TrainState, key: jax.Array) -> Score:
        """The first episodes' score, leaves [K, S, rounds x N], after the task's horizon
        rounded up to whole rollouts."""
        core, cfg = self.core, self.config
        rounds = -(-cfg.eval_episodes // cfg.num_envs)
        keys = jnp.broadcast_to(key, state.update.shape)
        reset_keys, act_keys = self._call("eval_begin", functools.partial(eval_begin, core, rounds), state, keys,
                                          once=True)  # fmt: skip
        scores = []
        for reset_key, act_key in zip(reset_keys, act_keys, strict=True):
            tasks = self._reset(reset_key)
            obs = self._observe(tasks)
            ro, score = self._call("eval_start", functools.partial(eval_start, core), state, tasks, obs, act_key,
                                   once=True)  # fmt: skip
            for _ in range(-(-core.eval_horizon // cfg.rollout_len)):
                ro, records = self._steps(state, ro)
                score = self._call("eval_tally", functools.partial(_tally, limit=core.eval_horizon), score,
                                   _extras(records), once=True)  # fmt: skip
            scores.append(score)
        if len(scores) == 1:
            return scores[0]
        return jax.tree.map(lambda *x: jnp.concatenate(x, axis=2), *scores)

    # --- compiling ahead ----------------------------------------------------------------

    def compile_ahead(self) -> float:
        """Compile everything a run of this trainer calls (init, an update, the evaluation),
        running nothing: each compiled function's outputs' shapes are the next one's
        arguments. Safe on another thread while a trainer of an earlier batch trains (XLA
        compiles outside the GIL); a trainer of the same shapes and programs then finds
        its executables compiled (or waits for the compile in flight). Returns the
        seconds it compiled."""
        before = self.compile_s
        core, cfg = self.core, self.config
        shapes = self._shapes
        ints = [jax.ShapeDtypeStruct(shape, jnp.int32) for shape in ((self._S,), (self._K,), ())]
        state = shapes("init", core.init, *ints, shard=False, once=True)
        key, k_roll, k_ppo, reset_keys = shapes("begin", core.begin, state, once=True)
        tasks, obs = self._fresh_shapes(reset_keys[0])
        chunks = len(reset_keys)
        ts, ro = shapes("start", core.start, state, key, k_roll, k_ppo, [tasks] * chunks, [obs] * chunks, once=True)
        ro, records = self._step_shapes(ts, ro)
        if self.fused is not None:
            state, _ = shapes("update_stacked", core.update_stacked, ts, ro, records)
        else:
            state, _ = shapes("update", core.update, ts, ro, records)
        # the evaluation: its first round, and one rollout of its steps
        rounds = -(-cfg.eval_episodes // cfg.num_envs)
        keys = jnp.broadcast_to(jax.random.key(0), state.update.shape)
        reset_keys, act_keys = shapes("eval_begin", functools.partial(eval_begin, core, rounds), state, keys, once=True)
        tasks, obs = self._fresh_shapes(reset_keys[0])
        ro, score = shapes("eval_start", functools.partial(eval_start, core), state, tasks, obs, act_keys[0], once=True)
        ro, records = self._step_shapes(state, ro)
        shapes("eval_tally", functools.partial(_tally, limit=core.eval_horizon), score, _extras(records), once=True)
        return self.compile_s - before

    def _shapes(self, name: str, fn: Callable[..., Any], *args: Any, shard: bool = True, once: bool = False) -> Any:
        """``fn`` of the core compiled for these arguments: its outputs'
        ``jax.ShapeDtypeStruct`` leaves, what the run's call would return."""
        return out_shapes(self._compiled(name, fn, *args, shard=shard, once=once))

    def _fresh_shapes(self, keys: jax.ShapeDtypeStruct) -> tuple[TaskState, jax.ShapeDtypeStruct]:
        """:meth:`_reset` and :meth:`_observe` compiled: (task states, φ) of
        ``jax.ShapeDtypeStruct`` leaves."""
        tasks = self._shapes("reset", self.core.reset_tasks, keys)
        obs = out_shapes(self.kernel.compile(tasks.sim, self._no_action, tasks.sim, False))[1]
        self._account()
        return tasks, obs

    def _step_shapes(self, ts: TrainState, ro: Rollout) -> tuple[Rollout, StepRecords]:
        """:meth:`_steps` compiled, on and to ``jax.ShapeDtypeStruct`` leaves: (ro,
        records); the split path's steps all have the first's shapes."""
        core, cfg = self.core, self.config
        if self.fused is not None:
            out = out_shapes(self.fused.compile(ts, ro))
            self._account()
            return out  # type: ignore[no-any-return]
        shapes = self._shapes
        acted = shapes("act", core.act, ts, ro.env, ro.carry, ro.prev_action, ro.prev_reward, ro.key, ro.greedy)
        reward, next_obs, terms = out_shapes(self.kernel.compile(ro.env.task.sim, acted.action, acted.next_task.sim,
                                                                 True))  # fmt: skip
        self._account()
        fresh_task, fresh_obs = None, None
        if cfg.reset_pool == 0:
            fresh_task, fresh_obs = self._fresh_shapes(shapes("split_envs", core.split_envs, acted.k_reset))
        ro, record = shapes("settle", core.settle, ts, ro, acted, reward, next_obs, fresh_task, fresh_obs, terms)
        return ro, [record] * cfg.rollout_len


def _extras(records: StepRecords) -> dict[str, jax.Array] | list[dict[str, jax.Array]]:
    """The episode records (``extra`` of :meth:`Core.settle`) of a rollout's records: the
    split path's list of per-step records, or the fused rollout's stacked ones."""
    return [r[1] for r in records] if isinstance(records, list) else records[1]


def _tally(score: Score, extra: dict[str, jax.Array] | list[dict[str, jax.Array]], limit: int) -> Score:
    """:func:`eval_tally` on stacked records, or on the split path's per-step list."""
    return eval_tally(score, stack_records(extra) if isinstance(extra, list) else extra, limit)


def term_curves(terms: np.ndarray, names: Sequence[tuple[str, ...]]) -> dict[str, np.ndarray]:
    """terms float32 (K, S, M, U), candidate k's slot j holding its term names[k][j] ->
    "reward/<name>" -> (K, S, U), NaN in the rows of candidates without that term."""
    K, S, _, U = terms.shape
    out: dict[str, np.ndarray] = {}
    for k, own in enumerate(names):
        for j, name in enumerate(own):
            curve = out.setdefault(f"reward/{name}", np.full((K, S, U), np.nan, np.float32))
            curve[k] = terms[k, :, j]
    return out
