"""Training a job with PPO in this process: the batched cascade, split when it fails,
watched by the batch watchdog.

If the batch as a whole fails, each candidate is retried alone so that one bad candidate
cannot sink the others. A batch has a watchdog (a deadline per batch, learned from the
earlier batches' pace): a runaway program costs that batch, not the run; it is found by
timing each program's artifact in a sandboxed worker, dropped
(:class:`~limen_jax.search.faults.ProgramTooSlow`) and the rest retrained.
"""

from __future__ import annotations

import math
import time
from typing import Any

from limen_jax.search.evaluation.jobs import MIN_BUDGET_S, EvalBatch, EvalJob, updates_of


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
    if job.return_policies:
        kwargs["return_policies"] = True
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
