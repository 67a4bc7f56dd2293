"""The ensemble: which member answers (fixed, weighted, a cost-aware UCB bandit on a scripted
sequence of improvements), deterministic in the request seed and the programs so far."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from limen_jax.archive import ProgramRecord
from limen_jax.llm import Completion
from limen_jax.llm.client import Usage
from limen_jax.llm.ensemble import Arm, Ensemble, Member, arm_stats, choose
from limen_jax.llm.prices import Price

DEAR, CHEAP = Price(3.0, 15.0, 3.0, 3.0), Price(0.3, 1.5, 0.3, 0.3)  # 1000 in + 200 out: $0.006 and $0.0006


@dataclasses.dataclass
class Stub:
    """A priced client answering with its own name."""

    name: str
    worst: float = 0.01

    def complete(self, system: str, user: str, images: Sequence[str] = (), seed: int = 0) -> Completion:
        return Completion(f"answer of {self.name}", Usage(1000, 200, 0.006), model=f"{self.name}-2025")

    def worst_cost(self, system: str, user: str, images: Sequence[str] = ()) -> float:
        return self.worst


def child(i: int, model: str, success: float | None, parent: str | None = "p") -> ProgramRecord:
    return ProgramRecord(id=f"c{i}", code="x", iteration=1, island=0, parent_ids=[parent] if parent else [],
                         success=success, success_per_seed=[success] if success is not None else [],
                         stage="full" if success is not None else "rejected",
                         metadata={"model": model, "input_tokens": 1000, "output_tokens": 200})


PARENT = ProgramRecord(id="p", code="x", iteration=0, island=0, success=0.5, success_per_seed=[0.5], stage="full")


def test_arms_credit_improvement_per_dollar():
    records = [PARENT, child(1, "a", 0.8), child(2, "b", 0.55), child(3, "b", None), child(4, "a", 0.2),
               child(5, "b", 0.3, parent=None), child(6, "other", 0.9)]
    arms = arm_stats(records, {"a": DEAR, "b": CHEAP})
    assert arms["a"].calls == 2 and arms["a"].improvement == pytest.approx(0.3)
    assert arms["a"].credit == pytest.approx(0.3 / 0.006)
    assert arms["b"].calls == 3 and arms["b"].improvement == pytest.approx(0.05 + 0.3)
    assert arms["b"].credit == pytest.approx(0.35 / 0.0006)
    free = arm_stats(records, {"a": Price(0, 0, 0, 0)})  # unpriced: the improvement itself
    assert free["a"].credit == pytest.approx(0.3) and set(free) == {"a"}


def test_fixed_takes_turns_and_weighted_follows_the_weights():
    assert [choose("fixed", s, [1, 1, 1], []) for s in range(5)] == [0, 1, 2, 0, 1]
    picks = [choose("weighted", s, [3, 1], []) for s in range(2000)]
    assert 0.72 < picks.count(0) / 2000 < 0.78
    assert picks == [choose("weighted", s, [3, 1], []) for s in range(2000)]  # a function of the seed


def test_ucb_tries_every_arm_then_prefers_improvement_per_dollar():
    untried = {choose("ucb", s, [1, 1], [Arm(), Arm()]) for s in range(20)}
    assert untried == {0, 1}
    assert choose("ucb", 0, [1, 1], [Arm(1, 0.1, 0.1), Arm()]) == 1  # the untried one first
    # a: +0.3 for $0.006; b: +0.05 for $0.0006 -- b brings more per dollar
    priced = arm_stats([PARENT, child(1, "a", 0.8), child(2, "b", 0.55)], {"a": DEAR, "b": CHEAP})
    assert choose("ucb", 0, [1, 1], [priced["a"], priced["b"]]) == 1
    zero = Price(0, 0, 0, 0)
    free = arm_stats([PARENT, child(1, "a", 0.8), child(2, "b", 0.55)], {"a": zero, "b": zero})
    assert choose("ucb", 0, [1, 1], [free["a"], free["b"]]) == 0


def test_ucb_on_a_scripted_sequence_of_improvements():
    """a's children improve by 0.2 each, b's by nothing: after one try each, the bandit keeps
    asking a and returns to b once its exploration bonus, sqrt(2 ln 6 / 1) = 1.89, passes a's
    1 + sqrt(2 ln 6 / 5) = 1.85."""
    gains = {"a": 0.2, "b": 0.0}
    records = [PARENT]
    ensemble = Ensemble([Member(Stub("a"), "a", 1.0, DEAR), Member(Stub("b"), "b", 1.0, DEAR)], "ucb",
                        records=lambda: records)
    picks = []
    for step in range(12):
        model = ensemble.pick(seed=100 + step).model
        picks.append(model)
        records.append(child(step, model, 0.5 + gains[model]))
    assert picks == ["b", "a", "a", "a", "a", "a", "b", "a", "a", "a", "a", "a"]
    again = Ensemble(ensemble.members, "ucb", records=lambda: records[:1])
    replayed = []
    for step in range(12):  # a replay of the same requests with the same records chooses the same
        replayed.append(again.pick(seed=100 + step).model)
        records_so_far = records[: step + 2]
        again.records = lambda r=records_so_far: r
    assert replayed == picks


def test_the_ensemble_labels_answers_by_member_and_reserves_the_dearest_worst_case():
    e = Ensemble([Member(Stub("a", 0.01), "a", 1.0, DEAR), Member(Stub("b", 0.03), "b", 1.0, CHEAP)], "fixed")
    assert e.worst_cost("s", "u") == 0.03
    answers = [e.complete("s", "u", seed=s) for s in (0, 1)]
    assert [(a.model, a.text, a.metadata["reported_model"]) for a in answers] == [
        ("a", "answer of a", "a-2025"), ("b", "answer of b", "b-2025")]
    with pytest.raises(ValueError, match="llm.select"):
        Ensemble(e.members, "best")
