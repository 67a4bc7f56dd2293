"""The Evaluator seam: a batch of interfaces in, a future of per-candidate results out.

The loop only ever calls :meth:`Evaluator.submit` and waits on the future, so a cluster
evaluator (a later issue, on Ray) drops in without touching the loop. The default,
:class:`InProcessEvaluator`, runs the batched cascade (:func:`limen_jax.rl.run_cascade`)
on one background thread, so the loop can ask the LLM and check programs meanwhile.

A result is the cascade's ``CascadeResult`` or the ``Exception`` that training one
candidate raised: if the batch as a whole fails, each candidate is retried alone so
that one bad candidate cannot sink the others.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
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
    the PPO config. pad_to: the batch size the search asks for; a batch that lost
    candidates to the checker is padded to it so compiled shapes repeat (None: no padding)."""

    task: Any
    interfaces: Sequence[Any]
    seeds: Sequence[int]
    budget: Budget
    config: Any
    pad_to: int | None = None


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
    def submit(self, job: EvalJob) -> cf.Future[EvalBatch]: ...

    def close(self) -> None: ...


def evaluate(job: EvalJob) -> EvalBatch:
    """Train ``job`` in this process (the batched cascade; one by one if the batch fails)."""
    from limen_jax import rl

    t0 = time.perf_counter()
    b = job.budget
    kwargs: dict[str, Any] = dict(config=job.config, short_steps=b.short_steps, full_steps=b.full_steps,
                                  seeds=list(job.seeds), threshold=b.threshold)
    try:
        results: list[Any] = list(rl.run_cascade(job.task, list(job.interfaces), pad_to=job.pad_to, **kwargs))
        return _with_phases(EvalBatch(results, None, time.perf_counter() - t0), results[:1])
    except Exception as exc:
        first: Exception = exc
    batch_error = f"{type(first).__name__}: {first}"
    if len(job.interfaces) == 1:
        return EvalBatch([first], batch_error, time.perf_counter() - t0)
    results = []
    for iface in job.interfaces:
        try:
            results.extend(rl.run_cascade(job.task, [iface], **kwargs))
        except Exception as one:
            results.append(one)
    return _with_phases(EvalBatch(results, batch_error, time.perf_counter() - t0), results)


def _with_phases(batch: EvalBatch, calls: list[Any]) -> EvalBatch:
    """Add the compile and evaluation seconds of ``calls`` (one result per run_cascade
    call: every result of a call carries that call's totals)."""
    done = [r for r in calls if not isinstance(r, BaseException)]
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

    def submit(self, job: EvalJob) -> cf.Future[EvalBatch]:
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("InProcessEvaluator trains one batch at a time; wait for the last one first")
        future: cf.Future[EvalBatch] = cf.Future()

        def work() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(evaluate(job))
            except BaseException as exc:  # handed to the waiting loop, which classifies it
                future.set_exception(exc)

        self._thread = threading.Thread(target=work, name="limen-eval", daemon=True)
        self._thread.start()
        return future

    def close(self) -> None:
        """Nothing to release: the loop has waited for every batch it submitted."""
