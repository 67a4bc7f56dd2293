"""One search run, batch by batch, durable, resumable and pipelined (see evolve.py).

The loop does only I/O: it asks the strategy for a batch of requests
(:mod:`limen_jax.search.requests`), carries out their asks (the mutator, the checker:
:mod:`limen_jax.ask`), submits each evaluation to the Evaluator as a job of its kind
(:mod:`limen_jax.search.evaluations`, which also score the results), records the
outcomes in the archive and the run directory, tells the strategy, checkpoints. With the
pipeline on (:mod:`limen_jax.search.pipeline`), batch i+1 is proposed, asked and checked
while batch i trains; its prompts see the archive as of batch i-1, a fixed depth, so a
resumed or replayed run makes exactly the same choices.

The run's parts live beside it: its mutator (:mod:`limen_jax.llm.run_mutator`), its
demonstrations (:mod:`limen_jax.search.run_demos`), a batch's jobs
(:mod:`limen_jax.search.batch_jobs`), the signals that stop it
(:mod:`limen_jax.search.interrupts`), what it prints and leaves
(:mod:`limen_jax.search.outputs`), which config keys a resume may change
(:data:`limen_jax.config.RESUMABLE`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from limen_jax.ask import Child, Prepared, ask_and_check
from limen_jax.config import EvolveConfig, resume_changes
from limen_jax.llm.run_mutator import RunMutator, settle_auto
from limen_jax.modes import program_mode, strategy_for
from limen_jax.progress import Progress
from limen_jax.run_result import RunResult
from limen_jax.rundir import RunDir
from limen_jax.search.batch_jobs import Submitted, jobs_for, placeholder_jobs, trains, wait_all
from limen_jax.search.evaluations import JobContext, evaluation_kind
from limen_jax.search.evaluator import InProcessEvaluator
from limen_jax.search.faults import Interrupted, RunStop, batch_fault
from limen_jax.search.interrupts import Interrupts
from limen_jax.search.jobs import Budget, EvalBatch
from limen_jax.search.outputs import report_lines, write_best, write_plots
from limen_jax.search.pipeline import resolve_pipeline
from limen_jax.search.registry import make_strategy, register_strategy
from limen_jax.search.requests import (
    Outcome,
    ProgramRequest,
    Request,
    TextRequest,
    request_from_dict,
    request_to_dict,
)
from limen_jax.search.run_demos import RunDemos


def _asks_llm(request: Request) -> bool:
    """Whether ``request`` is answered by the LLM: a text, or a program it writes."""
    return isinstance(request, TextRequest) or (isinstance(request, ProgramRequest) and request.source == "llm")


class Loop:
    def __init__(self, config: EvolveConfig, run_dir: RunDir, *, mutator: Any = None, verbose: bool = True,
                 evaluator: Any = None, allow_changes: bool = False, strategy: Any = None,
                 handle_signals: bool = False) -> None:
        from limen_jax.task import make

        self.config = config
        self.rd = run_dir
        self.verbose = verbose
        self.progress = Progress(verbose)
        self.task = make(config.task)
        self.mode = config.search.mode
        self.program_mode = program_mode(self.mode)
        self._mutator = mutator
        self._evaluator = evaluator
        self._allow_changes = allow_changes
        if strategy is not None:  # an object handed in: found by its name from now on
            register_strategy(strategy.name, strategy)
        self._interfaces: dict[str, Any] = {}  # checked interfaces by program id (this process)
        self.demos = RunDemos(run_dir, self.task, config.search.demos, config.seed)
        self.t0 = time.time()
        self._last_train_end = 0.0
        self._last_iter_end = self.t0
        self._plots_due = True
        self.interrupts = Interrupts(handle_signals)

    # --- setup ------------------------------------------------------------------------
    def _setup(self) -> int:
        """Restore the checkpoint if there is one; returns the first iteration to run."""
        from limen_jax.archive import Archive

        saved = self.rd.read_json("config.json")
        state = self.rd.read_json("state.json")
        for note in self.rd.notes:  # what opening the run dir repaired
            self._say(f"resume: {note}")
        if any("state.json" in n for n in self.rd.notes):
            self.rd.log("checkpoint_fallback", message=[n for n in self.rd.notes if "state.json" in n][0])
        if self._mutator is None:  # "auto" names one mutator for the whole run, resumes included
            self.config = dataclasses.replace(self.config, llm=settle_auto(self.config.llm, saved))
        name = strategy_for(self.mode, self.config.search.strategy)
        self.strategy = make_strategy(name, self.config.search.options, (state or {}).get("strategy"))
        pipeline = resolve_pipeline(self.config.search, self.config.llm, lookahead=self.strategy.lookahead,
                                    custom_mutator=self._mutator is not None, saved=saved)
        self.config = dataclasses.replace(self.config, search=dataclasses.replace(self.config.search,
                                                                                  pipeline=pipeline))
        self.mutator = RunMutator(self._mutator, self.config.llm, self.task, self.rd)  # config.llm is final here
        if saved is not None:
            changed = resume_changes(saved, self.config.to_dict(), allowed=self._allow_changes, run=self.rd.path)
            if changed is not None:
                self.rd.log("config_change", keys=list(changed), values=changed)
                self._say(f"resume: changed {', '.join(f'{k}={v}' for k, v in changed.items())}")
        self.demos.check()
        from limen_jax.search.prescreen import parse_prescreen

        self.prescreen = parse_prescreen(self.config.search.prescreen) if self.program_mode != "obs_only" else None
        if self.prescreen is not None:
            self.demos.check_buildable(f"--prescreen {self.config.search.prescreen}")
        cap = self.strategy.max_iterations if getattr(self.strategy, "max_iterations", None) is not None else None
        self.iterations = self.config.search.iterations if cap is None else min(cap, self.config.search.iterations)
        finished = state is not None and int(state["iteration"]) >= self.iterations
        if getattr(self.strategy, "asks_llm", True) and not finished:
            self.mutator.check(resumed=saved is not None)
        self.rd.create()
        self.rd.write_json("config.json", self.config.to_dict())
        self.pipeline = self.config.search.pipeline == "on"
        self.pending: list[Request] | None = None
        if state is None:
            self.archive = Archive(self.config.archive)
            self.rd.log("run_start", config=self.config.to_dict(), pid=os.getpid())
            return 0
        self.archive = Archive.from_dict(state["archive"])
        if state.get("pending"):
            self.pending = [request_from_dict(r) for r in state["pending"]]
        start = int(state["iteration"]) + 1
        self.rd.log("run_resume", from_iteration=start, pid=os.getpid())
        return start

    @property
    def store(self) -> Any:
        return self.archive.store

    def _ppo_config(self) -> Any:
        from limen_jax.rl import PPOConfig

        return PPOConfig.preset(self.task.name, self.config.preset).replace(**self.config.ppo)

    def _limits(self) -> Any:
        if not self.config.checker:
            return None
        from limen_jax.program import Limits

        return Limits(**self.config.checker)

    def _prefetch_check_sample(self) -> None:
        """Build the checker's sample transitions (compiled rollouts of the task: 7-9 s for
        xland_easy on a 2-core CPU with no compile cache, longer for an MJX task) on a
        thread while the first batch is asked for, instead of after its first answer.
        The checks wait for it (the sample is cached behind a lock); if building fails,
        the first check builds it again and reports the failure as the engine's."""
        from limen_jax.program import check_sample

        def build() -> None:
            self.progress.set("sample", "building the check sample (compiling the task's rollouts)")
            with contextlib.suppress(Exception):  # raised again, and classified, by the first check
                check_sample(self.task, self.limits)
            self.progress.clear("sample")

        threading.Thread(target=build, name="check-sample", daemon=True).start()

    # --- the loop ---------------------------------------------------------------------
    def run(self) -> RunResult:
        with self.interrupts.installed():
            return self._run()

    def _run(self) -> RunResult:
        start = self._setup()
        self.ppo = self._ppo_config()
        self.limits = self._limits()
        total = self.iterations + 1
        stopped, complete = "finished", True
        interrupted: int | None = None
        owns_evaluator = self._evaluator is None
        self.evaluator = self._evaluator or InProcessEvaluator()
        if start >= total:
            self.mutator.name = self.rd.read_json("state.json").get("usage", {}).get("mutator", self.mutator.name)
        try:
            it = start
            # a resumed run that its strategy (or its program budget) had already stopped stays stopped
            reason = self._done(it) if 0 < it < total else None
            if reason:
                stopped = f"finished early: {reason}"
            current = self._first(it) if it < total and not reason else None
            while current is not None:
                if current.stop is not None:
                    raise current.stop
                submitted = self._submit(current)
                self._write_plots()
                nxt = self._prepare(it + 1, None) if self.pipeline and it + 1 < total else None
                if nxt is not None and nxt.stop is None:
                    self._compile_ahead(nxt.trainable)
                batches = self._wait(submitted)
                with self.interrupts.recording():
                    self._finish(it, current, submitted, batches, nxt)
                it += 1
                if it >= total:
                    break
                reason = self._done(it)
                if reason:
                    stopped = f"finished early: {reason}"
                    break
                current = nxt if nxt is not None else self._prepare(it, None)
        except RunStop as stop:
            complete = False
            stopped = (f"stopped ({stop.kind}): {stop} (fix it if needed, then resume with python -m limen_jax.evolve "
                       f"--resume {self.rd.path})")
            self.rd.log(f"{stop.kind}_stop", message=str(stop))
            self._say(stopped)
        except Interrupted as stop:
            self.interrupts.stopping = True
            complete, interrupted = False, stop.signum
            name = signal.Signals(stop.signum).name
            how = "at once" if stop.now else "at a safe point"
            stopped = (f"interrupted by {name} ({how}; the last checkpoint holds every finished batch): resume "
                       f"with python -m limen_jax.evolve --resume {self.rd.path}")
            self.rd.log("interrupted", signal=name, at_once=stop.now)
            if owns_evaluator:  # the batch in flight is abandoned: its daemon thread is not waited for
                self.evaluator.close(wait=False)
                owns_evaluator = False
        except KeyboardInterrupt:
            if owns_evaluator:  # exit at once: a compile ahead in flight is not waited for
                self.evaluator.close(wait=False)
                owns_evaluator = False
            raise
        finally:
            self.progress.close()
            if owns_evaluator:
                self.evaluator.close()
        result = RunResult(self.rd.path, self.config, self.store, self.archive, stopped, complete,
                           signal=interrupted)
        if interrupted is None:
            self._write_outputs()
        self.rd.log("run_end", stopped=stopped, complete=complete, best=getattr(result.best, "id", None),
                    usage=self.mutator.usage())
        return result

    def _first(self, it: int) -> Prepared:
        """The first batch of this process: proposed (unless restored), then, when it asks
        for programs, the check sample and the first compile are started before it is
        asked, so that they overlap the LLM."""
        requests = self.pending if self.pending is not None else self._propose(it)
        asked = [r for r in requests if isinstance(r, ProgramRequest) and r.source == "llm"]
        mutator = self.mutator.named(any(map(_asks_llm, requests)))
        self._say(f"limen_jax: {self.task.name}, mode {self.mode}, strategy {self.strategy.name}, "
                  f"{self.iterations + 1} generations, mutator {mutator}, "
                  f"pipeline {'on' if self.pipeline else 'off'}, run dir {self.rd.path}")
        if any(isinstance(r, ProgramRequest) and r.source != "default" for r in requests):
            self._prefetch_check_sample()
        prepare = getattr(self.evaluator, "prepare", None)
        if asked and prepare is not None:
            for job in placeholder_jobs(asked, self._context(), self.task, self.program_mode):
                prepare(job)
        return self._prepare(it, requests)

    def _view(self, it: int) -> Any:
        from limen_jax.llm.prompts import budget_text
        from limen_jax.program import Limits
        from limen_jax.search import SearchView

        search = self.config.search
        n = (search.initial or search.candidates) if it == 0 else search.candidates
        limits = self._limits() or Limits()
        return SearchView(self.archive, self.task, self.program_mode, it, n, self.config.prompt,
                          budget_text(self.config.cascade.full_steps, search.seeds), limits.max_obs_dim,
                          limits.max_work_vs_step, demos=self.demos.get)  # fmt: skip

    def _done(self, it: int) -> str | None:
        """Why the run stops before batch ``it``: its program budget spent, or its strategy's own rule."""
        budget = self.config.search.programs
        if budget is not None and len(self.store) >= budget:
            return f"program budget of {budget} reached ({len(self.store)} programs)"
        return self.strategy.done(self._view(it))

    def _propose(self, it: int) -> list[Request]:
        return list(self.strategy.propose(self._view(it), np.random.default_rng([self.config.seed, it])))

    def _prepare(self, it: int, requests: list[Request] | None) -> Prepared:
        """Propose batch ``it`` (unless restored), carry out its asks and checks."""
        if requests is None:
            requests = self._propose(it)
        asks = sum(map(_asks_llm, requests))
        answered = 0

        def log(event: str, **fields: Any) -> None:
            nonlocal answered
            self.rd.log(event, **fields)
            if event == "response":
                answered += 1
                self.progress.set("ask", f"iter {it}: {answered}/{asks} answered, checking", announce=False)

        if asks:
            self.progress.set("ask", f"iter {it}: asking for {asks} answer(s)")
        try:
            prepared = ask_and_check(
                requests, mutator=self.mutator.get, task=self.task, mode=self.program_mode, store=self.store,
                concurrency=self.config.llm.concurrency, limits=self.limits, log=log,
                mutator_name=self.mutator.built_name, iteration=it, strategy=self.strategy,
            )
        finally:
            self.progress.clear("ask")
        if self.prescreen is not None and prepared.stop is None:
            from limen_jax.search.prescreen import screen

            for event in screen(self.prescreen, prepared.children, self._context()):
                self.rd.log("prescreen", iteration=it, **event)
        for child in prepared.trainable:
            self._interfaces[child.record.id] = child.interface
        return prepared

    # --- evaluation -------------------------------------------------------------------
    def _context(self) -> JobContext:
        c, search = self.config.cascade, self.config.search
        return JobContext(self.task, self.ppo, self.config.seed, search.seeds,
                          Budget(c.short_steps, c.full_steps, c.threshold), pad_to=search.candidates,
                          watchdog_s=c.watchdog_s, watchdog_factor=c.watchdog_factor,
                          return_policies=self._kept() != "none", run_path=str(Path(self.rd.path).absolute()),
                          demos=self.demos.get)

    def _submit(self, prepared: Prepared) -> list[Submitted]:
        """Write the trainable children, submit their jobs and the batch's eval requests."""
        for child in prepared.trainable:
            r = child.record
            self.rd.write_program(r.id, r.code)
            iface = child.interface
            self.rd.write_artifacts(r.id, {"obs": getattr(iface, "obs_artifact", b""),
                                           "reward": getattr(iface, "reward_artifact", b"")})
            self.rd.log("program", id=r.id, obs_dim=r.obs_dim, reward_ast_size=r.reward_ast_size)
        out = [Submitted(kind, job, self.evaluator.submit(job), children=cs)
               for kind, cs, job in jobs_for(prepared.trainable, self._context())]
        t0 = time.time()
        n, seeds, steps = len(prepared.trainable), self.config.search.seeds, self.config.cascade.full_steps
        self._training = (n, t0)  # what _wait reports as the batch's throughput
        if n:
            it = prepared.iteration
            self.progress.set("train", lambda: self.progress.training_text(it, n, seeds, steps, time.time() - t0))
        ctx = self._context()
        for request in prepared.evals:
            records = [self.store.get(i) for i in request.program_ids]
            job = evaluation_kind(request.evaluation).job(ctx, [self._interface(r) for r in records],
                                                         request.options)
            self.rd.log("evaluate", id=request.id, iteration=request.iteration, kind=request.evaluation,
                        programs=list(request.program_ids), options=request.options)
            out.append(Submitted(request.evaluation, job, self.evaluator.submit(job), request=request,
                                  records=records))
        return out

    def _interface(self, record: Any) -> Any:
        """The compiled interface of a stored program: checked in this process already, or
        checked again from its code (a resumed run), in a sandboxed worker like any answer."""
        if record.id not in self._interfaces:
            from limen_jax.program import compile_interface

            kwargs = {"limits": self.limits} if self.limits is not None else {}
            if record.metadata.get("source") == "default":
                from limen_jax.interface import default_interface

                self._interfaces[record.id] = default_interface(self.task)
            else:
                self._interfaces[record.id] = compile_interface(record.code, self.task, mode=self.program_mode,
                                                                name=record.id, **kwargs)
        return self._interfaces[record.id]

    def _compile_ahead(self, children: list[Child]) -> None:
        """Let the evaluator compile a batch of these interfaces' shapes while the loop
        asks, checks or trains something else (``prepare``, when it has one). Never
        changes a result: compiled code is the same whichever thread compiles it."""
        prepare = getattr(self.evaluator, "prepare", None)
        if prepare is not None:
            for kind, _, job in jobs_for(children, self._context()):
                if trains(kind):
                    prepare(job)

    def _wait(self, submitted: list[Submitted]) -> list[EvalBatch]:
        """Every job's results (the live status counts the seconds since they were submitted)."""
        try:
            out = wait_all(submitted)
        finally:
            self.progress.clear("train")
        n, t0 = self._training
        self.progress.trained(n, self.config.search.seeds, self.config.cascade.full_steps, time.time() - t0)
        return out

    def _finish(self, it: int, prepared: Prepared, submitted: list[Submitted], batches: list[EvalBatch],
                nxt: Prepared | None) -> None:
        """Score, stop on an engine fault, record, tell, checkpoint, report."""
        for s, batch in zip(submitted, batches):
            if batch.batch_error:
                self.rd.log("batch_error", iteration=it, kind=s.kind, message=batch.batch_error)
            fault = batch_fault(batch.results)
            if fault is not None:
                raise RunStop("engine", f"training failed in the engine: {fault}")
        results: dict[str, tuple[str, Any]] = {}
        evaluated: list[Outcome] = []
        for s, batch in zip(submitted, batches):
            kind = evaluation_kind(s.kind)
            if s.request is None:
                for child, res in zip(s.children, batch.results):
                    kind.score(child.record, res, s.job)
                    results[child.record.id] = (s.kind, res)
                    if getattr(res, "demos", None) is not None and child.record.error is None:
                        self.demos.extend(res.demos, child.record.iteration)
                self._keep_policies(s.children, batch.results)
            else:
                for record, res in zip(s.records, batch.results):
                    kind.score(record, res, s.job)
                    evaluation = record.evaluations.get(s.kind, {})
                    logged = kind.summary(evaluation) if hasattr(kind, "summary") else evaluation
                    self.rd.log("evaluation", id=s.request.id, program=record.id, kind=s.kind, **logged)
                evaluated.append(Outcome(s.request, records=tuple(s.records), evaluation=s.kind,
                                         results=tuple(batch.results)))
        train_s = sum(b.wall_s for b in batches)
        compile_s = [b.compile_s for b in batches]
        eval_s = [b.eval_s for b in batches]
        now = time.time()
        finished_at = max((b.finished_at for b in batches), default=now)
        timing = {
            "llm_s": round(prepared.llm_s, 2), "check_s": round(prepared.check_s, 2),
            "train_s": round(train_s, 2),
            "compile_s": None if not batches or None in compile_s else round(sum(compile_s), 2),  # type: ignore[arg-type]
            "eval_s": None if not batches or None in eval_s else round(sum(eval_s), 2),  # type: ignore[arg-type]
            "llm_wait_s": round(max(0.0, prepared.end - max(prepared.start, self._last_train_end)), 2),
            "wall_s": round(now - self._last_iter_end, 2),
        }
        # the LLM wait of the next batch counts from when this one stopped training
        self._last_train_end, self._last_iter_end = (finished_at if batches else now), now
        n_trained = max(1, len(prepared.trainable))
        for child in prepared.children:
            child.record.metadata["train_wall_s"] = round(train_s / n_trained, 2)
            self._record(child.record)
        outcomes = [Outcome(c.request, c.record, text=c.text, evaluation=results.get(c.record.id, (None,))[0],
                            results=results[c.record.id][1:] if c.record.id in results else ())
                    for c in prepared.children]
        outcomes += [Outcome(t.request, text=t.text, error=t.error) for t in prepared.texts]
        outcomes += evaluated
        if outcomes:
            for event in self.strategy.tell(self._view(it), outcomes):
                event = dict(event)
                self.rd.log(event.pop("event", "strategy"), iteration=it, **event)
        self.rd.log("iteration", iteration=it, **timing)
        self._checkpoint(it, nxt.requests if nxt is not None and nxt.requests else None)
        for line in report_lines(it, self.iterations, self.store, self.mutator.spend, timing, time.time() - self.t0):
            self._say(line)

    def _kept(self) -> str:
        """Which policies to keep: the config's ``keep_policies``, or more when the strategy
        reads them (its ``keep_policies``, e.g. "all" for a critic that rolls out every
        candidate)."""
        order = ("none", "best", "all")
        wanted = getattr(self.strategy, "keep_policies", None) or "none"
        return max(self.config.keep_policies, wanted, key=order.index)

    def _keep_policies(self, children: list[Child], results: list[Any]) -> None:
        """Save the trained policies :meth:`_kept` names into the run dir."""
        kept = [(c.record.id, r) for c, r in zip(children, results)
                if c.record.error is None and getattr(r, "policies", None)]
        which = self._kept()
        if which == "none" or not kept:
            return
        from limen_jax.policies import keep_policies, saved_seeds

        written = keep_policies(self.rd.path, kept, which)  # <run>/policies/<id>/seed<k>, by program
        for pid in dict.fromkeys(path.parent.name for path in written):
            self.rd.log("policy", id=pid, seeds=saved_seeds(self.rd.path, pid), path=str(Path("policies") / pid))

    # --- bookkeeping ------------------------------------------------------------------
    def _record(self, record: Any) -> None:
        """Store the record (and offer it to the grid when evaluated), then log it."""
        elite = self.archive.add(record)
        if record.code:
            self.rd.write_program(record.id, record.code)
        self.rd.log("score" if record.error is None else "reject", elite=elite, **_brief(record))

    def _checkpoint(self, it: int, pending: list[Request] | None) -> None:
        usage = self.mutator.usage()
        self.rd.write_json("state.json", {
            "iteration": it, "archive": self.archive.to_dict(), "strategy": self.strategy.to_dict(),
            "pending": [request_to_dict(r) for r in pending] if pending else None,
            "spend_usd": self.mutator.spend, "usage": usage,
        })
        self.rd.write_json("usage.json", usage)
        write_best(self.rd.path, self.store, self.config, self.task.name)
        self._plots_due = True

    def _write_outputs(self) -> None:
        write_best(self.rd.path, self.store, self.config, self.task.name)
        self._write_plots()

    def _write_plots(self) -> None:
        """The plots (:func:`~limen_jax.search.outputs.write_plots`), when a checkpoint came
        since they were drawn (and once per process). Drawn after the next batch is
        submitted, not before: matplotlib (~1 s to import, ~0.5 s a redraw) must not hold
        the next batch back."""
        if self._plots_due:
            self._plots_due = False
            write_plots(self.rd.path, self.archive, self.task.name, self.mode)

    def _say(self, text: str) -> None:
        if self.verbose:
            print(text, flush=True)


def _brief(record: Any) -> dict[str, Any]:
    d = record.to_dict()
    d.pop("code", None)
    return d
