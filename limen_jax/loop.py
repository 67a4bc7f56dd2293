"""One search run, batch by batch, durable, resumable and pipelined.

The loop only executes: it asks the strategy for a batch of requests (:mod:`limen_jax.search.requests`),
carries out their asks (the mutator, the checker: :mod:`limen_jax.run.ask`), submits each evaluation to the
Evaluator as a job of its kind (the first batch's with the baseline: :mod:`limen_jax.run.baseline`), waits,
records the outcomes (:mod:`limen_jax.run.record`) in the archive and the run directory, tells the strategy,
checkpoints. With the pipeline on, batch i+1 is proposed, asked and checked while batch i trains; its prompts
see the archive as of batch i-1, a fixed depth, so a resumed or replayed run makes exactly the same choices.

It carries a :class:`~limen_jax.run.state.RunState` (:func:`~limen_jax.run.state.open_run`; :mod:`limen_jax.run.start`).
"""
from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from limen_jax.config import EvolveConfig
from limen_jax.progress import AskStatus, Progress
from limen_jax.run.ask import Prepared, ask_and_check, asks_llm
from limen_jax.run.baseline import note_baseline, with_baseline
from limen_jax.run.batch_jobs import Submitted, jobs_for, placeholder_jobs, training_counts, trains, wait_all
from limen_jax.run.interfaces import prefetch_check_sample, stored_interface
from limen_jax.run.interrupts import Interrupts
from limen_jax.run.outputs import report_lines, write_best, write_plots
from limen_jax.run.record import batch_outcomes, policies_to_keep, score_batch
from limen_jax.run.state import RunState, job_context, kept_policies, open_run, search_view
from limen_jax.run.timing import batch_timing
from limen_jax.run.writes import keep_trained_policies, store_record, write_checkpoint, write_trainable
from limen_jax.run_result import RunResult
from limen_jax.rundir import RunDir
from limen_jax.search.evaluation.evaluator import Evaluator, InProcessEvaluator
from limen_jax.search.evaluation.jobs import EvalBatch
from limen_jax.search.evaluation.kind_registry import evaluation_kind
from limen_jax.search.evaluation.prescreen import screen_and_report
from limen_jax.search.faults import Interrupted, RunStop, batch_fault
from limen_jax.search.requests import ProgramRequest, Request


def run_loop(config: EvolveConfig, rd: RunDir, task: Any, *, mutator: Any, evaluator: Evaluator | None,
             verbose: bool, allow_changes: bool, handle_signals: bool) -> RunResult:
    """Open the run in ``rd`` (restored or new) and run it to its end or a stop."""
    interrupts = Interrupts(handle_signals)
    with interrupts.installed():
        say = (lambda text: print(text, flush=True)) if verbose else (lambda text: None)
        state = open_run(config, rd, task, mutator=mutator, allow_changes=allow_changes, say=say)
        return Loop(state, rd, evaluator, interrupts, Progress(verbose), say).run()


class Loop:
    """Executes the run of ``state``. evaluator: the one handed in (closed by its owner),
    or None for an in-process one the loop owns."""

    def __init__(self, state: RunState, rd: RunDir, evaluator: Evaluator | None, interrupts: Interrupts,
                 progress: Progress, say: Callable[[str], None]) -> None:
        self.s, self.rd, self.interrupts, self.progress, self.say = state, rd, interrupts, progress, say
        self.owns_evaluator = evaluator is None
        self.evaluator: Evaluator = evaluator if evaluator is not None else InProcessEvaluator()
        self.ctx = job_context(state, Path(rd.path))

    def run(self) -> RunResult:
        s, total, it = self.s, self.s.iterations + 1, self.s.start
        stopped, complete, interrupted = "finished", True, None
        try:
            # a resumed run that its strategy (or its program budget) had already stopped stays stopped
            reason = self._done(it) if 0 < it < total else None
            stopped = f"finished early: {reason}" if reason else stopped
            current = self._first(it) if it < total and not reason else None
            while current is not None:
                if current.stop is not None:
                    raise current.stop
                submitted, t0 = self._submit(current)
                self._write_plots()
                nxt = self._prepare(it + 1, None) if s.pipeline and it + 1 < total else None
                if nxt is not None and nxt.stop is None:
                    self._compile_ahead(nxt)
                batches = self._wait(submitted, training_counts(current.training)[0], t0)
                with self.interrupts.recording():
                    self._record(it, current, submitted, batches, nxt)
                it += 1
                reason = self._done(it) if it < total else None
                if it >= total or reason:
                    stopped = f"finished early: {reason}" if reason else stopped
                    break
                current = nxt if nxt is not None else self._prepare(it, None)
        except RunStop as stop:
            complete = False
            stopped = (f"stopped ({stop.kind}): {stop} (fix it if needed, then resume with python -m limen_jax.evolve "
                       f"--resume {self.rd.path})")
            self.rd.log(f"{stop.kind}_stop", message=str(stop))
            self.say(stopped)
        except Interrupted as stop:
            self.interrupts.stopping = True
            complete, interrupted = False, stop.signum
            name, how = signal.Signals(stop.signum).name, "at once" if stop.now else "at a safe point"
            stopped = (f"interrupted by {name} ({how}; the last checkpoint holds every finished batch): resume "
                       f"with python -m limen_jax.evolve --resume {self.rd.path}")
            self.rd.log("interrupted", signal=name, at_once=stop.now)
            self._close(wait=False)  # the batch in flight is abandoned: its daemon thread is not waited for
        except KeyboardInterrupt:
            self._close(wait=False)  # exit at once: a compile ahead in flight is not waited for
            raise
        finally:
            self.progress.close()
            self._close(wait=True)
        result = RunResult(self.rd.path, s.config, s.archive.store, s.archive, stopped, complete, interrupted,
                           s.baseline)
        if interrupted is None:
            write_best(self.rd.path, s.archive.store, s.config, s.task.name)
            self._write_plots()
        self.rd.log("run_end", stopped=stopped, complete=complete, best=result.best.id if result.best else None,
                    usage=s.mutator.usage())
        return result

    def _close(self, wait: bool) -> None:  # an evaluator handed in is closed by its owner
        if self.owns_evaluator:
            self.evaluator.close(wait=wait)
            self.owns_evaluator = False

    def _first(self, it: int) -> Prepared:
        """The first batch of this process (proposed unless restored); the check sample and
        the first compile start before it is asked, to overlap the LLM."""
        s = self.s
        requests = s.pending if s.pending is not None else self._propose(it)
        asked = [r for r in requests if isinstance(r, ProgramRequest) and r.source == "llm"]
        self.say(f"limen_jax: {s.task.name}, mode {s.config.search.mode}, strategy {s.strategy.name}, "
                 f"{s.iterations + 1} generations, mutator {s.mutator.named(any(map(asks_llm, requests)))}, "
                 f"pipeline {'on' if s.pipeline else 'off'}, run dir {self.rd.path}")
        if any(isinstance(r, ProgramRequest) and r.source != "default" for r in requests):
            prefetch_check_sample(s.task, s.limits, self.progress)
        for job in placeholder_jobs(asked, self.ctx, s.task, s.mode) if asked else []:
            self.evaluator.prepare(job)
        return with_baseline(self._prepare(it, requests), s)

    def _done(self, it: int) -> str | None:
        """Why the run stops before batch ``it``: its program budget spent, or its strategy's own rule."""
        budget, n = self.s.config.search.programs, len(self.s.archive.store)
        if budget is not None and n >= budget:
            return f"program budget of {budget} reached ({n} programs)"
        return self.s.strategy.done(search_view(self.s, it))

    def _propose(self, it: int) -> list[Request]:
        return list(self.s.strategy.propose(search_view(self.s, it), np.random.default_rng([self.s.config.seed, it])))

    def _prepare(self, it: int, requests: list[Request] | None) -> Prepared:
        """Propose batch ``it`` (unless restored), carry out its asks and checks, pre-screen it."""
        s = self.s
        requests = self._propose(it) if requests is None else requests
        programs = sum(isinstance(r, ProgramRequest) and r.source != "default" for r in requests)
        status = AskStatus(it, sum(map(asks_llm, requests)), programs)

        def log(event: str, **fields: Any) -> None:
            self.rd.log(event, **fields)
            status.answered += event == "response"

        if programs:  # the live status, redrawn every second, until the batch is checked
            self.progress.set("ask", status.text)
        try:
            prepared = ask_and_check(requests, mutator=s.mutator.get, task=s.task, mode=s.mode,
                                     store=s.archive.store, concurrency=s.config.llm.concurrency, limits=s.limits,
                                     log=log, mutator_name=s.mutator.built_name, iteration=it, strategy=s.strategy,
                                     on_check=status.checked)
        finally:
            self.progress.clear("ask")
        if prepared.stop is None:  # repeats first: a repeat is neither screened nor trained
            s.repeats.mark(prepared.children)
            if s.prescreen is not None:
                screen_and_report(s.prescreen, prepared.children, self.ctx, self.rd, self.say, self.progress, it)
        s.interfaces.update((c.record.id, c.interface) for c in prepared.trainable)
        return prepared

    def _submit(self, prepared: Prepared) -> tuple[list[Submitted], float]:
        """Write the trainable children, submit their jobs and the batch's eval requests;
        returns them and when training began."""
        s = self.s
        write_trainable(self.rd, prepared.trainable)
        out = [Submitted(kind, job, self.evaluator.submit(job), children=cs)
               for kind, cs, job in jobs_for(prepared.trainable, self.ctx, prepared.baseline)]
        (n, scoring), it, t0 = training_counts(prepared.trainable), prepared.iteration, time.time()
        if n or scoring:
            seeds, steps, text = s.config.search.seeds, s.config.cascade.full_steps, self.progress.training_text
            self.progress.set("train", lambda: text(it, n, seeds, steps, time.time() - t0, scoring))
        for request in prepared.evals:
            records = [s.archive.store.get(i) for i in request.program_ids]
            ifaces = [stored_interface(r, s.interfaces, s.task, s.mode, s.limits) for r in records]
            job = evaluation_kind(request.evaluation).job(self.ctx, ifaces, request.options)
            self.rd.log("evaluate", id=request.id, iteration=request.iteration, kind=request.evaluation,
                        programs=list(request.program_ids), options=request.options)
            out.append(Submitted(request.evaluation, job, self.evaluator.submit(job), request=request,
                                 records=records))
        return out, t0

    def _compile_ahead(self, prepared: Prepared) -> None:
        """Let the evaluator compile the next batch's training jobs while this one trains
        (never changes a result: compiled code is the same whichever thread compiles it)."""
        for kind, _, job in jobs_for(prepared.trainable, self.ctx):
            if trains(kind):
                self.evaluator.prepare(job)

    def _wait(self, submitted: list[Submitted], n: int, t0: float) -> list[EvalBatch]:
        """Every job's results (the live status counts the seconds since ``t0``)."""
        try:
            out = wait_all(submitted)
        finally:
            self.progress.clear("train")
        self.progress.trained(n, self.s.config.search.seeds, self.s.config.cascade.full_steps, time.time() - t0)
        return out

    def _record(self, it: int, prepared: Prepared, submitted: list[Submitted], batches: list[EvalBatch],
                nxt: Prepared | None) -> None:
        """Stop on an engine fault; score, record, tell, checkpoint, report."""
        s = self.s
        for sub, batch in zip(submitted, batches):
            if batch.batch_error:
                self.rd.log("batch_error", iteration=it, kind=sub.kind, message=batch.batch_error)
            fault = batch_fault(batch.results)
            if fault is not None:
                raise RunStop("engine", f"training failed in the engine: {fault}")
        scored = score_batch(submitted, batches)
        for demos, round_ in scored.demos:
            s.demos.extend(demos, round_)
        note_baseline(s, prepared, self.rd.log)
        for children, results in scored.trained:
            keep_trained_policies(self.rd, policies_to_keep(children, results), kept_policies(s))
        for event in scored.events:
            self.rd.log("evaluation", **event)
        timing = batch_timing(prepared, batches, s.clock, time.time())
        per_child = round(sum(b.wall_s for b in batches) / max(1, len(prepared.trainable)), 2)
        s.repeats.settle(prepared.children, per_child, s.archive.store)
        for child in prepared.children:
            store_record(self.rd, s, child.record)
        outcomes = batch_outcomes(prepared, scored)
        for event in s.strategy.tell(search_view(s, it), outcomes) if outcomes else []:
            event = dict(event)
            self.rd.log(event.pop("event", "strategy"), iteration=it, **event)
        self.rd.log("iteration", iteration=it, **timing)
        write_checkpoint(self.rd, it, s, nxt.requests if nxt is not None and nxt.requests else None)
        for line in report_lines(it, s.iterations, s.archive.store, s.mutator.spend, timing, time.time() - s.clock.t0):
            self.say(line)

    def _write_plots(self) -> None:
        """The plots, when a checkpoint came since they were drawn (and once per process);
        called after the next batch is submitted, which matplotlib must not hold back."""
        if self.s.plots_due:
            self.s.plots_due = False
            write_plots(self.rd.path, self.s.archive, self.s.task.name, self.s.config.search.mode, self.s.baseline)
