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
in this process and, through JAX's persistent cache, across processes. The K programs'
φ and R form a small per-batch kernel (:mod:`limen_jax.rl.kernel`), the only compile a
new batch pays, and a search pays even that off its critical path:
:meth:`BatchTrainer.compile_ahead` compiles a batch on another thread, running nothing,
while the previous batch trains (:mod:`limen_jax.rl.compiled`). The host drives each
update: begin, then per rollout step act -> kernel -> settle, then update (dispatch is
asynchronous, so the host loop overlaps the device work).

Slot (k, s) draws all its randomness from ``jax.random.key(seeds[s])`` (never from k),
which is what makes a batched run match single runs. With several devices (GPUs, or
``--xla_force_host_platform_device_count`` on a CPU) the K x S slots are sharded over
them (``shard_map`` over a ("cand", "seed") mesh: no communication), the layout chosen
to give each device the fewest slots (:func:`layout`); where K or S does not divide,
slots are padded (the last candidate or seed again, its results dropped). A device
holding a share of the candidates runs only their programs (a switch on its index).
"""

from __future__ import annotations

import collections
import functools
import threading
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from limen_jax.interface import Interface
from limen_jax.rl.compiled import CompileOnce, out_shapes
from limen_jax.rl.config import PPOConfig
from limen_jax.rl.core import Core, Rollout, TrainState
from limen_jax.rl.env import BatchedInterface, vmap_lead
from limen_jax.rl.evaluate import Score, eval_begin, eval_start, eval_tally
from limen_jax.rl.fused import FusedRollout
from limen_jax.rl.kernel import ProgramKernel, kernel_fn
from limen_jax.rl.normalize import ObsStats
from limen_jax.rl.policy import Policy
from limen_jax.rl.result import BatchResult
from limen_jax.rl.update import METRICS, stack_records
from limen_jax.rl.watchdog import check_deadline
from limen_jax.task import Task
from limen_jax.xla_cache import enable_compilation_cache

PyTree = Any

__all__ = [
    "FUSE_MIN_UPDATES", "FUSE_MIN_UPDATE_STEPS", "METRICS", "BatchTrainer", "TrainState", "auto_rollout",
    "bucket_width", "forget_cores", "timed_evaluation", "train_batch",
]  # fmt: skip


def bucket_width(dim: int) -> int:
    """The padded observation width for a widest obs_dim of ``dim``: 64, then multiples
    of 32 up to 256 and of 64 up to 512 (beyond, multiples of 128: only task defaults are
    wider than programs may be, and a task's default has one fixed size), so that every
    batch of programs (1-512 features) falls in one of eleven shapes and a search compiles
    the program-independent part at most eleven times. Padding is cheap at small widths
    (on a 2-core CPU an xland update of 2 x 2 slots at width 64 took 3 % longer than at
    32) and not at larger ones: 8 programs of 17-147 features x 2 seeds updated in ~1190
    ms at 256, ~910 at 192, ~810 at 160 and ~800 at 147 (docs/training.md); a new shape
    costs a 15-20 s compile there, once per process and then from the persistent cache."""
    dim = max(int(dim), 1)
    if dim > 512:
        return -(-dim // 128) * 128
    if dim > 256:
        return -(-dim // 64) * 64
    return max(64, -(-dim // 32) * 32)


# A single run fuses its rollout (train_batch's "auto") from this many updates on: at the
# cpu preset (256 envs x 16) a fused xland rollout saved ~13 ms per update and cost ~2 s
# more compiling than the split one (docs/training.md), even at ~150 updates ...
FUSE_MIN_UPDATES = 200
# ... or from two updates on where an update is this many transitions a slot: at the paper
# preset (8192 x 16) fusing saved ~6 s an update for ~6 s more compiling (docs/fidelity.md).
FUSE_MIN_UPDATE_STEPS = 65_536


def auto_rollout(config: PPOConfig, updates: int) -> str:
    """The rollout "auto" picks for one run of ``updates`` updates: "fused" where its faster
    steps repay its longer compile (see FUSE_MIN_UPDATES), else "split"."""
    big = config.steps_per_update >= FUSE_MIN_UPDATE_STEPS and updates >= 2
    return "fused" if updates >= FUSE_MIN_UPDATES or big else "split"

# One Core per (task, config, width, sharding): its compiled functions serve every
# batch of programs of those shapes in this process. A task is known by its class, name,
# horizon and parameters (what ``Task.with_params`` changes).
_CORES: dict[tuple[Any, ...], Core] = {}


# The kernels' executables of the last few batches, by (programs, width, sharding): a
# batch compiled ahead (BatchTrainer.compile_ahead) hands them to the trainer that runs it.
_KERNELS: collections.OrderedDict[tuple[Any, ...], CompileOnce] = collections.OrderedDict()
_KERNELS_KEPT = 8
_KERNELS_LOCK = threading.Lock()


def forget_cores() -> None:
    """Drop this process's compiled functions (program-independent ones and the kernels),
    so the next batch of every shape compiles them again (benchmarks comparing cold runs
    in one process)."""
    _CORES.clear()
    with _KERNELS_LOCK:
        _KERNELS.clear()


def layout(num_candidates: int, num_seeds: int, num_devices: int) -> tuple[int, int] | None:
    """How K x S slots shard over D devices: (devices along K, devices along S), their
    product D, chosen for the fewest slots per device once K and S are padded to
    multiples (ties: more along S, which needs no switch between programs); None when
    sharding would not lower the slots per device (one device, or K = S = 1)."""
    K, S, D = int(num_candidates), int(num_seeds), int(num_devices)
    best, cost = None, K * S
    for ds in sorted((d for d in range(1, D + 1) if D % d == 0), reverse=True):
        dk = D // ds
        c = -(-K // dk) * -(-S // ds)
        if c < cost:
            best, cost = (dk, ds), c
    return best


def kernel_memo(interfaces: Sequence[Interface], width: int, sharded: Any, core: Core | None = None) -> CompileOnce:
    """The shared executables of these programs' kernel (interfaces by identity), or with
    ``core`` of their fused rollout. sharded: the trainer's layout (None: unsharded)."""
    key = (tuple(interfaces), int(width), sharded, core)
    with _KERNELS_LOCK:
        memo = _KERNELS.pop(key, None) or CompileOnce()
        _KERNELS[key] = memo
        while len(_KERNELS) > _KERNELS_KEPT:
            _KERNELS.popitem(last=False)
    return memo


def shared_core(task: Task, config: PPOConfig, width: int, sharded: Any, num_terms: int = 0) -> Core:
    """The Core of these shapes; sharded: the trainer's layout (None: unsharded), which
    its compiled functions are wrapped for."""
    ident = (type(task).__module__, type(task).__qualname__, task.name, int(task.episode_length),
             tuple(sorted((k, repr(v)) for k, v in dict(task.params).items())))  # fmt: skip
    key = (ident, config, int(width), sharded, int(num_terms))
    if key not in _CORES:
        _CORES[key] = Core(task, config, width, num_terms)
    return _CORES[key]


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
    ``compile_s``: seconds this trainer spent compiling (kernel and any core function
    not compiled before in this process).
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
    ) -> None:
        if rollout not in ("split", "fused"):
            raise ValueError(f"rollout must be 'split' or 'fused', got {rollout!r}")
        enable_compilation_cache()
        self.task = task
        self.config = config
        dims = [int(i.obs_dim) for i in interfaces]
        # split: a width bucket, so that later batches reuse this one's compiled core;
        # fused compiles the rollout per batch anyway and is for running speed: the exact
        # width (an xland update of a 17-feature program took 43 ms at 64, 32 ms at 17)
        widest = max(dims, default=1)
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
        self.core = shared_core(task, config, self.width, self.layout, self.iface.num_terms)
        self.net = self.core.net
        memo = kernel_memo(self.iface.interfaces, self.width, self.layout)
        self.kernel = ProgramKernel(self.iface, None if self.mesh is None else lambda f: self._shard(f, 4), memo,
                                    parts=dk)  # fmt: skip
        self.compile_s = 0.0
        self._core_compile_s = 0.0
        self._abstract = False  # compile_ahead in progress: calls take and give shapes
        shape = (self._K, self._S, config.num_envs)
        self._no_action = self.net.dist.to_env(self.net.dummy_action(shape))
        self.fused: FusedRollout | None = None
        if rollout == "fused":
            wrap = None if self.mesh is None else self._shard
            memo = kernel_memo(self.iface.interfaces, self.width, self.layout, self.core)
            self.fused = FusedRollout(self.core, kernel_fn(self.iface, dk), self._no_action, wrap, memo)

    @property
    def names(self) -> list[str]:
        return [i.name for i in self.iface.interfaces[: self.num_candidates]]

    @property
    def term_names(self) -> list[tuple[str, ...]]:
        """Per candidate, its reward terms' names (() for a scalar reward)."""
        return list(self.iface.term_names[: self.num_candidates])

    def real(self, x: Any) -> Any:
        """``x`` (leading axes: the padded slots) cut to the K x S slots asked for."""
        return x[: self.num_candidates, : self.num_seeds]

    @property
    def kernel_compile_s(self) -> float:
        """Seconds spent compiling the per-batch part: the programs' kernel, and the fused
        rollout that contains them (``rollout="fused"``)."""
        return self.kernel.compile_s + (self.fused.compile_s if self.fused is not None else 0.0)

    def _account(self) -> None:
        self.compile_s = self._core_compile_s + self.kernel_compile_s

    def _shard(self, fn: Any, nargs: int) -> Any:
        spec = PartitionSpec("cand", "seed")
        return jax.shard_map(fn, mesh=self.mesh, in_specs=(spec,) * nargs, out_specs=spec, check_vma=False)

    def _call(
        self, name: str, fn: Any, donate: tuple[int, ...], *args: Any, shard: bool = True, once: bool = False
    ) -> Any:
        """``fn`` of the core, compiled on first use (``once``: see :meth:`Core.compiled`)."""
        wrap = self._shard if shard and self.mesh is not None else None
        exe, seconds = self.core.compiled(name, fn, wrap, donate, *args, once=once)
        self._core_compile_s += seconds
        self._account()
        if self._abstract:  # compile_ahead: the outputs' shapes stand in for them
            return out_shapes(exe)
        if self.mesh is not None:  # e.g. zero-size leaves come back replicated
            args = jax.device_put(args, exe.input_shardings[0])
        return exe(*args)

    def _reset(self, keys: jax.Array) -> Any:
        """Fresh task states for ``keys`` [K, S, N]: the reset pool's chunks every update,
        or every step on the split path without a pool. Full optimisation either way: at
        K=8 x S=2 xland_easy resets of 256 envs took 22-26 ms per call at LLVM level 0 and
        4.5 ms optimised, ~40 ms of a ~950 ms update, for 3 s more compiling once per
        core (0.5 s at K=1, where a call took 1.8 ms against 0.4). A short run of a
        cheap-to-reset task pays: panda_track's CPU preset (K=2 x S=2, 20 updates) saves
        1 ms a call for 2.5 s more compiling (go1_push: 2.3 ms for 0.5 s)."""
        return self._call("reset", self.core.reset_tasks, (), keys)

    def _observe(self, tasks: Any) -> jax.Array:
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
        state = self._call("init", self.core.init, (), *args, shard=False, once=True)
        return self._place(state)

    def _place(self, state: TrainState) -> TrainState:
        if self.mesh is None or self._abstract:
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
        key, k_roll, k_ppo, reset_keys = self._call("begin", core.begin, (), ts, once=True)
        tasks = [self._reset(k) for k in reset_keys]
        obs = [self._observe(t) for t in tasks]
        ts, ro = self._call("start", core.start, (), ts, key, k_roll, k_ppo, tasks, obs, once=True)
        ro, records = self._steps(ts, ro)
        if self.fused is not None:
            return self._call("update_stacked", core.update_stacked, (), ts, ro, records)
        return self._call("update", core.update, (), ts, ro, records)

    def _steps(self, ts: TrainState, ro: Rollout) -> tuple[Rollout, Any]:
        """``rollout_len`` steps from ``ro`` -> (ro, records): the fused rollout's records
        stacked per slot, or the split path's list of per-step records."""
        core, cfg = self.core, self.config
        if self.fused is not None:
            ro, stacked = self.fused(ts, ro)
            self._account()
            return ro, stacked
        records = []
        for _ in range(cfg.rollout_len):
            acted = self._call("act", core.act, (), ts, ro.env, ro.carry, ro.prev_action, ro.prev_reward, ro.key,
                               ro.greedy)  # fmt: skip
            reward, next_obs, terms = self.kernel(ro.env.task.sim, acted.action, acted.next_task.sim, True)
            fresh_task, fresh_obs = None, None
            if cfg.reset_pool == 0:
                keys = self._call("split_envs", core.split_envs, (), acted.k_reset)
                fresh_task = self._reset(keys)
                fresh_obs = self._observe(fresh_task)
            ro, record = self._call("settle", core.settle, (), ts, ro, acted, reward, next_obs, fresh_task,
                                    fresh_obs, terms)  # fmt: skip
            records.append(record)
        return ro, records

    def params_tree(self, state: TrainState) -> PyTree:
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
        score = self._evaluation(state, key, self.core.eval_horizon)
        success = self.real(np.asarray(score.success, np.float32)[..., :E].mean(-1))
        returns = self.real(np.asarray(score.returns, np.float32)[..., :E].mean(-1))
        terms = None if score.terms is None else self.real(np.asarray(score.terms, np.float32)[..., :E, :].mean(-2))
        return success, returns, terms

    def _evaluation(self, state: TrainState, key: jax.Array, steps: int) -> Score:
        """The first episodes' score, leaves [K, S, rounds x N], after ``steps`` steps
        rounded up to whole rollouts (the horizon; one rollout when compiling ahead)."""
        core, cfg = self.core, self.config
        rounds = -(-cfg.eval_episodes // cfg.num_envs)
        keys = jnp.broadcast_to(key, state.update.shape)
        begin = functools.partial(eval_begin, core, rounds)
        reset_keys, act_keys = self._call("eval_begin", begin, (), state, keys, once=True)
        scores = []
        for reset_key, act_key in zip(reset_keys, act_keys, strict=True):
            tasks = self._reset(reset_key)
            obs = self._observe(tasks)
            ro, score = self._call("eval_start", functools.partial(eval_start, core), (), state, tasks, obs, act_key,
                                   once=True)  # fmt: skip
            for _ in range(-(-steps // cfg.rollout_len)):
                ro, records = self._steps(state, ro)
                extra = records[1] if self.fused is not None else [r[1] for r in records]
                score = self._call("eval_tally", functools.partial(_tally, limit=core.eval_horizon), (), score, extra,
                                   once=True)  # fmt: skip
            scores.append(score)
        if len(scores) == 1 or self._abstract:
            return scores[0]
        return jax.tree.map(lambda *x: jnp.concatenate(x, axis=2), *scores)

    # --- compiling ahead ----------------------------------------------------------------

    def _set_abstract(self, on: bool) -> None:
        self._abstract = self.kernel.abstract = on
        if self.fused is not None:
            self.fused.abstract = on

    def compile_ahead(self) -> float:
        """Compile everything a run of this trainer calls (init, an update, the evaluation),
        running nothing: the calls go through with ``jax.ShapeDtypeStruct`` arguments. Safe
        on another thread while a trainer of an earlier batch trains (XLA compiles outside
        the GIL); a trainer of the same shapes and programs then finds its executables
        compiled (or waits for the compile in flight). Returns the seconds it compiled."""
        before = self.compile_s
        K, S = self._K, self._S
        args = (jax.ShapeDtypeStruct((S,), jnp.int32), jax.ShapeDtypeStruct((K,), jnp.int32),
                jax.ShapeDtypeStruct((), jnp.int32))  # fmt: skip
        self._set_abstract(True)
        try:
            state = self._call("init", self.core.init, (), *args, shard=False, once=True)
            state, _ = self.update(state)
            self._evaluation(state, jax.random.key(0), 1)
        finally:
            self._set_abstract(False)
        return self.compile_s - before


def _tally(score: Score, extra: Any, limit: int) -> Score:
    """:func:`eval_tally` on stacked records, or on the split path's per-step list."""
    return eval_tally(score, stack_records(extra) if isinstance(extra, list) else extra, limit)


def timed_evaluation(
    trainer: BatchTrainer, state: TrainState, key: jax.Array
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray | None], float]:
    """:meth:`BatchTrainer.evaluate_terms` and the seconds it took, its compiling excluded."""
    start, compiled = time.perf_counter(), trainer.compile_s
    out = trainer.evaluate_terms(state, key)
    return out, time.perf_counter() - start - (trainer.compile_s - compiled)


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


def train_batch(
    task: Task,
    interfaces: Sequence[Interface],
    *,
    seeds: int | Sequence[int],
    total_steps: int,
    config: PPOConfig,
    eval_key: int = 0,
    rollout: str = "auto",
    deadline: float | None = None,
    return_policies: bool = False,
) -> BatchResult:
    """Train every interface with every seed (K x S policies) in one compiled call, then
    evaluate each on fresh episodes. ``seeds``: a count (seeds 0..n-1) or explicit list.

    ``total_steps`` env steps per (candidate, seed), rounded down to whole updates of
    ``config.num_envs x config.rollout_len`` steps (at least one). ``rollout``: "split",
    "fused" (see :class:`BatchTrainer`) or "auto": :func:`auto_rollout`, fused where faster
    steps repay the larger compile (long runs, or big updates). ``deadline``: see
    :meth:`BatchTrainer.run`. ``return_policies``: keep every slot's trained policy on
    the result (``BatchResult.policies``).
    """
    start = time.perf_counter()
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    updates = config.num_updates(total_steps)
    if rollout == "auto":
        rollout = auto_rollout(config, updates)
    trainer = BatchTrainer(task, interfaces, config, len(seed_list), rollout=rollout)
    state = trainer.init(seed_list, updates)
    state, curves = trainer.run(state, updates, deadline)
    (success, returns, terms), eval_s = timed_evaluation(trainer, state, jax.random.key(eval_key))
    return BatchResult(
        names=trainer.names,
        seeds=seed_list,
        success=success,
        final_return=returns,
        curves=curves,
        steps=updates * config.steps_per_update,
        wall_s=time.perf_counter() - start,
        compile_s=trainer.compile_s,
        diverged_at=trainer.real(np.asarray(state.diverged_at)),
        kernel_compile_s=trainer.kernel_compile_s,
        eval_s=eval_s,
        term_names=trainer.term_names,
        eval_terms=terms,
        policies=[policies_of(trainer, state, k) for k in range(len(interfaces))] if return_policies else None,
    )


def policies_of(trainer: BatchTrainer, state: TrainState, k: int) -> list[Policy]:
    """Candidate ``k``'s trained policies, one per seed of ``state`` (host copies)."""
    iface = trainer.iface.interfaces[k]
    params = jax.device_get(jax.tree.map(lambda x: x[k], trainer.params_tree(state)))
    stats = jax.device_get(jax.tree.map(lambda x: x[k], state.obs_stats))
    seeds = np.asarray(state.seed[k])[: trainer.num_seeds]
    updates = np.asarray(state.update[k])[: trainer.num_seeds]
    cfg = trainer.config
    out = []
    for s in range(len(seeds)):
        metadata = {
            "task": trainer.task.name,
            "task_params": {n: float(v) for n, v in dict(trainer.task.params).items()},
            "ppo": cfg.to_dict(),
            "width": int(trainer.width),
            "obs_dim": int(iface.obs_dim),
            "seed": int(seeds[s]),
            "interface": iface.name,
            "reward_terms": list(iface.reward_terms),
            "updates": int(updates[s]),
            "steps": int(updates[s]) * cfg.steps_per_update,
        }
        p = jax.tree.map(lambda x, s=s: np.asarray(x[s]), params)
        o = ObsStats(*(np.asarray(x[s]) for x in (stats.mean, stats.var, stats.count)))  # type: ignore[arg-type]
        out.append(Policy(p, o, metadata))
    return out
