"""The Evaluator seam: a job in, a future of its :class:`EvalBatch` out.

The loop calls :meth:`Evaluator.submit` and waits on the future, so a cluster evaluator
(on Ray) drops in without touching the loop; it runs each job with
:func:`limen_jax.search.evaluation.kind_registry.run_job` wherever it likes. ``prepare(job)`` is a
hint that ``job`` will be submitted soon (the loop calls it when it has checked the next
batch while the current one trains): the default compiles the job ahead then, on another
thread. The default, :class:`InProcessEvaluator`, runs the jobs one after another on one
background thread, so the loop can ask the LLM and check programs meanwhile.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import queue
import threading
from typing import Protocol

from limen_jax.search.evaluation.jobs import EvalBatch, EvalJob, updates_of, watchdog_budget
from limen_jax.search.evaluation.kind_registry import run_job
from limen_jax.search.evaluation.train_job import compile_job


class Evaluator(Protocol):
    """What the loop uses: ``submit``, ``prepare`` and ``close`` (see the module).
    :class:`EvaluatorBase` gives the defaults of ``prepare`` and ``close``, so an
    evaluator that subclasses it writes only ``submit``."""

    def submit(self, job: EvalJob) -> cf.Future[EvalBatch]: ...

    def prepare(self, job: EvalJob) -> None:
        """``job`` will be submitted soon; compiling it now must change no result."""
        ...

    def close(self, wait: bool = True) -> None:
        """Release what it holds; ``wait=False`` (an interrupted run) waits for nothing in flight."""
        ...


class EvaluatorBase:
    """Defaults of an evaluator: no compile ahead, nothing to release."""

    def submit(self, job: EvalJob) -> cf.Future[EvalBatch]:
        raise NotImplementedError

    def prepare(self, job: EvalJob) -> None:
        return None

    def close(self, wait: bool = True) -> None:
        return None


class InProcessEvaluator(EvaluatorBase):
    """The default: jobs run one after another (in submission order) on a background thread.

    The thread is a daemon, so an interrupted run (Ctrl-C) exits at once instead of
    waiting for the batch in flight to finish training; the checkpoint is unaffected.
    """

    def __init__(self) -> None:
        # None: the worker's signal to end (close), after the jobs before it
        self._jobs: queue.Queue[tuple[EvalJob, cf.Future[EvalBatch]] | None] = queue.Queue()
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
        return watchdog_budget(job, self.per_update_s)

    def submit(self, job: EvalJob) -> cf.Future[EvalBatch]:
        future: cf.Future[EvalBatch] = cf.Future()
        self._jobs.put((job, future))
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="limen-eval", daemon=True)
            self._thread.start()
        return future

    def _work(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                batch = run_job(job, self.budget_s(job))
                if job.watchdog_s > 0 and batch.batch_error is None:  # a clean batch's pace: the next one's norm
                    self.per_update_s = batch.wall_s / max(1, updates_of(job))
                future.set_result(batch)
            except BaseException as exc:  # handed to the waiting loop, which classifies it
                future.set_exception(exc)

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
        every job it submitted. The worker thread ends after the jobs already submitted (a
        notebook that runs many searches keeps no idle thread per run); a later submit starts
        a new one."""
        with self._ahead_cv:
            self._ahead[1:] = []
            while wait and self._compiler is not None:
                self._ahead_cv.wait()
        if self._thread is not None:
            self._jobs.put(None)
            if wait:
                self._thread.join()
            self._thread = None
