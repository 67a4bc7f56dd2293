"""The batch watchdog: a runaway program costs its batch (found, dropped, the rest
retrained), a stall with no culprit stops the run as the engine's fault."""

from __future__ import annotations

import math

import pytest
from toy_task import ToyCorridor

from limen_jax.program import compile_many
from limen_jax.program.timing import slow_programs
from limen_jax.rl import PPOConfig
from limen_jax.rl.watchdog import BatchTimeout
from limen_jax.search.evaluation.evaluator import EvaluatorBase, InProcessEvaluator
from limen_jax.search.evaluation.jobs import MIN_BUDGET_S, Budget, EvalJob, updates_of
from limen_jax.search.evaluation.train_job import evaluate
from limen_jax.search.faults import ProgramTooSlow, TrainingStalled, is_engine_error

TINY = PPOConfig().replace(num_envs=32, rollout_len=8, epochs=2, minibatches=2, eval_episodes=32,
                           actor_hidden=(16, 16), critic_hidden=(16, 16))  # fmt: skip
REWARD = """
def compute_reward(state, action, next_state):
    return jnp.asarray(next_state.pos == next_state.goal, jnp.float32) - 0.01 * {k}
"""
FAST = "import jax\nimport jax.numpy as jnp\n\ndef get_observation(state):\n" \
       "    return jnp.array([state.pos / 10.0, state.goal / 10.0], dtype=jnp.float32)\n"  # fmt: skip
# Cheap in the checker's 64 sampled states (1e6 element operations each, under the work
# budget), slow when every environment of every rollout step runs it.
SLOW = FAST.replace(
    "    return jnp.array([state.pos / 10.0,",
    "    v = jax.lax.fori_loop(0, 1000, lambda i, c: jnp.sin(c), jnp.ones(1000) * state.pos)\n"
    "    return jnp.array([state.pos / 10.0 + 1e-6 * v.mean(),",
)


@pytest.fixture(scope="module")
def programs():
    task = ToyCorridor()
    sources = [FAST + REWARD.format(k=1), FAST + REWARD.format(k=2), SLOW + REWARD.format(k=3)]
    fast_a, fast_b, slow = compile_many(sources, task, names=["fast_a", "fast_b", "slow"])
    assert not any(isinstance(i, Exception) for i in (fast_a, fast_b, slow)), (fast_a, fast_b, slow)
    return task, fast_a, fast_b, slow


def job(task, interfaces):
    return EvalJob(task, interfaces, [0], Budget(1024, 1024, 0.0), TINY, watchdog_s=1e-3)


def test_trainer_run_stops_at_its_deadline(programs):
    import time

    from limen_jax.rl import BatchTrainer

    task, fast_a, fast_b, _ = programs
    trainer = BatchTrainer(task, [fast_a, fast_b], TINY, 1)  # K=2, S=1: compiled once for the other tests too
    state = trainer.init([0], 8)
    with pytest.raises(BatchTimeout) as hit:
        trainer.run(state, 8, deadline=time.monotonic())
    assert hit.value.update == 1 and "after 1 update(s)" in str(hit.value)


def test_a_runaway_program_is_timed_dropped_and_the_rest_retrained(programs):
    task, fast_a, fast_b, slow = programs
    batch = evaluate(job(task, [fast_a, slow, fast_b]), budget_s=1e-3)
    a, s, b = batch.results
    assert isinstance(s, ProgramTooSlow) and not is_engine_error(s)
    assert str(s).startswith("too slow in training: get_observation + compute_reward takes ")
    assert "µs per transition vs " in str(s) and "/" not in str(s)  # no host paths
    for r in (a, b):
        assert not isinstance(r, Exception) and 0.0 <= r.success <= 1.0
    assert "training passed its deadline after 1 update(s)" in (batch.batch_error or "")


def test_a_stall_without_an_outlier_is_the_engines_fault(programs):
    task, fast_a, fast_b, _ = programs
    batch = evaluate(job(task, [fast_a, fast_b]), budget_s=1e-3)
    assert all(isinstance(r, TrainingStalled) and is_engine_error(r) for r in batch.results)
    assert "no program is an outlier" in str(batch.results[0])


def test_outliers_are_timeouts_or_far_over_the_median():
    assert slow_programs([1e-6, 1.2e-6, 9e-6]) == [2]
    assert slow_programs([1e-6, 1.2e-6, 3e-6]) == []  # within 4 x
    assert slow_programs([1e-6, math.inf, None]) == [1]
    assert slow_programs([2e-3]) == [] and slow_programs([math.inf]) == [0]
    assert slow_programs([1e-9, 6e-9]) == []  # too small a gap to blame anyone


def test_the_budget_is_learned_from_earlier_batches():
    evaluator = InProcessEvaluator()
    j = EvalJob(None, [], [0], Budget(1024, 4096, 0.0), TINY, watchdog_s=7200.0, watchdog_factor=5.0)
    assert updates_of(j) == 4 + 16  # short stage, then the full one
    assert evaluator.budget_s(j) == 7200.0  # nothing learned yet
    evaluator.per_update_s = 2.0
    assert evaluator.budget_s(j) == 5.0 * 2.0 * 20
    evaluator.per_update_s = 0.01
    assert evaluator.budget_s(j) == MIN_BUDGET_S
    assert InProcessEvaluator().budget_s(EvalJob(None, [], [0], j.budget, TINY, watchdog_s=0.0)) is None


class Watchdogged(EvaluatorBase):
    """An evaluator whose batches came back from the watchdog: the first candidate was the
    slow one (``stalled=False``), or nobody was (``stalled=True``)."""

    def __init__(self, stalled: bool) -> None:
        self.stalled, self.jobs = stalled, []

    def submit(self, job):
        import concurrent.futures as cf

        from test_loop_parts import _fake_result

        from limen_jax.search.evaluation.jobs import EvalBatch

        self.jobs.append(job)
        if self.stalled:
            results = [TrainingStalled("training passed its deadline; no program is an outlier")] * 2
        else:
            results = [ProgramTooSlow("too slow in training: ..."), _fake_result(job.interfaces[1], success=0.5)]
        future = cf.Future()
        future.set_result(EvalBatch(results, "training passed its deadline", 1.0))
        return future

    def close(self):
        pass


def test_the_loop_blames_the_slow_program_and_stops_on_a_stall(tmp_path):
    from test_loop_parts import config

    import limen_jax as lj

    slow = Watchdogged(stalled=False)
    # the fake evaluator answers two programs a job: no baseline job (its own watchdog rules: test_baseline.py)
    run = lj.evolve("toy_corridor", config(search={"iterations": 0, "baseline": False}, cascade={"watchdog_s": 30.0}),
                    run_dir=tmp_path / "slow", verbose=False, evaluator=slow)  # fmt: skip
    assert run.complete and (slow.jobs[0].watchdog_s, slow.jobs[0].watchdog_factor) == (30.0, 5.0)
    first, second = run.records
    assert first.error["blame"] == "program" and first.error["message"].startswith("ProgramTooSlow: too slow")
    assert second.success == 0.5

    run = lj.evolve("toy_corridor", config(search={"iterations": 0, "baseline": False}), run_dir=tmp_path / "stall",
                    verbose=False,
                    evaluator=Watchdogged(stalled=True))  # fmt: skip
    assert not run.complete and run.stopped.startswith("stopped (engine)") and "no program is an outlier" in run.stopped
    assert len(run.records) == 0  # nothing blamed on a program
