"""The training kinds, ``ppo`` (the fitness) and ``retrain`` (fresh seeds), with what
every kind is built from (:class:`JobContext`) and the protocol a kind implements.

Kept apart from the registry (:mod:`limen_jax.search.evaluation.kind_registry`) so that kinds
defined elsewhere (``learner`` builds on ``ppo``; ``episodes`` and ``demos`` take a
context) import them without importing the registry that imports them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import numpy as np

from limen_jax.search.evaluation.jobs import Budget, EvalBatch, EvalJob
from limen_jax.search.evaluation.train_job import evaluate
from limen_jax.search.faults import Rejection, describe, diverged
from limen_jax.stats import success_interval


@dataclasses.dataclass(frozen=True)
class JobContext:
    """What every kind needs to build a job: the run's task, PPO config, seed, seeds per
    full run, cascade budget and watchdog, the batch size to pad to, whether the
    trained policies come back to be kept (``keep_policies``), the run directory
    (``run_path``; "" when there is none), where kept policies live, and the run's
    demonstrations (a :class:`~limen_jax.demos.DemoSet`, or None) for the ``demos`` kind."""

    task: Any
    ppo: Any
    seed: int
    seeds: int
    budget: Budget
    pad_to: int | None = None
    watchdog_s: float = 0.0
    watchdog_factor: float = 5.0
    return_policies: bool = False
    run_path: str = ""
    demos: Any = None


class Evaluation(Protocol):
    """A kind: every member is used; :class:`EvaluationBase` gives the defaults of
    ``trains``, ``splits`` and ``summary``, so a kind that subclasses it writes only
    ``name``, ``job``, ``run`` and ``score``.

    trains: whether its jobs compile a trainer (what an evaluator may compile ahead);
    splits: whether an evaluator may split one job over several workers and join the
    answers (:func:`limen_jax.search.evaluation.jobs.split_job`); summary: what the run's
    ``evaluation`` event carries of a large ``record.evaluations[name]``."""

    name: str
    trains: bool
    splits: bool

    def job(self, ctx: JobContext, interfaces: list[Any], options: dict[str, Any]) -> EvalJob: ...

    def run(self, job: EvalJob, budget_s: float | None) -> EvalBatch: ...

    def score(self, record: Any, result: Any, job: EvalJob) -> None: ...

    def summary(self, evaluation: dict[str, Any]) -> dict[str, Any]: ...


class EvaluationBase:
    """Defaults of a kind: it trains, its jobs stay whole, its event carries all of it."""

    trains: bool = True
    splits: bool = False

    def summary(self, evaluation: dict[str, Any]) -> dict[str, Any]:
        return evaluation


class PPO(EvaluationBase):
    """The cascade; the result becomes the record's fitness, curves and feedback."""

    name = "ppo"
    # its interfaces train apart (each slot's randomness is its seed's), so an evaluator may
    # split one job over several workers and join the answers (limen_jax.search.evaluation.jobs.split_job)
    splits = True

    def job(self, ctx: JobContext, interfaces: list[Any], options: dict[str, Any]) -> EvalJob:
        b = ctx.budget
        short = b.short_steps if b.short_steps > 0 else b.full_steps  # 0: no cascade, one stage
        return EvalJob(ctx.task, interfaces, [ctx.seed * 1000 + s for s in range(ctx.seeds)],
                       Budget(short, b.full_steps, b.threshold), ctx.ppo, pad_to=ctx.pad_to,
                       watchdog_s=ctx.watchdog_s, watchdog_factor=ctx.watchdog_factor, kind=self.name,
                       return_policies=ctx.return_policies)

    def run(self, job: EvalJob, budget_s: float | None) -> EvalBatch:
        return evaluate(job, budget_s)

    def score(self, record: Any, result: Any, job: EvalJob) -> None:
        from limen_jax.llm.feedback import training_feedback

        if isinstance(result, BaseException):
            record.error = Rejection("train", describe(result)).to_dict()
            return
        why = diverged(result)
        if why:
            record.error = Rejection("train", why, details={"kind": "diverged"}).to_dict()
            return
        record.stage = result.stage
        record.success_per_seed = [float(x) for x in result.success_per_seed]
        record.success = float(np.mean(record.success_per_seed))
        record.final_return = float(result.final_return)
        record.curves = {k: [float(x) for x in v] for k, v in result.curves.items()}
        record.eval_terms = {k: float(v) for k, v in getattr(result, "eval_terms", {}).items()}
        # one feedback implementation: what is stored (and logged) is what the prompts show
        record.feedback = training_feedback(record) or {}


class Retrain(PPO):
    """Fresh seeds (never the search's) at the full budget; kept beside the fitness, with
    the 95 % interval of their mean success (``interval``, over ``eval_episodes``
    evaluation episodes per seed)."""

    name = "retrain"
    DEFAULT_SEEDS = 5

    def job(self, ctx: JobContext, interfaces: list[Any], options: dict[str, Any]) -> EvalJob:
        n = int(options.get("seeds", self.DEFAULT_SEEDS))
        if n < 1:
            raise ValueError(f"retrain: seeds must be >= 1, got {n}")
        b = ctx.budget
        # seeds seed*1000 + 0..seeds-1 trained the search; these start at +500
        seeds = [ctx.seed * 1000 + 500 + s for s in range(n)]
        return EvalJob(ctx.task, interfaces, seeds, Budget(b.full_steps, b.full_steps, 0.0), ctx.ppo,
                       watchdog_s=ctx.watchdog_s, watchdog_factor=ctx.watchdog_factor, kind=self.name)

    def score(self, record: Any, result: Any, job: EvalJob) -> None:
        steps = job.budget.full_steps
        why = describe(result) if isinstance(result, BaseException) else diverged(result)
        if why:
            record.evaluations[self.name] = {"error": why, "seeds": list(job.seeds), "steps": steps}
            return
        per_seed = [float(x) for x in result.success_per_seed]
        episodes = int(job.config.eval_episodes)
        record.evaluations[self.name] = {
            "success": float(np.mean(per_seed)), "success_per_seed": per_seed, "seeds": list(job.seeds),
            "steps": steps, "final_return": float(result.final_return),
            # 95 %, over the fresh seeds and their evaluation episodes (limen_jax.stats)
            "interval": list(success_interval(per_seed, episodes)), "eval_episodes": episodes,
        }
