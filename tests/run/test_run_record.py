"""Recording a batch without a loop: its results scored into the records by their kind,
the events and outcomes that follow, the timing line; and rejections as a typed value
that round-trips the JSON a run dir stores."""

from __future__ import annotations

import concurrent.futures as cf
import types

from limen_jax.archive import ProgramRecord
from limen_jax.run.ask import Child, Prepared, TextAnswer
from limen_jax.run.batch_jobs import Submitted
from limen_jax.run.record import batch_outcomes, policies_to_keep, score_batch
from limen_jax.run.state import Clock
from limen_jax.run.timing import batch_timing
from limen_jax.search.evaluation.jobs import EvalBatch
from limen_jax.search.evaluation.kind_registry import register_evaluation
from limen_jax.search.evaluation.training_kinds import EvaluationBase
from limen_jax.search.faults import Rejection, describe, rejection_of
from limen_jax.search.requests import EvalRequest, Outcome, ProgramRequest, TextRequest


class Constant(EvaluationBase):
    """A kind whose result is the score itself; its event carries only the value."""

    name = "constant_for_test"

    def job(self, ctx, interfaces, options):  # pragma: no cover - jobs are made by hand here
        raise NotImplementedError

    def run(self, job, budget_s):  # pragma: no cover
        raise NotImplementedError

    def score(self, record, result, job):
        if isinstance(result, BaseException):
            record.error = Rejection("train", describe(result)).to_dict()
            return
        record.success = result
        record.evaluations[self.name] = {"value": result, "per_step": [result] * 3}

    def summary(self, evaluation):
        return {"value": evaluation["value"]}


def program(pid: str) -> ProgramRequest:
    return ProgramRequest(pid, 1, 0, "mutate", (), (), "s", "u", (), 7, evaluation=Constant.name)


def test_a_batch_is_scored_and_told_without_a_loop():
    register_evaluation(Constant())
    a, b = (Child(program(p), ProgramRecord(p, "code", 1), interface=object(), text=f"answer {p}")
            for p in ("it0001-c00", "it0001-c01"))
    stored = ProgramRecord("it0000-c00", "old", 0)
    again = EvalRequest("it0001-e00", 1, (stored.id,), Constant.name)
    text = TextAnswer(TextRequest("it0001-t00", 1, "critic", "s", "u", 3), "a note")
    prepared = Prepared(1, [a.request, b.request, again, text.request], children=[a, b], texts=[text])
    job = types.SimpleNamespace(kind=Constant.name)
    submitted = [Submitted(Constant.name, job, cf.Future(), children=[a, b]),
                 Submitted(Constant.name, job, cf.Future(), request=again, records=[stored])]
    fault = ValueError("nan loss")
    batches = [EvalBatch([0.5, fault], wall_s=4.0), EvalBatch([0.75], wall_s=1.0)]

    scored = score_batch(submitted, batches)

    assert (a.record.success, a.record.error) == (0.5, None)
    assert b.record.success is None and b.record.error == {"stage": "train", "message": "ValueError: nan loss",
                                                           "trace": "", "blame": "program"}
    assert stored.evaluations == {Constant.name: {"value": 0.75, "per_step": [0.75, 0.75, 0.75]}}
    assert scored.results == {"it0001-c00": (Constant.name, 0.5), "it0001-c01": (Constant.name, fault)}
    assert scored.events == [{"id": "it0001-e00", "program": "it0000-c00", "kind": Constant.name, "value": 0.75}]
    assert scored.demos == [] and scored.trained == [([a, b], [0.5, fault])]
    assert batch_outcomes(prepared, scored) == [
        Outcome(a.request, a.record, text="answer it0001-c00", evaluation=Constant.name, results=(0.5,)),
        Outcome(b.request, b.record, text="answer it0001-c01", evaluation=Constant.name, results=(fault,)),
        Outcome(text.request, text="a note"),
        Outcome(again, records=(stored,), evaluation=Constant.name, results=(0.75,)),
    ]
    kept = types.SimpleNamespace(policies={"seed0": 1})
    assert policies_to_keep([a, b], [kept, kept]) == [("it0001-c00", kept)]  # b was rejected


def test_the_timing_line_counts_the_llm_wait_from_the_last_training():
    prepared = Prepared(1, [], llm_s=3.004, check_s=1.5, start=100.0, end=110.0)
    clock = Clock(t0=50.0, last_train_end=104.0, last_iter_end=90.0)
    batches = [EvalBatch([], wall_s=6.0, finished_at=118.0, compile_s=2.0, eval_s=1.0),
               EvalBatch([], wall_s=2.5, finished_at=119.0, compile_s=None, eval_s=0.5)]
    assert batch_timing(prepared, batches, clock, now=120.0) == {
        "llm_s": 3.0, "check_s": 1.5, "train_s": 8.5, "compile_s": None, "eval_s": 1.5, "llm_wait_s": 6.0,
        "wall_s": 30.0}
    assert (clock.last_train_end, clock.last_iter_end) == (119.0, 120.0)


def test_a_rejection_round_trips_the_json_a_run_dir_stores():
    stored = {"stage": "train", "message": "training diverged", "trace": "", "blame": "program", "kind": "diverged"}
    rejection = Rejection.from_dict(stored)
    assert rejection == Rejection("train", "training diverged", details={"kind": "diverged"})
    assert rejection.to_dict() == stored
    # an error stored before blame was recorded is the program's
    old = ProgramRecord("it0000-c00", "", 0, error={"stage": "shape", "message": "too wide", "trace": "line 3"})
    assert rejection_of(old) == Rejection("shape", "too wide", "line 3", "program")
    assert rejection_of(ProgramRecord("it0000-c01", "", 0)) is None
