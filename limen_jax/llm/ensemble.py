"""Several models as one client: each call is answered by one member, picked by
``llm.select``.

- ``fixed``: the members in turn, by the request seed (seed mod the number of members);
- ``weighted``: drawn with probability proportional to the members' weights, from a
  Generator seeded by the request seed;
- ``ucb``: a cost-aware UCB1 bandit. A call's credit is its child's improvement in
  success over its first parent (over 0 for a child from scratch or of an untrained
  parent; 0 for a child that failed or was not trained in full),
  divided by the call's dollars for a priced member (its tokens at its price, so a replay,
  whose answers cost nothing again, credits the same). An arm's mean credit, scaled by the
  best arm's, plus ``sqrt(2 ln N / n)`` is its score; an arm never tried goes first.

The bandit's state is a function of the run's programs (:func:`arm_stats` over the
archive's records, which the checkpoint keeps), so a resume continues it and a replay
reproduces it: a request's member is a deterministic function of its seed and the
programs recorded before its batch was asked.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from limen_jax.llm.client import Completion, PricedClient
from limen_jax.llm.prices import Price

SELECTIONS = ("fixed", "weighted", "ucb")


@dataclasses.dataclass(frozen=True)
class Member:
    """One model of the ensemble: its client, the id its answers are recorded under, its
    weight and price."""

    client: PricedClient
    model: str
    weight: float
    price: Price


@dataclasses.dataclass
class Arm:
    """What one member's answers brought: calls (programs it wrote), improvement summed,
    credit summed (improvement per dollar for a priced member)."""

    calls: int = 0
    improvement: float = 0.0
    credit: float = 0.0

    @property
    def mean_improvement(self) -> float:
        return self.improvement / self.calls if self.calls else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"programs": self.calls, "mean_improvement": round(self.mean_improvement, 6),
                "credit": round(self.credit, 6)}


def arm_stats(records: Iterable[Any], prices: dict[str, Price]) -> dict[str, Arm]:
    """Each model's :class:`Arm` over ``records`` (:class:`~limen_jax.archive.store.ProgramRecord`
    with ``metadata["model"]``, its tokens, ``parent_ids`` and ``success``); records of
    models not in ``prices`` are left out."""
    records = list(records)
    success = {r.id: r.success for r in records if r.evaluated}
    arms = {model: Arm() for model in prices}
    for r in records:
        model = r.metadata.get("model")
        if model not in arms:
            continue
        parent = success.get(r.parent_ids[0]) if r.parent_ids else 0.0
        gain = max(0.0, float(r.success) - float(parent or 0.0)) if r.id in success else 0.0
        price = prices[model]
        dollars = price.cost(int(r.metadata.get("input_tokens", 0)), int(r.metadata.get("output_tokens", 0)))
        arm = arms[model]
        arm.calls += 1
        arm.improvement += gain
        arm.credit += gain / dollars if dollars > 0 else gain
    return arms


def choose(select: str, seed: int, weights: Sequence[float], arms: Sequence[Arm]) -> int:
    """The member (index) that answers the request of ``seed``; pure."""
    n = len(weights)
    rng = np.random.default_rng(seed)
    if select == "fixed":
        return seed % n
    if select == "weighted":
        p = np.asarray(weights, dtype=np.float64)
        return int(rng.choice(n, p=p / p.sum()))
    untried = [i for i, a in enumerate(arms) if a.calls == 0]
    if untried:
        return untried[int(rng.integers(len(untried)))]
    means = np.array([a.credit / a.calls for a in arms])
    top = means.max()
    scaled = means / top if top > 0 else means
    total = sum(a.calls for a in arms)
    scores = scaled + np.array([math.sqrt(2 * math.log(total) / a.calls) for a in arms])
    best = np.flatnonzero(np.isclose(scores, scores.max(), rtol=0, atol=1e-12))
    return int(best[int(rng.integers(len(best)))])


class Ensemble:
    """The members as one :class:`~limen_jax.llm.client.PricedClient`. records: the run's
    program records so far (a callable, read at each call; None: none yet)."""

    name = "ensemble"

    def __init__(self, members: Sequence[Member], select: str,
                 records: Callable[[], Iterable[Any]] | None = None) -> None:
        if select not in SELECTIONS:
            raise ValueError(f"llm.select must be one of {', '.join(SELECTIONS)}, got {select!r}")
        if not members:
            raise ValueError("an ensemble needs at least one model (llm.models)")
        self.members = list(members)
        self.select = select
        self.records = records

    @property
    def prices(self) -> dict[str, Price]:
        return {m.model: m.price for m in self.members}

    def arms(self) -> dict[str, Arm]:
        return arm_stats(self.records() if self.records is not None else (), self.prices)

    def pick(self, seed: int) -> Member:
        arms = self.arms() if self.select == "ucb" else {}
        index = choose(self.select, seed, [m.weight for m in self.members],
                       [arms.get(m.model, Arm()) for m in self.members])
        return self.members[index]

    def worst_cost(self, system: str, user: str, images: Sequence[str] = ()) -> float:
        """The dearest member's worst case (what the cap reserves before the pick)."""
        return max(m.client.worst_cost(system, user, images) for m in self.members)

    def complete(self, system: str, user: str, images: Sequence[str] = (), seed: int = 0) -> Completion:
        member = self.pick(seed)
        answer = member.client.complete(system, user, images, seed)
        metadata = {**answer.metadata, "client": member.client.name, "reported_model": answer.model}
        return dataclasses.replace(answer, model=member.model, metadata=metadata)
