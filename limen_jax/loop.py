"""One evolution run, iteration by iteration, durable and resumable (see evolve.py)."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import numpy as np

from limen_jax.config import EvolveConfig
from limen_jax.rundir import RunDir, write_text_atomic
from limen_jax.search import parent_picker


class Loop:
    def __init__(self, config: EvolveConfig, run_dir: RunDir, *, mutator: Any = None, verbose: bool = True) -> None:
        from limen_jax.task import make

        self.config = config
        self.rd = run_dir
        self.verbose = verbose
        self.task = make(config.task)
        self.mode = config.search.mode
        self.program_mode = "full" if self.mode in ("independent", "sparse") else self.mode
        self.pick_parent = parent_picker("independent" if self.mode == "independent" else config.search.strategy)
        self._mutator = mutator
        self.mutator: Any = None
        self.t0 = time.time()

    # --- setup ------------------------------------------------------------------------
    def _setup(self) -> int:
        """Restore the checkpoint if there is one; returns the first iteration to run."""
        from limen_jax.archive import Archive, ArchiveConfig, GridSpec

        saved_cfg = self.rd.read_json("config.json")
        if saved_cfg is not None and saved_cfg != self.config.to_dict():
            raise ValueError(
                f"{self.rd.path} holds a run with another config; resume it with --resume, "
                "or choose a new --run-dir"
            )
        self.rd.write_json("config.json", self.config.to_dict())
        state = self.rd.read_json("state.json")
        if state is None:
            ac = self.config.archive
            self.archive = Archive(ArchiveConfig(
                num_islands=ac.islands, migration_interval=ac.migration_interval, p_global=ac.p_global,
                grid=GridSpec(ast_bin_width=ac.ast_bin_width, num_ast_bins=ac.ast_bins),
            ))
            self.spend = 0.0
            self.rd.log("run_start", config=self.config.to_dict(), pid=os.getpid())
            return 0
        self.archive = Archive.from_dict(state["archive"])
        self.spend = float(state.get("spend_usd", 0.0))
        start = int(state["iteration"]) + 1
        self.rd.log("run_resume", from_iteration=start, pid=os.getpid())
        return start

    @property
    def store(self) -> Any:
        return self.archive.store

    def _build_mutator(self) -> Any:
        from limen_jax.llm.factory import make_mutator

        return make_mutator(self.config.llm, self.task, cache_path=self.rd.cache_path, spent_usd=self.spend)

    def _ppo_config(self) -> Any:
        from limen_jax.rl import PPOConfig

        base = PPOConfig.preset(self.task.name, self.config.preset)
        over = {k: tuple(v) if isinstance(v, list) else v for k, v in self.config.ppo.items()}
        return base.replace(**over)

    # --- the loop ---------------------------------------------------------------------
    def run(self) -> Any:
        from limen_jax.evolve import RunResult
        from limen_jax.llm import BudgetExceeded, MutatorError

        start = self._setup()
        self.ppo = self._ppo_config()
        stopped = "finished"
        total = self.config.search.iterations + 1
        if self.mode == "sparse":
            total = 1
        if start < total:
            self.mutator = self._mutator or (None if self.mode == "sparse" else self._build_mutator())
            self._say(f"limen_jax: {self.task.name}, mode {self.mode}, {total} generations, run dir {self.rd.path}")
        for it in range(start, total):
            try:
                self._iteration(it)
            except BudgetExceeded as exc:
                stopped = f"stopped at the LLM budget cap: {exc}"
                self.rd.log("budget_stop", iteration=it, message=str(exc))
                self._say(stopped)
                break
            except MutatorError as exc:
                stopped = f"stopped: {type(exc).__name__}: {exc} (fix it, then --resume {self.rd.path})"
                self.rd.log("mutator_stop", iteration=it, message=str(exc))
                self._say(stopped)
                break
        result = RunResult(self.rd.path, self.config, self.store, self.archive, stopped)
        self._write_outputs()
        self.rd.log("run_end", stopped=stopped, best=getattr(result.best, "id", None))
        return result

    def _iteration(self, it: int) -> None:
        rng = np.random.default_rng([self.config.seed, it])
        island = it % self.config.archive.islands
        if self.mode == "sparse":
            children = [self._default_child(it)]
        else:
            search = self.config.search
            n = (search.initial or search.candidates) if it == 0 else search.candidates
            children = [c for c in (self._propose(it, k, island, rng) for k in range(n)) if c is not None]
        self._train(it, children)
        migrations = self.archive.maybe_migrate(it)
        if migrations:
            self.rd.log("migrate", iteration=it, moves=[dataclasses.asdict(m) for m in migrations])
        self._checkpoint(it)
        self._report(it)

    def _propose(self, it: int, k: int, island: int, rng: np.random.Generator) -> tuple[Any, Any] | None:
        """Ask the mutator for one child; validate it. Returns (record, interface) when
        trainable; rejected children are recorded and logged, never raised."""
        from limen_jax.archive import ProgramRecord, program_id
        from limen_jax.llm import MutationRequest, MutatorError, build_prompt
        from limen_jax.program import ProgramError, compile_interface

        pid = program_id(it, k)
        parent = None
        if it > 0:
            parent = self.pick_parent(self.archive, rng, island)
        others = self.archive.inspirations(3, parent) if parent else []
        prompt = build_prompt(
            self.task, self.program_mode, rng, parent=parent,
            top=self.store.top_k(3) if parent else [], diverse=others,
            failures=self.store.recent_failures(3),
        )
        system, user = prompt.system, prompt.user
        request = MutationRequest(
            system=system, user=user, task_name=self.task.name, mode=self.program_mode,  # type: ignore[arg-type]
            parent=parent, others=others, rng_seed=int(rng.integers(2**31 - 1)),
        )
        self.rd.log("prompt", id=pid, iteration=it, island=island, parent=getattr(parent, "id", None),
                    system=system, user=user)
        record = ProgramRecord(id=pid, code="", iteration=it, island=island,
                               parent_ids=[parent.id] if parent else [])
        assert self.mutator is not None
        try:
            response = self.mutator.propose(request)
        except MutatorError:  # budget cap, replay miss, missing key: stop (resumable)
            raise
        except Exception as exc:  # any other mutator failure costs one candidate, not the run
            record.error = {"stage": "mutator", "message": f"{type(exc).__name__}: {exc}", "trace": ""}
            self._record(record)
            return None
        self.spend += float(getattr(response, "cost_usd", 0.0) or 0.0)
        record.metadata = {
            "mutator": getattr(self.mutator, "name", "custom"), "model": response.model,
            "input_tokens": response.input_tokens, "output_tokens": response.output_tokens,
            "cost_usd": response.cost_usd, "cached": response.cached,
        }
        self.rd.log("response", id=pid, text=response.text, **record.metadata)
        if response.error:
            record.error = {"stage": "mutator", "message": response.error, "trace": ""}
            self._record(record)
            return None
        try:
            iface = compile_interface(response.text, self.task, mode=self.program_mode, name=pid)
        except ProgramError as exc:
            record.code = getattr(exc, "source", None) or response.text
            record.error = exc.to_dict()
            self._record(record)
            return None
        record.code, record.obs_dim, record.reward_ast_size = iface.source, iface.obs_dim, iface.reward_ast_size
        self.rd.write_program(pid, iface.source)
        self.rd.log("program", id=pid, obs_dim=iface.obs_dim, reward_ast_size=iface.reward_ast_size)
        return record, iface

    def _default_child(self, it: int) -> tuple[Any, Any]:
        from limen_jax.archive import ProgramRecord, program_id
        from limen_jax.interface import default_interface

        iface = default_interface(self.task)
        record = ProgramRecord(id=program_id(it, 0), code="# the task's default observation and sparse reward\n",
                               iteration=it, obs_dim=iface.obs_dim, reward_ast_size=0,
                               metadata={"mutator": "none (sparse baseline)"})
        return record, iface

    def _train(self, it: int, children: list[tuple[Any, Any]]) -> None:
        """Train the valid children of one iteration together; a batch failure falls back
        to training each child alone so one bad candidate cannot sink the others."""
        from limen_jax.rl import run_cascade

        if not children:
            return
        c = self.config.cascade
        seeds = [self.config.seed * 1000 + s for s in range(self.config.search.seeds)]
        ifaces = [iface for _, iface in children]
        short = c.short_steps if c.short_steps > 0 else c.full_steps  # 0: no cascade, one stage
        kwargs = dict(config=self.ppo, short_steps=short, full_steps=c.full_steps,
                      seeds=seeds, threshold=c.threshold)
        t = time.time()
        results: list[Any]
        try:
            results = list(run_cascade(self.task, ifaces, **kwargs))
        except Exception as exc:
            self.rd.log("batch_error", iteration=it, message=f"{type(exc).__name__}: {exc}")
            results = []
            for iface in ifaces:
                try:
                    results.extend(run_cascade(self.task, [iface], **kwargs))
                except Exception as one_exc:
                    results.append(one_exc)
        wall = time.time() - t
        for (record, _), res in zip(children, results):
            if isinstance(res, Exception):
                record.error = {"stage": "train", "message": f"{type(res).__name__}: {res}", "trace": ""}
            else:
                record.stage = res.stage
                record.success_per_seed = [float(x) for x in res.success_per_seed]
                record.success = float(np.mean(record.success_per_seed))
                record.final_return = float(res.final_return)
                record.curves = {k: [float(x) for x in v] for k, v in res.curves.items()}
                record.feedback = dict(res.feedback)
            record.metadata["train_wall_s"] = round(wall / len(children), 2)
            self._record(record)

    # --- bookkeeping ------------------------------------------------------------------
    def _record(self, record: Any) -> None:
        """Store the record (and offer it to the grid when evaluated), then log it."""
        elite = self.archive.add(record)
        if record.code:
            self.rd.write_program(record.id, record.code)
        self.rd.log("score" if record.error is None else "reject", elite=elite, **_brief(record))

    def _checkpoint(self, it: int) -> None:
        self.rd.write_json("state.json", {"iteration": it, "archive": self.archive.to_dict(), "spend_usd": self.spend})
        self._write_outputs()

    def _write_outputs(self) -> None:
        from limen_jax.plots import plot_archive, plot_progress

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
        records = [r.to_dict() for r in self.store]
        if records:
            plot_progress(records, self.rd.path / "progress.png", title=f"{self.task.name} ({self.mode})")
            spec = self.archive.config.grid
            plot_archive(self.archive.heatmap(), spec.obs_labels(), spec.ast_labels(), self.rd.path / "archive.png")

    def _report(self, it: int) -> None:
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
        parts.append(f"{time.time() - self.t0:.0f}s")
        self._say(" | ".join(parts))
        for r in recs:
            if r.error:
                self._say(f"    {r.id} rejected at {r.error.get('stage')}: {str(r.error.get('message'))[:100]}")

    def _say(self, text: str) -> None:
        if self.verbose:
            print(text, flush=True)


def _brief(record: Any) -> dict[str, Any]:
    d = record.to_dict()
    d.pop("code", None)
    return d
