"""The Evaluator seam: a batch of interfaces in, a future of per-candidate results out.

The loop calls :meth:`Evaluator.submit` and waits on the future, so a cluster evaluator
(a later issue, on Ray) drops in without touching the loop. An evaluator may also offer
``prepare(job)``, a hint that ``job`` will be submitted soon (the loop calls it when it
has checked the next batch while the current one trains): the default compiles the job
ahead then, on another thread. The default,
:class:`InProcessEvaluator`, runs the batched cascade (:func:`limen_jax.rl.run_cascade`)
on one background thread, so the loop can ask the LLM and check programs meanwhile.

A result is the cascade's ``CascadeResult`` or the ``Exception`` that training one
candidate raised: if the batch as a whole fails, each candidate is retried alone so
that one bad candidate cannot sink the others. A batch has a watchdog (a deadline per
batch, learned from the earlier batches' pace): a runaway program costs that batch, not
the run; it is found by timing each program's artifact in a sandboxed worker, dropped
(:class:`~limen_jax.search.faults.ProgramTooSlow`) and the rest retrained.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol


@dataclasses.dataclass(frozen=True)
class Budget:
    """Env steps per seed of the short single-seed run and of the full run, and the
    short run's success threshold (``short_steps == full_steps``: one full stage)."""

    short_steps: int
    full_steps: int
    threshold: float


@dataclasses.dataclass(frozen=True)
class EvalJob:
    """What a submission asks: the task, its interfaces, the training seeds and budget,
    the PPO config, and the batch watchdog: ``watchdog_s`` seconds for a batch when
    nothing has been learned yet (0: no watchdog), ``watchdog_factor`` x the time the
    batch is expected to take once earlier batches have been timed. pad_to: the batch size the
    search asks for; a batch that lost candidates to the checker is padded to it so compiled
    shapes repeat (None: no padding)."""

    task: Any
    interfaces: Sequence[Any]
    seeds: Sequence[int]
    budget: Budget
    config: Any
    pad_to: int | None = None
    watchdog_s: float = 0.0
    watchdog_factor: float = 5.0


@dataclasses.dataclass
class EvalBatch:
    """The answer: one ``CascadeResult`` or ``Exception`` per interface, in order;
    ``batch_error`` is the batched call's exception message when it had to be split;
    ``wall_s`` the seconds the evaluation took, of which ``compile_s`` compiling and
    ``eval_s`` the final evaluations (None when the evaluator does not tell);
    ``finished_at`` when it ended (epoch s)."""

    results: list[Any]
    batch_error: str | None = None
    wall_s: float = 0.0
    finished_at: float = dataclasses.field(default_factory=time.time)
    compile_s: float | None = None
    eval_s: float | None = None


class Evaluator(Protocol):
    """``submit`` and ``close``; optionally ``prepare(job) -> None`` (see the module)."""

    def submit(self, job: EvalJob) -> cf.Future[EvalBatch]: ...

    def close(self) -> None: ...


# The watchdog never gives a batch less than this (compiling a new batch's kernel varies).
MIN_BUDGET_S = 60.0


def updates_of(job: EvalJob) -> int:
    """Most PPO updates the job's cascade runs (both stages)."""
    b, cfg = job.budget, job.config
    full = cfg.num_updates(b.full_steps)
    return full + (min(cfg.num_updates(b.short_steps), full) if b.short_steps < b.full_steps else 0)


def evaluate(job: EvalJob, budget_s: float | None = None) -> EvalBatch:
    """Train ``job`` in this process (the batched cascade; one by one if the batch fails).

    budget_s: the watchdog's seconds for the batch (None: none). When training passes
    it, each program's artifact is timed in a sandboxed worker; the outliers get a
    :class:`ProgramTooSlow` and the rest are retrained; with no outlier every candidate
    gets a :class:`TrainingStalled` (the engine's fault).
    """
    from limen_jax.rl.watchdog import BatchTimeout

    t0 = time.perf_counter()
    try:
        results, batch_error = _train(job, list(job.interfaces), _deadline(budget_s))
    except BatchTimeout as timeout:
        results, batch_error = _drop_slow(job, timeout, budget_s or 0.0)
    return _with_phases(EvalBatch(results, batch_error, time.perf_counter() - t0))


def _deadline(budget_s: float | None) -> float | None:
    return time.monotonic() + budget_s if budget_s else None


def _train(job: EvalJob, interfaces: list[Any], deadline: float | None) -> tuple[list[Any], str | None]:
    """The cascade over ``interfaces``; if it fails (other than by the watchdog, which
    propagates), each candidate again alone. The results and the batch's error message."""
    from limen_jax import rl
    from limen_jax.rl.watchdog import BatchTimeout

    b = job.budget
    kwargs: dict[str, Any] = dict(config=job.config, short_steps=b.short_steps, full_steps=b.full_steps,
                                  seeds=list(job.seeds), threshold=b.threshold)
    try:
        return list(rl.run_cascade(job.task, interfaces, **kwargs, deadline=deadline, pad_to=job.pad_to)), None
    except BatchTimeout:
        raise
    except Exception as exc:
        first: Exception = exc
    batch_error = f"{type(first).__name__}: {first}"
    if len(interfaces) == 1:
        return [first], batch_error
    results: list[Any] = []
    for iface in interfaces:
        try:
            results.extend(rl.run_cascade(job.task, [iface], **kwargs))
        except Exception as one:
            results.append(one)
    return results, batch_error


def _drop_slow(job: EvalJob, timeout: Exception, budget_s: float) -> tuple[list[Any], str]:
    """After a timeout: time each program safely, drop the outliers, retrain the rest.

    The retry's budget is at least the batch's and at least ``watchdog_factor`` x the
    whole batch at the per-update pace of the run that timed out (the outlier included).
    """
    from limen_jax.program import Limits, check_sample
    from limen_jax.program.timing import reference_time, slow_programs, time_programs
    from limen_jax.rl.watchdog import BatchTimeout
    from limen_jax.search.faults import ProgramTooSlow, TrainingStalled

    interfaces = list(job.interfaces)
    limits = Limits()
    times = time_programs(interfaces, job.task, check_sample(job.task, limits), limits, _workers())
    slow = slow_programs(times)
    shown = ", ".join("timed out" if t == math.inf else "?" if t is None else f"{t * 1e6:.1f}" for t in times)
    note = f"{timeout}; φ + R per transition (µs), timed in sandboxed workers: {shown}"
    if not slow:
        stalled = TrainingStalled(f"{note}: no program is an outlier, so the engine or the machine stalled")
        return [stalled] * len(interfaces), note
    results: list[Any] = [None] * len(interfaces)
    reference = reference_time(times)
    for k in slow:
        t = times[k] or 0.0  # an outlier was measured (or timed out)
        took = "did not finish within the time limit" if t == math.inf else f"takes {t * 1e6:.1f} µs per transition"
        results[k] = ProgramTooSlow(
            f"too slow in training: get_observation + compute_reward {took} vs "
            f"{reference * 1e6:.1f} µs per transition for the other candidates of its batch, which stalled training. "
            "Compute fewer, cheaper features: no long loops, large matrices or pairwise computations."
        )
    keep = [k for k in range(len(interfaces)) if k not in slow]
    if keep:
        per_update = getattr(timeout, "per_update_s", 0.0)
        retry_s = max(budget_s, job.watchdog_factor * per_update * updates_of(job), MIN_BUDGET_S)
        try:
            rest, _ = _train(job, [interfaces[k] for k in keep], _deadline(retry_s))
        except BatchTimeout as again:
            rest = [TrainingStalled(f"{note}; without the outliers {sorted(slow)} training stalled again: {again}")]
            rest *= len(keep)
        for k, r in zip(keep, rest, strict=True):
            results[k] = r
    return results, note


def compile_job(job: EvalJob) -> float:
    """Compile what :func:`evaluate` will compile for ``job`` (the cascade's trainers),
    training nothing; the seconds it took."""
    from limen_jax import rl

    b = job.budget
    return rl.compile_cascade(job.task, list(job.interfaces), config=job.config, short_steps=b.short_steps,
                              full_steps=b.full_steps, seeds=list(job.seeds), pad_to=job.pad_to)  # fmt: skip


def _workers() -> int:
    from limen_jax.program import default_workers

    return default_workers()


def _with_phases(batch: EvalBatch) -> EvalBatch:
    """Add the compile and evaluation seconds of the batch's run_cascade calls (each
    call's totals ride on its first result, so the sum counts every call once)."""
    done = [r for r in batch.results if not isinstance(r, BaseException)]
    if all(hasattr(r, "compile_s") and hasattr(r, "eval_s") for r in done):  # else the split is unknown
        batch.compile_s = sum(float(r.compile_s) for r in done)
        batch.eval_s = sum(float(r.eval_s) for r in done)
    return batch


class InProcessEvaluator:
    """The default: :func:`evaluate` on a background thread, one batch at a time.

    The thread is a daemon, so an interrupted run (Ctrl-C) exits at once instead of
    waiting for the batch in flight to finish training; the checkpoint is unaffected.
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        # seconds per PPO update of the last batch that finished (compile included), learned
        self.per_update_s: float | None = None
        self._ahead: list[EvalJob] = []  # jobs to compile ahead, oldest first
        self._ahead_cv = threading.Condition()
        self._compiler: threading.Thread | None = None
        self.compiled_ahead_s = 0.0  # seconds spent compiling ahead (off the critical path)

    def budget_s(self, job: EvalJob) -> float | None:
        """The watchdog's seconds for ``job``: ``watchdog_s`` until a batch has been timed,
        then ``watchdog_factor`` x the expected time (at least MIN_BUDGET_S); None when off."""
        if job.watchdog_s <= 0:
            return None
        if self.per_update_s is None:
            return job.watchdog_s
        return max(MIN_BUDGET_S, job.watchdog_factor * self.per_update_s * updates_of(job))

    def submit(self, job: EvalJob) -> cf.Future[EvalBatch]:
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("InProcessEvaluator trains one batch at a time; wait for the last one first")
        future: cf.Future[EvalBatch] = cf.Future()

        def work() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                batch = evaluate(job, self.budget_s(job))
                if job.watchdog_s > 0 and batch.batch_error is None:  # a clean batch's pace: the next one's norm
                    self.per_update_s = batch.wall_s / max(1, updates_of(job))
                future.set_result(batch)
            except BaseException as exc:  # handed to the waiting loop, which classifies it
                future.set_exception(exc)

        self._thread = threading.Thread(target=work, name="limen-eval", daemon=True)
        self._thread.start()
        return future

    def prepare(self, job: EvalJob) -> None:
        """Compile ``job`` ahead on a background thread (jobs one after another), so that
        its submission trains at once; running nothing, it changes no result. A failure
        here is dropped: the submission compiles again and reports it."""
        with self._ahead_cv:
            self._ahead.append(job)
            if self._compiler is None:
                self._compiler = threading.Thread(target=self._compile_ahead, name="limen-compile", daemon=True)
                self._compiler.start()

    def _compile_ahead(self) -> None:
        while True:
            with self._ahead_cv:
                if not self._ahead:
                    self._compiler = None
                    self._ahead_cv.notify_all()
                    return
                job = self._ahead[0]
            with contextlib.suppress(Exception):  # the submission meets it again, classified there
                self.compiled_ahead_s += compile_job(job)
            with self._ahead_cv:
                self._ahead.pop(0)

    def close(self, wait: bool = True) -> None:
        """Drop the compiles ahead not yet started and wait for the one in flight (an XLA
        compile should not outlive the interpreter); ``wait=False`` (an interrupted run)
        leaves it to its daemon thread, as a batch in training is. The loop has waited for
        every batch it submitted."""
        with self._ahead_cv:
            self._ahead[1:] = []
            while wait and self._compiler is not None:
                self._ahead_cv.wait()
