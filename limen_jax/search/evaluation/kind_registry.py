"""Evaluation kinds: how a program is judged, by name.

A kind builds the :class:`~limen_jax.search.evaluation.evaluator.EvalJob` for some interfaces
(``job``), runs it wherever the evaluator runs it (``run``: in this process, on a Ray
worker; it must be a pure function of the job), and writes a result into a record
(``score``). The loop knows none of them; strategies name them in their requests.

- ``ppo``: the search's fitness: the cascade (a short single-seed run, then the full
  multi-seed run for survivors), success on fresh episodes; sets ``record.success``,
  the curves (``reward/<term>`` per named reward term), ``eval_terms`` and the feedback.
- ``retrain``: N fresh seeds at the full budget, one stage (``options["seeds"]``, default
  5); the scores and their 95 % interval (``interval``: limen_jax.stats.success_interval
  over the seeds and ``eval_episodes`` episodes each) go to ``record.evaluations["retrain"]``
  and never change the fitness.
- ``episodes``: roll out each program's kept policy for a few episodes
  (``options["episodes"]``, default 3) and log every step's reward terms, success and
  length into ``record.evaluations["episodes"]`` (:mod:`limen_jax.search.evaluation.episodes`); the
  ``evaluation`` event carries its summary (outcomes and term sums, no steps or frames).
- ``learner``: ``ppo``, then the trained policy's rollouts as new negative
  demonstrations (:mod:`limen_jax.search.evaluation.learner`).
- ``demos``: ranking accuracy on the run's demonstrations, no training
  (:mod:`limen_jax.search.evaluation.demo_ranking`); ``record.evaluations["demos"]``, never the fitness.

More kinds register with :func:`register_evaluation` or the entry-point group
``limen_jax.evaluations``.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from limen_jax.search.evaluation.demo_ranking import DemosEvaluation
from limen_jax.search.evaluation.episodes import Episodes
from limen_jax.search.evaluation.jobs import EvalBatch, EvalJob
from limen_jax.search.evaluation.learner import LearnerEvaluation
from limen_jax.search.evaluation.training_kinds import PPO, Evaluation, JobContext, Retrain

__all__ = ["GROUP", "PPO", "Evaluation", "JobContext", "Retrain", "evaluation_kind", "evaluation_kinds",
           "register_evaluation", "run_job"]

GROUP = "limen_jax.evaluations"


_KINDS: dict[str, Any] = {"ppo": PPO(), "retrain": Retrain(), "episodes": Episodes(), "demos": DemosEvaluation(),
                          "learner": LearnerEvaluation()}


def register_evaluation(kind: Any) -> None:
    """Add an evaluation kind (an object with ``name``, ``job``, ``run``, ``score``)."""
    _KINDS[kind.name] = kind


def evaluation_kind(name: str) -> Evaluation:
    found = _KINDS.get(name)
    if found is None:
        eps = {ep.name: ep for ep in importlib.metadata.entry_points(group=GROUP)}
        if name not in eps:
            raise ValueError(f"unknown evaluation kind {name!r}; expected one of {evaluation_kinds()}")
        loaded = eps[name].load()
        found = _KINDS[name] = loaded() if isinstance(loaded, type) else loaded
    return found  # type: ignore[no-any-return]


def evaluation_kinds() -> list[str]:
    return sorted(set(_KINDS) | {ep.name for ep in importlib.metadata.entry_points(group=GROUP)})


def run_job(job: EvalJob, budget_s: float | None = None) -> EvalBatch:
    """Run ``job`` by its kind: what every evaluator calls, in whatever process it runs."""
    return evaluation_kind(job.kind).run(job, budget_s)
