"""One search run, batch by batch, durable, resumable and pipelined (see evolve.py).

The loop does only I/O: it asks the strategy for a batch of requests
(:mod:`limen_jax.search.requests`), carries out their asks (the mutator, the checker:
:mod:`limen_jax.ask`), submits each evaluation to the Evaluator as a job of its kind
(:mod:`limen_jax.search.evaluations`, which also score the results), records the
outcomes in the archive and the run directory, tells the strategy, checkpoints. With the
pipeline on (:mod:`limen_jax.search.pipeline`), batch i+1 is proposed, asked and checked
while batch i trains; its prompts see the archive as of batch i-1, a fixed depth, so a
resumed or replayed run makes exactly the same choices.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from limen_jax.ask import Child, Prepared, ask_and_check
from limen_jax.config import EvolveConfig
from limen_jax.modes import program_mode, strategy_for
from limen_jax.progress import Progress
from limen_jax.run_result import RunResult
from limen_jax.rundir import RunDir, write_text_atomic
from limen_jax.search.evaluations import JobContext, evaluation_kind
from limen_jax.search.evaluator import InProcessEvaluator
from limen_jax.search.faults import Interrupted, RunStop, describe, is_engine_error, systematic
from limen_jax.search.jobs import Budget, EvalBatch, EvalJob
from limen_jax.search.pipeline import resolve_pipeline
from limen_jax.search.registry import make_strategy, register_strategy
from limen_jax.search.requests import (
    EvalRequest,
    Outcome,
    ProgramRequest,
    Request,
    TextRequest,
    request_from_dict,
    request_to_dict,
)

# Config keys a resumed run may change (the rest define the run and are refused).
RESUMABLE = frozenset({
    "search.iterations", "search.programs", "llm.max_cost_usd", "llm.model", "llm.temperature", "llm.timeout_s",
    "llm.max_tokens", "llm.max_retries", "llm.concurrency",
})  # fmt: skip
_WAIT_SLICE_S = 1.0


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("ppo", "checker", "options"):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_changes(saved: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(accepted, refused) dotted keys whose values differ between two config dicts."""
    a, b = _flat(saved), _flat(new)
    changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return [k for k in changed if k in RESUMABLE], [k for k in changed if k not in RESUMABLE]


@dataclasses.dataclass
class _Submitted:
    """One evaluation job in flight: its kind, what it scores (children of this batch or
    stored records of an eval request), the job and its future."""

    kind: str
    job: EvalJob
    future: cf.Future[EvalBatch]
    children: list[Child] = dataclasses.field(default_factory=list)
    request: EvalRequest | None = None
    records: list[Any] = dataclasses.field(default_factory=list)


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
        self.mutator: Any = None
        self.mutator_name = "none"
        self._mutator_lock = threading.Lock()
        self._interfaces: dict[str, Any] = {}  # checked interfaces by program id (this process)
        self._demos: Any = None  # the demonstrations, loaded when first needed
        self._given_demos: Any = None  # search.demos, read (and so checked) by _setup
        self.t0 = time.time()
        self._last_train_end = 0.0
        self._last_iter_end = self.t0
        self._plots_due = True
        # SIGINT / SIGTERM (the CLI's): the first stops at the next safe point, a second at once
        self._handle_signals = handle_signals
        self._signal: int | None = None
        self._critical = 0  # > 0 while a batch is being recorded and checkpointed
        self._stopping = False  # an interrupt has been caught and is being recorded

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
        if self._mutator is None and self.config.llm.mutator == "auto":
            # what "auto" stood for when the run began is the run's mutator from then on
            # (config.json says what ran; a resume with a key set does not switch to Claude)
            from limen_jax.llm.factory import resolve_mutator

            llm = self.config.llm
            if saved is not None and (saved.get("llm") or {}).get("mutator") not in (None, "auto"):
                llm = dataclasses.replace(llm, mutator=saved["llm"]["mutator"])
            else:
                llm = dataclasses.replace(llm, mutator=resolve_mutator("auto"))
            self.config = dataclasses.replace(self.config, llm=llm)
        name = strategy_for(self.mode, self.config.search.strategy)
        self.strategy = make_strategy(name, self.config.search.options, (state or {}).get("strategy"))
        pipeline = resolve_pipeline(self.config.search, self.config.llm, lookahead=self.strategy.lookahead,
                                    custom_mutator=self._mutator is not None, saved=saved)
        self.config = dataclasses.replace(self.config, search=dataclasses.replace(self.config.search,
                                                                                  pipeline=pipeline))
        if saved is not None and saved != self.config.to_dict():
            accepted, refused = config_changes(saved, self.config.to_dict())
            if refused or not self._allow_changes:
                raise ValueError(
                    f"{self.rd.path} holds a run with another config (differs in {', '.join(refused or accepted)}); "
                    f"a resume may change only {', '.join(sorted(RESUMABLE))}; or choose a new --run-dir"
                )
            self.rd.log("config_change", keys=accepted,
                        values={k: _flat(self.config.to_dict())[k] for k in accepted})
            self._say(f"resume: changed {', '.join(f'{k}={_flat(self.config.to_dict())[k]}' for k in accepted)}")
        self._check_demos()
        from limen_jax.search.prescreen import parse_prescreen

        self.prescreen = parse_prescreen(self.config.search.prescreen) if self.program_mode != "obs_only" else None
        if self.prescreen is not None and not self.config.search.demos and not (self.rd.path / "demos.npz").exists():
            from limen_jax.demos import has_expert

            if not has_expert(self.task):  # said before any LLM call, not after the first batch's
                raise ValueError(f"--prescreen {self.config.search.prescreen}: task {self.task.name!r} has no "
                                 "scripted expert to build demonstrations from; supply them with --demos PATH "
                                 "(python -m limen_jax.demos --from-policy writes them from a trained policy)")
        cap = self.strategy.max_iterations if getattr(self.strategy, "max_iterations", None) is not None else None
        self.iterations = self.config.search.iterations if cap is None else min(cap, self.config.search.iterations)
        finished = state is not None and int(state["iteration"]) >= self.iterations
        if getattr(self.strategy, "asks_llm", True) and not finished:
            self._check_mutator(resumed=saved is not None)
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

    def _get_mutator(self) -> Any:
        """The run's mutator, built by :meth:`_setup` (which thereby checks it can be) unless
        the strategy never asks the LLM (``asks_llm`` False: the sparse baseline)."""
        with self._mutator_lock:
            if self.mutator is None:
                self.mutator = self._build_mutator()
            return self.mutator

    def _check_mutator(self, resumed: bool) -> None:
        """Build the mutator now, so that a missing API key, catalog or replay cache is
        refused (ValueError) before anything is written. A resumed run keeps its mutator,
        so a missing key is said without the other mutators, which it cannot switch to."""
        from limen_jax.llm.anthropic_client import MissingAPIKey

        try:
            self._get_mutator()
        except MissingAPIKey:
            if not resumed:
                raise
            raise ValueError(f"{self.rd.path} is a run of Claude (llm.mutator anthropic) and ANTHROPIC_API_KEY is "
                             "not set: export it, then resume again") from None

    def _mutator_name(self) -> str:
        self._get_mutator()
        return self.mutator_name

    def _build_mutator(self) -> Any:
        from limen_jax.llm import CachingMutator
        from limen_jax.llm.factory import make_mutator, resolve_mutator

        if self._mutator is not None:
            self.mutator_name = getattr(self._mutator, "name", "custom")
            # every answer of every mutator is recorded: replay and the spend ledger need it
            if isinstance(self._mutator, CachingMutator):
                return self._mutator
            return CachingMutator(self._mutator, self.rd.cache_path)
        self.mutator_name = resolve_mutator(self.config.llm.mutator)
        return make_mutator(self.config.llm, self.task, cache_path=self.rd.cache_path)

    def _ppo_config(self) -> Any:
        from limen_jax.rl import PPOConfig

        return PPOConfig.preset(self.task.name, self.config.preset).replace(**self.config.ppo)

    def _limits(self) -> Any:
        if not self.config.checker:
            return None
        from limen_jax.program import Limits

        return Limits(**self.config.checker)

    @property
    def spend(self) -> float:
        """Dollars paid for LLM calls over the whole run (the cache's ledger)."""
        cache = getattr(self.mutator, "cache", None)
        return float(cache.ledger.cost_usd) if cache is not None else 0.0

    def usage(self) -> dict[str, Any]:
        cache = getattr(self.mutator, "cache", None)
        if cache is None:
            from limen_jax.llm.replay import CACHE_FILENAME, ResponseCache

            path = self.rd.path / CACHE_FILENAME
            cache = ResponseCache(path) if path.exists() else None
        out = cache.ledger.to_dict() if cache is not None else {}
        hits = getattr(self.mutator, "hits", 0)
        return {**out, "cache_hits": hits, "mutator": self.mutator_name}

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

    # --- interrupts -------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._stopping:  # the stop is being recorded: it ends the run in a moment anyway
            return
        if self._signal is not None:
            raise Interrupted(signum, now=True)
        self._signal = signum
        print(f"\n{signal.Signals(signum).name}: stopping at the next safe point (again to stop at once)",
              file=sys.stderr, flush=True)
        if self._critical == 0:  # asking, checking, compiling, training: the batch in flight is abandoned
            raise Interrupted(signum)

    @contextlib.contextmanager
    def _recording(self) -> Any:
        """Recording and checkpointing a batch finishes before a first signal takes effect."""
        self._critical += 1
        try:
            yield
        finally:
            self._critical -= 1
        if self._signal is not None and self._critical == 0:
            raise Interrupted(self._signal)

    def _install_signals(self) -> dict[int, Any]:
        if not self._handle_signals or threading.current_thread() is not threading.main_thread():
            return {}
        return {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

    # --- the loop ---------------------------------------------------------------------
    def run(self) -> RunResult:
        previous = self._install_signals()
        try:
            return self._run()
        finally:
            for s, handler in previous.items():  # after an interrupt the process is on its way out
                signal.signal(s, handler if self._signal is None else signal.SIG_IGN)

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
            self.mutator_name = self.rd.read_json("state.json").get("usage", {}).get("mutator", self.mutator_name)
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
                with self._recording():
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
            self._stopping = True
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
                    usage=self.usage())
        return result

    def _first(self, it: int) -> Prepared:
        """The first batch of this process: proposed (unless restored), then, when it asks
        for programs, the check sample and the first compile are started before it is
        asked, so that they overlap the LLM."""
        requests = self.pending if self.pending is not None else self._propose(it)
        asked = [r for r in requests if isinstance(r, ProgramRequest) and r.source == "llm"]
        self._say(f"limen_jax: {self.task.name}, mode {self.mode}, strategy {self.strategy.name}, "
                  f"{self.iterations + 1} generations, mutator {self._named_mutator(requests)}, "
                  f"pipeline {'on' if self.pipeline else 'off'}, run dir {self.rd.path}")
        if any(isinstance(r, ProgramRequest) and r.source != "default" for r in requests):
            self._prefetch_check_sample()
        if asked:
            self._compile_ahead_placeholders(asked)
        return self._prepare(it, requests)

    def _named_mutator(self, requests: list[Request]) -> str:
        """The mutator's name for the start line, without building one for a batch that
        asks the LLM nothing."""
        if not any(isinstance(r, TextRequest) or (isinstance(r, ProgramRequest) and r.source == "llm")
                   for r in requests):
            return "none"
        if self._mutator is not None:
            return getattr(self._mutator, "name", "custom")
        from limen_jax.llm.factory import resolve_mutator

        return resolve_mutator(self.config.llm.mutator)

    def _view(self, it: int) -> Any:
        from limen_jax.llm.prompts import budget_text
        from limen_jax.program import Limits
        from limen_jax.search import SearchView

        search = self.config.search
        n = (search.initial or search.candidates) if it == 0 else search.candidates
        limits = self._limits() or Limits()
        return SearchView(self.archive, self.task, self.program_mode, it, n, self.config.prompt,
                          budget_text(self.config.cascade.full_steps, search.seeds), limits.max_obs_dim,
                          limits.max_work_vs_step, demos=self._demo_set)  # fmt: skip

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
        asks = sum(isinstance(r, TextRequest) or (isinstance(r, ProgramRequest) and r.source == "llm")
                   for r in requests)
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
                requests, mutator=self._get_mutator, task=self.task, mode=self.program_mode, store=self.store,
                concurrency=self.config.llm.concurrency, limits=self.limits, log=log,
                mutator_name=self._mutator_name, iteration=it,
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
                          demos=self._demo_set)

    def _demo_set(self) -> Any:
        """The run's demonstrations (:mod:`limen_jax.demos`), built or read when first
        needed: the run dir's ``demos.npz``; else ``search.demos`` (copied in); else the
        task's scripted expert and random play, seeded by the run's seed."""
        if self._demos is None:
            from limen_jax import demos

            path = self.rd.path / demos.FILENAME
            if path.exists():
                self._demos = demos.load_demos(path, self.task)
            else:
                given = self.config.search.demos
                self._demos = self._given_demos if given else demos.build_demos(self.task, self.config.seed)
                self._demos.save(path)
                self.rd.log("demos", path=demos.FILENAME, source=given or "expert+random", **self._demos.counts())
        return self._demos

    def _check_demos(self) -> None:
        """Read ``search.demos`` now, when the run will copy it in, so that a bad file is
        refused (ValueError, one line naming it) before any batch rather than at the
        first one that ranks programs."""
        from limen_jax import demos

        given = self.config.search.demos
        if given and not (self.rd.path / demos.FILENAME).exists():
            self._given_demos = demos.load_demos(given, self.task)

    def _extend_demos(self, more: Any, round: int) -> None:
        """Add transitions an evaluation brought back (a result's ``demos``: a learner's
        rollouts) to the run's set, tagged with ``round``; what an earlier attempt of the
        same round added (a resumed batch) is replaced, not doubled."""
        from limen_jax import demos

        current = self._demo_set()
        tagged = dataclasses.replace(more, round=np.full(len(more), round, np.int32))
        self._demos = demos.without(current, more.source[0], round).extend(tagged)
        self._demos.save(self.rd.path / demos.FILENAME)
        self.rd.log("demos", path=demos.FILENAME, source=str(more.source[0]), round=round, added=len(more),
                    **self._demos.counts())

    def _jobs(self, children: list[Child]) -> list[tuple[str, list[Child], EvalJob]]:
        """The children's evaluation jobs, one per kind, in first-asked order."""
        kinds: dict[str, list[Child]] = {}
        for child in children:
            kinds.setdefault(child.request.evaluation, []).append(child)
        ctx = self._context()
        return [(k, cs, evaluation_kind(k).job(ctx, [c.interface for c in cs], {})) for k, cs in kinds.items()]

    def _submit(self, prepared: Prepared) -> list[_Submitted]:
        """Write the trainable children, submit their jobs and the batch's eval requests."""
        for child in prepared.trainable:
            r = child.record
            self.rd.write_program(r.id, r.code)
            iface = child.interface
            self.rd.write_artifacts(r.id, {"obs": getattr(iface, "obs_artifact", b""),
                                           "reward": getattr(iface, "reward_artifact", b"")})
            self.rd.log("program", id=r.id, obs_dim=r.obs_dim, reward_ast_size=r.reward_ast_size)
        out = [_Submitted(kind, job, self.evaluator.submit(job), children=cs)
               for kind, cs, job in self._jobs(prepared.trainable)]
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
            out.append(_Submitted(request.evaluation, job, self.evaluator.submit(job), request=request,
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

    def _placeholders(self, n: int) -> list[Any]:
        """Stand-ins for the first batch: the smallest width bucket, or in reward_only mode
        the task default's width (its observation is the default one)."""
        from limen_jax.interface import default_interface, placeholder_interface

        dim = default_interface(self.task).obs_dim if self.program_mode == "reward_only" else 1
        return [placeholder_interface(dim)] * n

    def _compile_ahead_placeholders(self, asked: list[ProgramRequest]) -> None:
        prepare = getattr(self.evaluator, "prepare", None)
        if prepare is None:
            return
        ctx = self._context()
        for kind in dict.fromkeys(r.evaluation for r in asked):
            if not _trains(kind):
                continue
            n = sum(r.evaluation == kind for r in asked)
            prepare(evaluation_kind(kind).job(ctx, self._placeholders(n), {}))

    def _compile_ahead(self, children: list[Child]) -> None:
        """Let the evaluator compile a batch of these interfaces' shapes while the loop
        asks, checks or trains something else (``prepare``, when it has one). Never
        changes a result: compiled code is the same whichever thread compiles it."""
        prepare = getattr(self.evaluator, "prepare", None)
        if prepare is not None:
            for kind, _, job in self._jobs(children):
                if _trains(kind):
                    prepare(job)

    def _wait(self, submitted: list[_Submitted]) -> list[EvalBatch]:
        """Every job's results (the live status counts the seconds since they were submitted)."""
        out = []
        try:
            for s in submitted:
                while True:
                    try:  # waits in short slices, so that a signal's handler runs promptly
                        out.append(s.future.result(timeout=_WAIT_SLICE_S))
                        break
                    except cf.TimeoutError:
                        continue
                    except Exception as exc:  # the evaluator itself broke: not any candidate's fault
                        raise RunStop("engine", f"the evaluator failed: {describe(exc)}") from exc
        finally:
            self.progress.clear("train")
        n, t0 = self._training
        self.progress.trained(n, self.config.search.seeds, self.config.cascade.full_steps, time.time() - t0)
        return out

    def _finish(self, it: int, prepared: Prepared, submitted: list[_Submitted], batches: list[EvalBatch],
                nxt: Prepared | None) -> None:
        """Score, stop on an engine fault, record, tell, checkpoint, report."""
        for s, batch in zip(submitted, batches):
            if batch.batch_error:
                self.rd.log("batch_error", iteration=it, kind=s.kind, message=batch.batch_error)
            errors = [r if isinstance(r, BaseException) else None for r in batch.results]
            engine = next((e for e in errors if e is not None and is_engine_error(e)), None)
            same = systematic(errors)
            if engine is not None or same is not None:
                raise RunStop("engine", f"training failed in the engine: {describe(engine) if engine else same}")
        results: dict[str, tuple[str, Any]] = {}
        evaluated: list[Outcome] = []
        for s, batch in zip(submitted, batches):
            kind = evaluation_kind(s.kind)
            if s.request is None:
                for child, res in zip(s.children, batch.results):
                    kind.score(child.record, res, s.job)
                    results[child.record.id] = (s.kind, res)
                    if getattr(res, "demos", None) is not None and child.record.error is None:
                        self._extend_demos(res.demos, child.record.iteration)
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
        self._report(it, timing)

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
        usage = self.usage()
        self.rd.write_json("state.json", {
            "iteration": it, "archive": self.archive.to_dict(), "strategy": self.strategy.to_dict(),
            "pending": [request_to_dict(r) for r in pending] if pending else None,
            "spend_usd": self.spend, "usage": usage,
        })
        self.rd.write_json("usage.json", usage)
        self._write_best()
        self._plots_due = True

    def _write_outputs(self) -> None:
        self._write_best()
        self._write_plots()

    def _write_best(self) -> None:
        best = self.store.best()
        if best is not None:
            header = (
                f'"""Best interface of {self.rd.path.name}: task {self.task.name}, mode {self.mode}.\n\n'
                f"program {best.id} (iteration {best.iteration}), success {best.success:.3f} "
                f"(per seed: {', '.join(f'{s:.3f}' for s in best.success_per_seed)}), "
                f"obs_dim {best.obs_dim}, reward AST {best.reward_ast_size}.\n"
                f"Train it: python -m limen_jax.train --task {self.config.task} {self._train_flags()} "
                f'--seeds 10\n"""\n'
            )
            write_text_atomic(self.rd.path / "best_interface.py", header + best.code)

    def _train_flags(self) -> str:
        """How ``limen_jax.train`` trains what this run's best is: the sparse baseline is the
        task's default; an ablation keeps the other half from the default too."""
        if self.mode == "sparse":
            return "--default"
        mode = f" --mode {self.program_mode}" if self.program_mode != "full" else ""
        return f"--interface best_interface.py{mode}"

    def _write_plots(self) -> None:
        """progress.png and archive.png (and depth.png when records carry a lineage depth,
        ``metadata["depth"]``), when a checkpoint came since they were drawn (and once per
        process). Drawn after the next batch is submitted, not before: matplotlib
        (~1 s to import, ~0.5 s a redraw) must not hold the next batch back."""
        if not self._plots_due:
            return
        self._plots_due = False
        from limen_jax.plots import plot_archive, plot_depth, plot_progress

        records = [r.to_dict() for r in self.store]
        if records:
            plot_progress(records, self.rd.path / "progress.png", title=f"{self.task.name} ({self.mode})")
            spec = self.archive.config.grid
            plot_archive(self.archive.heatmap(), spec.obs_labels(), spec.ast_labels(), self.rd.path / "archive.png")
            if any("depth" in r["metadata"] for r in records):
                plot_depth(records, self.rd.path / "depth.png", title=f"{self.task.name}: success by lineage depth")

    def _report(self, it: int, timing: dict[str, Any]) -> None:
        recs = [r for r in self.store if r.iteration == it]
        scored = [r for r in recs if r.success is not None]
        best = self.store.best()
        parts = [f"[iter {it}/{self.iterations}]", f"{len(recs)} candidates"]
        rejected = sum(r.error is not None for r in recs)  # others may be scored by a kind that trains nothing
        if rejected:
            parts.append(f"{rejected} rejected")
        if scored:
            parts.append("success " + " ".join(f"{r.success:.2f}" for r in scored))
        parts.append(f"best {best.success:.2f} ({best.id})" if best else "best -")
        parts.append(f"spend ${self.spend:.2f}")
        phases = (f"llm {timing['llm_s']:.1f}s (waited {timing['llm_wait_s']:.1f}s), "
                  f"check {timing['check_s']:.1f}s, train {timing['train_s']:.1f}s")
        if timing["compile_s"] is not None:
            phases += f" (compile {timing['compile_s']:.1f}s, evaluate {timing['eval_s'] or 0.0:.1f}s)"
        parts.append(phases)
        parts.append(f"{time.time() - self.t0:.0f}s")
        self._say(" | ".join(parts))
        for r in recs:
            if r.error:
                self._say(f"    {r.id} rejected at {r.error.get('stage')}: {str(r.error.get('message'))[:100]}")

    def _say(self, text: str) -> None:
        if self.verbose:
            print(text, flush=True)


def _trains(kind: str) -> bool:
    """Whether evaluation ``kind`` compiles a trainer (``trains``, default True): the ones
    that do not (``demos``) have nothing to compile ahead."""
    return bool(getattr(evaluation_kind(kind), "trains", True))


def _brief(record: Any) -> dict[str, Any]:
    d = record.to_dict()
    d.pop("code", None)
    return d
