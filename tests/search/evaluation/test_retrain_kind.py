"""The retrain kind records its fresh seeds' mean success with a 95 % interval."""

from __future__ import annotations

import types

import numpy as np

from limen_jax.rl import PPOConfig
from limen_jax.search.evaluation.jobs import Budget
from limen_jax.search.evaluation.training_kinds import JobContext, Retrain


def test_retrain_records_the_interval_over_seeds_and_evaluation_episodes() -> None:
    kind = Retrain()
    ctx = JobContext(task=None, ppo=PPOConfig(eval_episodes=10), seed=2, seeds=3, budget=Budget(100, 400, 0.1))
    job = kind.job(ctx, [], {"seeds": 1})
    assert list(job.seeds) == [2500] and job.budget.full_steps == 400
    record = types.SimpleNamespace(evaluations={})
    result = types.SimpleNamespace(success_per_seed=np.array([0.5], np.float32), success=0.5, final_return=1.25,
                                   diverged_at=None)  # fmt: skip
    kind.score(record, result, job)
    # one seed of 10 episodes at 0.5: Binomial(10, 1/2)'s 2.5 % and 97.5 % points, 2 and 8 of 10
    assert record.evaluations["retrain"] == {
        "success": 0.5, "success_per_seed": [0.5], "seeds": [2500], "steps": 400, "final_return": 1.25,
        "interval": [0.2, 0.8], "eval_episodes": 10,
    }  # fmt: skip
    kind.score(record, RuntimeError("worker lost"), job)
    assert "interval" not in record.evaluations["retrain"] and record.evaluations["retrain"]["seeds"] == [2500]
