"""One evolution run, batch by batch, durable, resumable and pipelined (see evolve.py).

The loop does only I/O: it asks the strategy for a batch of proposals, asks the mutator
for them (all at once) and checks the answers (limen_jax.candidates), submits the
trainable children to the Evaluator, records the outcomes in the archive and the run
directory, tells the strategy, checkpoints. With the pipeline on, batch i+1 is proposed,
asked and checked while batch i trains; its prompts see the archive as of batch i-1, a
fixed depth, so a resumed or replayed run makes exactly the same choices.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from limen_jax.candidates import Child, Prepared, ask_and_check
from limen_jax.config import EvolveConfig
from limen_jax.modes import program_mode
from limen_jax.rundir import RunDir, write_text_atomic
from limen_jax.search import Outcome, Proposal, SearchView, make_strategy
from limen_jax.search.evaluator import Budget, EvalBatch, EvalJob, InProcessEvaluator
from limen_jax.search.faults import RunStop, describe, diverged, is_engine_error, systematic

# Config keys a resumed run may change (the rest define the run and are refused).
RESUMABLE = frozenset({
    "search.iterations", "llm.max_cost_usd", "llm.model", "llm.temperature", "llm.timeout_s",
    "llm.max_tokens", "llm.max_retries", "llm.concurrency",
})  # fmt: skip
_BAR_EVERY_S = 1.0


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("ppo", "checker"):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_changes(saved: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(accepted, refused) dotted keys whose values differ between two config dicts."""
    a, b = _flat(saved), _flat(new)
    changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return [k for k in changed if k in RESUMABLE], [k for k in changed if k not in RESUMABLE]


class Loop:
    def __init__(self, config: EvolveConfig, run_dir: RunDir, *, mutator: Any = None, verbose: bool = True,
                 evaluator: Any = None, allow_changes: bool = False) -> None:
        from limen_jax.task import make

        self.config = config
        self.rd = run_dir
        self.verbose = verbose
        self.task = make(config.task)
        self.mode = config.search.mode
        self.program_mode = program_mode(self.mode)
        self._mutator = mutator
        self._evaluator = evaluator
        self._allow_changes = allow_changes
        self.mutator: Any = None
        self.mutator_name = "none (sparse baseline)" if self.mode == "sparse" else "custom"
        self.t0 = time.time()
        self._last_train_end = 0.0
        self._last_iter_end = self.t0
        self._plots_due = True

    # --- setup ------------------------------------------------------------------------
    def _resolve_pipeline(self, saved: dict[str, Any] | None) -> str:
        """"auto" -> "on" for a live LLM (its answers overlap training) and for the offline
        mutator in runs of three or more generations (its checks, ~8 s a batch on a 2-core
        CPU, overlap training; with fewer, no batch would mutate a parent, since the first
        two are written from scratch); "off" otherwise. A replay follows the recorded run."""
        pipeline = self.config.search.pipeline
        if pipeline != "auto":
            return pipeline
        if saved is not None:
            return str(saved["search"].get("pipeline", "off"))
        from limen_jax.llm.factory import resolve_mutator

        kind = resolve_mutator(self.config.llm.mutator)
        if self._mutator is not None or self.mode == "sparse":
            return "off"
        if kind == "replay" and self.config.llm.replay_from:
            src = Path(self.config.llm.replay_from)
            recorded = (src if src.is_dir() else src.parent) / "config.json"
            return str(json.loads(recorded.read_text())["search"]["pipeline"]) if recorded.exists() else "off"
        if kind == "offline":
            return "on" if self.config.search.iterations >= 2 else "off"
        return "on" if kind == "anthropic" else "off"

    def _setup(self) -> int:
        """Restore the checkpoint if there is one; returns the first iteration to run."""
        from limen_jax.archive import Archive

        saved = self.rd.read_json("config.json")
        search = dataclasses.replace(self.config.search, pipeline=self._resolve_pipeline(saved))
        self.config = dataclasses.replace(self.config, search=search)
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
        self.rd.write_json("config.json", self.config.to_dict())
        self.pipeline = self.config.search.pipeline == "on"
        state = self.rd.read_json("state.json")
        self.pending: list[Proposal] | None = None
        if state is None:
            self.archive = Archive(self.config.archive)
            self.strategy = make_strategy(self._strategy_name())
            self.rd.log("run_start", config=self.config.to_dict(), pid=_pid())
            return 0
        self.archive = Archive.from_dict(state["archive"])
        self.strategy = make_strategy(self._strategy_name(), state.get("strategy"))
        if state.get("pending"):
            self.pending = [Proposal.from_dict(p) for p in state["pending"]]
        start = int(state["iteration"]) + 1
        self.rd.log("run_resume", from_iteration=start, pid=_pid())
        return start

    def _strategy_name(self) -> str:
        return "independent" if self.mode == "independent" else self.config.search.strategy

    @property
    def store(self) -> Any:
        return self.archive.store

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
        if self.mode == "sparse":
            return
        from limen_jax.program import check_sample

        def build() -> None:
            with contextlib.suppress(Exception):  # raised again, and classified, by the first check
                check_sample(self.task, self.limits)

        threading.Thread(target=build, name="check-sample", daemon=True).start()

    # --- the loop ---------------------------------------------------------------------
    def run(self) -> Any:
        from limen_jax.evolve import RunResult

        start = self._setup()
        self.ppo = self._ppo_config()
        self.limits = self._limits()
        total = 1 if self.mode == "sparse" else self.config.search.iterations + 1
        stopped, complete = "finished", True
        owns_evaluator = self._evaluator is None
        self.evaluator = self._evaluator or InProcessEvaluator()
        if start < total:
            self.mutator = None if self.mode == "sparse" else self._build_mutator()
            self._prefetch_check_sample()
            if self.mode != "sparse":
                self._compile_ahead(self._placeholders())
            self._say(f"limen_jax: {self.task.name}, mode {self.mode}, {total} generations, mutator "
                      f"{self.mutator_name}, pipeline {'on' if self.pipeline else 'off'}, run dir {self.rd.path}")
        else:
            self.mutator_name = self.rd.read_json("state.json").get("usage", {}).get("mutator", self.mutator_name)
        try:
            it = start
            current = self._prepare(it, self.pending) if it < total else None
            while current is not None:
                if current.stop is not None:
                    raise current.stop
                future = self._submit(current)
                self._write_plots()
                nxt = self._prepare(it + 1, None) if self.pipeline and it + 1 < total else None
                if nxt is not None and nxt.stop is None:
                    self._compile_ahead([ch.interface for ch in nxt.trainable])
                batch = self._wait(future, it, len(current.trainable))
                self._finish(it, current, batch, nxt)
                it += 1
                if it >= total:
                    break
                reason = self.strategy.done(self._view(it))
                if reason:
                    stopped = f"finished early: {reason}"
                    break
                current = nxt if nxt is not None else self._prepare(it, None)
        except RunStop as stop:
            complete = False
            stopped = f"stopped ({stop.kind}): {stop} (fix it if needed, then --resume {self.rd.path})"
            self.rd.log(f"{stop.kind}_stop", message=str(stop))
            self._say(stopped)
        except KeyboardInterrupt:
            if owns_evaluator:  # exit at once: a compile ahead in flight is not waited for
                self.evaluator.close(wait=False)
                owns_evaluator = False
            raise
        finally:
            if owns_evaluator:
                self.evaluator.close()
        result = RunResult(self.rd.path, self.config, self.store, self.archive, stopped, complete)
        self._write_outputs()
        self.rd.log("run_end", stopped=stopped, complete=complete, best=getattr(result.best, "id", None),
                    usage=self.usage())
        return result

    def _view(self, it: int) -> SearchView:
        from limen_jax.llm.prompts import budget_text

        search = self.config.search
        n = (search.initial or search.candidates) if it == 0 else search.candidates
        from limen_jax.program import Limits

        limits = self._limits() or Limits()
        return SearchView(self.archive, self.task, self.program_mode, it, n, self.config.prompt,
                          budget_text(self.config.cascade.full_steps, search.seeds), limits.max_obs_dim,
                          limits.max_work_vs_step)  # fmt: skip

    def _prepare(self, it: int, proposals: list[Proposal] | None) -> Prepared:
        """Propose batch ``it`` (unless restored), ask for it and check the answers."""
        if self.mode == "sparse":
            return Prepared(it, [], [self._default_child(it)], start=time.time(), end=time.time())
        if proposals is None:
            proposals = self.strategy.propose(self._view(it), np.random.default_rng([self.config.seed, it]))
        return ask_and_check(
            proposals, mutator=self.mutator, task=self.task, mode=self.program_mode, store=self.store,
            concurrency=self.config.llm.concurrency, limits=self.limits, log=self.rd.log,
            mutator_name=self.mutator_name,
        )

    def _default_child(self, it: int) -> Child:
        from limen_jax.archive import ProgramRecord, program_id
        from limen_jax.interface import default_interface

        iface = default_interface(self.task)
        record = ProgramRecord(id=program_id(it, 0), code="# the task's default observation and sparse reward\n",
                               iteration=it, obs_dim=iface.obs_dim, reward_ast_size=0,
                               metadata={"mutator": "none (sparse baseline)"})
        return Child(None, record, iface)

    def _submit(self, prepared: Prepared) -> cf.Future[EvalBatch] | None:
        children = prepared.trainable
        for child in children:
            r = child.record
            self.rd.write_program(r.id, r.code)
            iface = child.interface
            self.rd.write_artifacts(r.id, {"obs": getattr(iface, "obs_artifact", b""),
                                           "reward": getattr(iface, "reward_artifact", b"")})
            self.rd.log("program", id=r.id, obs_dim=r.obs_dim, reward_ast_size=r.reward_ast_size)
        if not children:
            return None
        return self.evaluator.submit(self._job([ch.interface for ch in children]))

    def _job(self, interfaces: list[Any]) -> EvalJob:
        c = self.config.cascade
        seeds = [self.config.seed * 1000 + s for s in range(self.config.search.seeds)]
        short = c.short_steps if c.short_steps > 0 else c.full_steps  # 0: no cascade, one stage
        return EvalJob(self.task, interfaces, seeds, Budget(short, c.full_steps, c.threshold), self.ppo,
                       pad_to=self.config.search.candidates, watchdog_s=c.watchdog_s,
                       watchdog_factor=c.watchdog_factor)  # fmt: skip

    def _placeholders(self) -> list[Any]:
        """Stand-ins for the first batch: the smallest width bucket, or in reward_only mode
        the task default's width (its observation is the default one)."""
        from limen_jax.interface import default_interface, placeholder_interface

        dim = default_interface(self.task).obs_dim if self.program_mode == "reward_only" else 1
        search = self.config.search
        return [placeholder_interface(dim)] * (search.initial or search.candidates)

    def _compile_ahead(self, interfaces: list[Any]) -> None:
        """Let the evaluator compile a batch of these interfaces' shapes while the loop
        asks, checks or trains something else (``prepare``, when it has one). Never
        changes a result: compiled code is the same whichever thread compiles it."""
        prepare = getattr(self.evaluator, "prepare", None)
        if prepare is not None and interfaces:
            prepare(self._job(interfaces))

    def _wait(self, future: cf.Future[EvalBatch] | None, it: int, n: int) -> EvalBatch:
        """The batch's results; a live line of elapsed time while it trains."""
        if future is None:
            return EvalBatch([], None, 0.0)
        t, live = time.time(), self.verbose and sys.stdout.isatty()
        while True:
            try:
                batch = future.result(timeout=_BAR_EVERY_S)
                break
            except cf.TimeoutError:
                if live:
                    print(f"\r  [iter {it}] training {n} candidate(s) ... {time.time() - t:.0f}s", end="", flush=True)
            except Exception as exc:  # the evaluator itself broke: not any candidate's fault
                raise RunStop("engine", f"the evaluator failed: {describe(exc)}") from exc
        if live:
            print("\r" + " " * 60 + "\r", end="", flush=True)
        return batch

    def _finish(self, it: int, prepared: Prepared, batch: EvalBatch, nxt: Prepared | None) -> None:
        """Score the children, stop on an engine fault, record, tell, checkpoint, report."""
        trainable = prepared.trainable
        if batch.batch_error:
            self.rd.log("batch_error", iteration=it, message=batch.batch_error)
        errors = [r if isinstance(r, BaseException) else None for r in batch.results]
        engine = next((e for e in errors if e is not None and is_engine_error(e)), None)
        same = systematic(errors)
        if engine is not None or same is not None:
            raise RunStop("engine", f"training failed in the engine: {describe(engine) if engine else same}")
        for child, res in zip(trainable, batch.results):
            record = child.record
            if isinstance(res, BaseException):
                record.error = {"stage": "train", "message": describe(res), "trace": "", "blame": "program"}
                continue
            why = diverged(res)
            if why:
                record.error = {"stage": "train", "message": why, "trace": "", "blame": "program", "kind": "diverged"}
                continue
            _score(record, res)
        now = time.time()
        timing = {
            "llm_s": round(prepared.llm_s, 2), "check_s": round(prepared.check_s, 2),
            "train_s": round(batch.wall_s, 2),
            "compile_s": None if batch.compile_s is None else round(batch.compile_s, 2),
            "eval_s": None if batch.eval_s is None else round(batch.eval_s, 2),
            "llm_wait_s": round(max(0.0, prepared.end - max(prepared.start, self._last_train_end)), 2),
            "wall_s": round(now - self._last_iter_end, 2),
        }
        # the LLM wait of the next batch counts from when this one stopped training
        self._last_train_end, self._last_iter_end = (batch.finished_at if trainable else now), now
        for child in prepared.children:
            child.record.metadata["train_wall_s"] = round(batch.wall_s / max(1, len(trainable)), 2)
            self._record(child.record)
        if prepared.proposals:
            outcomes = [Outcome(c.proposal, c.record) for c in prepared.children if c.proposal is not None]
            for event in self.strategy.tell(self._view(it), outcomes):
                self.rd.log(event.pop("event"), iteration=it, **event)
        self.rd.log("iteration", iteration=it, **timing)
        self._checkpoint(it, nxt.proposals if nxt is not None and nxt.proposals else None)
        self._report(it, timing)

    # --- bookkeeping ------------------------------------------------------------------
    def _record(self, record: Any) -> None:
        """Store the record (and offer it to the grid when evaluated), then log it."""
        elite = self.archive.add(record)
        if record.code:
            self.rd.write_program(record.id, record.code)
        self.rd.log("score" if record.error is None else "reject", elite=elite, **_brief(record))

    def _checkpoint(self, it: int, pending: list[Proposal] | None) -> None:
        usage = self.usage()
        self.rd.write_json("state.json", {
            "iteration": it, "archive": self.archive.to_dict(), "strategy": self.strategy.to_dict(),
            "pending": [p.to_dict() for p in pending] if pending else None,
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
                f"Train it: python -m limen_jax.train --task {self.task.name} "
                f'--interface best_interface.py --seeds 10\n"""\n'
            )
            write_text_atomic(self.rd.path / "best_interface.py", header + best.code)

    def _write_plots(self) -> None:
        """progress.png and archive.png, when a checkpoint came since they were drawn (and
        once per process). Drawn after the next batch is submitted, not before: matplotlib
        (~1 s to import, ~0.5 s a redraw) must not hold the next batch back."""
        if not self._plots_due:
            return
        self._plots_due = False
        from limen_jax.plots import plot_archive, plot_progress

        records = [r.to_dict() for r in self.store]
        if records:
            plot_progress(records, self.rd.path / "progress.png", title=f"{self.task.name} ({self.mode})")
            spec = self.archive.config.grid
            plot_archive(self.archive.heatmap(), spec.obs_labels(), spec.ast_labels(), self.rd.path / "archive.png")

    def _report(self, it: int, timing: dict[str, Any]) -> None:
        recs = [r for r in self.store if r.iteration == it]
        scored = [r for r in recs if r.success is not None]
        best = self.store.best()
        total = self.config.search.iterations if self.mode != "sparse" else 0
        parts = [f"[iter {it}/{total}]", f"{len(recs)} candidates"]
        if len(scored) < len(recs):
            parts.append(f"{len(recs) - len(scored)} rejected")
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


def _score(record: Any, res: Any) -> None:
    from limen_jax.llm.feedback import training_feedback

    record.stage = res.stage
    record.success_per_seed = [float(x) for x in res.success_per_seed]
    record.success = float(np.mean(record.success_per_seed))
    record.final_return = float(res.final_return)
    record.curves = {k: [float(x) for x in v] for k, v in res.curves.items()}
    # one feedback implementation: what is stored (and logged) is what the prompts show
    record.feedback = training_feedback(record) or {}


def _pid() -> int:
    import os

    return os.getpid()


def _brief(record: Any) -> dict[str, Any]:
    d = record.to_dict()
    d.pop("code", None)
    return d
