"""The ``learner`` evaluation kind: PPO as the ``ppo`` kind trains it, then rollouts of
the trained policy, returned as new negative demonstrations (GRACE's data expansion).

The program is trained and scored exactly as by ``ppo`` (the cascade; success is the
fitness); each full-stage candidate's first-seed policy then plays ``EPISODES`` fresh
episodes, and their transitions ride on the result as a
:class:`~limen_jax.demos.DemoSet` tagged ``learner`` (``result.demos``), which the loop
appends to the run's demonstrations (round = the program's iteration).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from limen_jax.search.evaluation.jobs import EvalBatch, EvalJob
from limen_jax.search.evaluation.training_kinds import PPO

EPISODES = 16


class LearnerResult:
    """A cascade result with the learner's demonstrations (``demos``); every other
    attribute is the cascade result's."""

    def __init__(self, result: Any, demos: Any) -> None:
        self.result, self.demos = result, demos

    def __getattr__(self, name: str) -> Any:
        return getattr(self.result, name)


class LearnerEvaluation(PPO):
    name = "learner"
    splits = False  # a rollout's key is its interface's index in the job

    def job(self, ctx: Any, interfaces: list[Any], options: dict[str, Any]) -> EvalJob:
        job = super().job(ctx, interfaces, options)
        return dataclasses.replace(job, kind=self.name, return_policies=True,
                                   data={"episodes": int(options.get("episodes", EPISODES))})

    def run(self, job: EvalJob, budget_s: float | None) -> EvalBatch:
        from limen_jax import demos

        batch = super().run(job, budget_s)
        out: list[Any] = []
        for k, (iface, result) in enumerate(zip(job.interfaces, batch.results)):
            if isinstance(result, BaseException) or not getattr(result, "policies", None):
                out.append(result)
                continue
            key = jax.random.key(int(job.seeds[0]) * 7919 + k)
            ep = demos.learner_rollout(job.task, iface, result.policies[0], key, job.data["episodes"])
            out.append(LearnerResult(result, demos.from_episodes(ep, "learner")))
        batch.results = out
        return batch
