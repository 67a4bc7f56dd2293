"""The run's state: what a search run carries from batch to batch, and opening it.

:func:`open_run` restores the checkpoint of a run directory (or starts a new run),
settles what the config leaves open ("auto" mutator, pipeline, the strategy's cap on
generations), refuses what cannot run (a missing key, a changed config) before the
directory is written, and returns the :class:`RunState` the loop executes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from limen_jax.archive import Archive
from limen_jax.config import EvolveConfig, resume_changes
from limen_jax.modes import program_mode, strategy_for
from limen_jax.run.pipeline import resolve_pipeline
from limen_jax.run.reader import RunDirError, check_state
from limen_jax.run.repeats import Repeats
from limen_jax.run.run_demos import RunDemos
from limen_jax.run.run_mutator import RunMutator, settle_llm
from limen_jax.rundir import RunDir
from limen_jax.search.base import Strategy
from limen_jax.search.evaluation.prescreen import Prescreen, parse_prescreen
from limen_jax.search.requests import Request, request_from_dict
from limen_jax.search.strategy_registry import make_strategy


@dataclasses.dataclass
class Clock:
    """Wall-clock marks (``time.time()``) of the run: when this process began, when the
    last batch stopped training, when the last batch was recorded."""

    t0: float
    last_train_end: float = 0.0
    last_iter_end: float = 0.0


@dataclasses.dataclass
class RunState:
    """What the loop carries between batches. config: the run's config, settled (mutator,
    pipeline); task: the resolved task; mode: the program mode of ``config.search.mode``;
    iterations: the last generation to run (the strategy's cap applied); start: the first
    generation this process runs; pending: a proposed batch restored from the checkpoint
    (the pipeline's next batch), or None; ppo / limits: the PPO config and the checker's
    limits (None: the defaults); repeats: the fingerprints of the run's programs so far
    (which program repeats which); interfaces: compiled interfaces by program id (this
    process); plots_due: a checkpoint came since the plots were drawn; baseline: the
    task's default interface as trained in the first batch (:func:`limen_jax.run.baseline.baseline_of`),
    None before it is trained or when the run skips it."""

    config: EvolveConfig
    task: Any
    mode: str
    strategy: Strategy
    archive: Archive
    mutator: RunMutator
    demos: RunDemos
    prescreen: Prescreen | None
    iterations: int
    start: int
    pending: list[Request] | None
    ppo: Any
    limits: Any
    clock: Clock
    repeats: Repeats
    interfaces: dict[str, Any] = dataclasses.field(default_factory=dict)
    plots_due: bool = True
    baseline: dict[str, Any] | None = None

    @property
    def pipeline(self) -> bool:
        return self.config.search.pipeline == "on"


def open_run(config: EvolveConfig, rd: RunDir, task: Any, *, mutator: Any, allow_changes: bool,
             say: Callable[[str], None]) -> RunState:
    """The state of the run in ``rd``: restored from its checkpoint, or new. ValueError
    (nothing written) when the run cannot start; the directory is created last."""
    saved = rd.read_json("config.json")
    state = rd.read_json("state.json")
    if state is not None:
        check_state(state, rd.path / "state.json")
    for note in rd.notes:  # what opening the run dir repaired
        say(f"resume: {note}")
    if any("state.json" in n for n in rd.notes):
        rd.log("checkpoint_fallback", message=[n for n in rd.notes if "state.json" in n][0])
    if mutator is None:  # "auto" names one mutator and prices its models for the whole run, resumes included
        config = dataclasses.replace(config, llm=settle_llm(config.llm, saved))
    with _naming(rd.path / "state.json", "strategy"):
        strategy = make_strategy(strategy_for(config.search.mode, config.search.strategy), config.search.options,
                                 (state or {}).get("strategy"))
    pipeline = resolve_pipeline(config.search, config.llm, lookahead=strategy.lookahead,
                                custom_mutator=mutator is not None, saved=saved)
    config = dataclasses.replace(config, search=dataclasses.replace(config.search, pipeline=pipeline))
    run_mutator = RunMutator(mutator, config.llm, task, rd)  # config.llm is final here
    if saved is not None:
        changed = resume_changes(saved, config.to_dict(), allowed=allow_changes, run=rd.path)
        if changed is not None:
            rd.log("config_change", keys=list(changed), values=changed)
            say(f"resume: changed {', '.join(f'{k}={v}' for k, v in changed.items())}")
    mode = program_mode(config.search.mode)
    demos = RunDemos(rd, task, config.search.demos, config.seed)
    demos.check()
    prescreen = parse_prescreen(config.search.prescreen) if mode != "obs_only" else None
    if prescreen is not None:
        demos.check_buildable(f"--prescreen {config.search.prescreen}")
    cap = strategy.max_iterations
    iterations = config.search.iterations if cap is None else min(cap, config.search.iterations)
    finished = state is not None and int(state["iteration"]) >= iterations
    if strategy.asks_llm and not finished:
        run_mutator.check(resumed=saved is not None)
    if state is not None:
        _check_spend(rd, run_mutator, state)
    rd.create()
    # the first line, once the run is known to start: bad input stays one line of error
    say(f"limen_jax: {'resuming' if saved is not None else 'starting'} {config.task} in {rd.path}")
    rd.write_json("config.json", config.to_dict())
    if state is None:
        archive, pending, start = Archive(config.archive), None, 0
        rd.log("run_start", config=config.to_dict(), pid=os.getpid())
    else:
        with _naming(rd.path / "state.json", "archive"):
            archive = Archive.from_dict(state["archive"])
        with _naming(rd.path / "state.json", "pending"):
            pending = [request_from_dict(r) for r in state["pending"]] if state.get("pending") else None
        start = int(state["iteration"]) + 1
        rd.log("run_resume", from_iteration=start, pid=os.getpid())
        if start > iterations:  # nothing left to run: the name it ran with
            run_mutator.name = state.get("usage", {}).get("mutator", run_mutator.name)
    run_mutator.observe(archive.store)
    t0 = time.time()
    return RunState(config, task, mode, strategy, archive, run_mutator, demos, prescreen, iterations, start,
                    pending, _ppo_config(config, task), _limits(config), Clock(t0, last_iter_end=t0),
                    Repeats.of(archive.store, config.search.dedupe), baseline=(state or {}).get("baseline"))


@contextlib.contextmanager
def _naming(path: Path, field: str) -> Iterator[None]:
    """Turn what rebuilding ``field`` of a checked checkpoint still refuses (a missing key,
    a value of the wrong type) into one :class:`RunDirError` line naming the file and field."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, RunDirError):
            raise
        raise RunDirError(f"{path}: {field}: {type(exc).__name__}: {exc}") from None


def _check_spend(rd: RunDir, run_mutator: RunMutator, state: dict[str, Any]) -> None:
    """Refuse a cache that records less spend than the checkpoint saw paid: lines taken out of
    llm_cache.jsonl would let a resumed run's cap count less than was spent."""
    recorded = float(state.get("spend_usd") or 0.0)
    path = rd.cache_path
    if recorded <= 0:
        return
    from limen_jax.llm.replay import ResponseCache

    ledger = run_mutator.mutator.cache.ledger if run_mutator.mutator is not None else ResponseCache(path).ledger
    if ledger.cost_usd + 1e-6 < recorded:
        raise RunDirError(f"{path}: its ledger sums to ${ledger.cost_usd:.6f} but {rd.path / 'state.json'} "
                          f"recorded ${recorded:.6f} spent: the cache lost entries; the run cannot resume from it")


def _ppo_config(config: EvolveConfig, task: Any) -> Any:
    from limen_jax.rl import PPOConfig

    return PPOConfig.preset(task.name, config.preset).replace(**config.ppo)


def _limits(config: EvolveConfig) -> Any:
    if not config.checker:
        return None
    from limen_jax.program import Limits

    return Limits(**config.checker)


def search_view(state: RunState, it: int) -> Any:
    """The :class:`~limen_jax.search.base.SearchView` a strategy gets for batch ``it``."""
    from limen_jax.llm.prompts import budget_text
    from limen_jax.program import Limits
    from limen_jax.search.base import SearchView

    search, limits = state.config.search, state.limits or Limits()
    n = (search.initial or search.candidates) if it == 0 else search.candidates
    return SearchView(state.archive, state.task, state.mode, it, n, state.config.prompt,
                      budget_text(state.config.cascade.full_steps, search.seeds), limits.max_obs_dim,
                      limits.max_work_vs_step, demos=state.demos.get, last=state.iterations)


def kept_policies(state: RunState) -> str:
    """Which trained policies the run keeps: the config's ``keep_policies``, or more when
    the strategy reads them (its ``keep_policies``, e.g. "all" for a critic that rolls
    out every candidate)."""
    order = ("none", "best", "all")
    return max(state.config.keep_policies, state.strategy.keep_policies or "none", key=order.index)


def job_context(state: RunState, run_path: Path) -> Any:
    """The :class:`~limen_jax.search.evaluation.training_kinds.JobContext` every job of the run is built from."""
    from limen_jax.search.evaluation.jobs import Budget
    from limen_jax.search.evaluation.training_kinds import JobContext

    c, search = state.config.cascade, state.config.search
    return JobContext(state.task, state.ppo, state.config.seed, search.seeds,
                      Budget(c.short_steps, c.full_steps, c.threshold), pad_to=search.candidates,
                      watchdog_s=c.watchdog_s, watchdog_factor=c.watchdog_factor,
                      return_policies=kept_policies(state) != "none", run_path=str(run_path.absolute()),
                      demos=state.demos.get)
