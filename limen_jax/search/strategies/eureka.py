"""Eureka: greedy best-of-K with reward reflection (``--strategy eureka``).

Iteration 0 samples K programs from scratch. Every later iteration samples K programs
from the best program of the last batch (by mean success; the last parent again when
no child of the batch was scored), each prompt showing that program and its reward
reflection (:mod:`limen_jax.llm.reflection`: each named term over training with max /
mean / min, the success and episode-length curves, reading hints, a farmed term). No
archive sections, no failures: Eureka's LLM sees the current best and its statistics
only. The next batch needs all of this one, so nothing runs ahead (lookahead 0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from limen_jax.llm.reflection import reflection
from limen_jax.search.base import SearchView, StrategyBase, ask_program
from limen_jax.search.requests import Outcome, Request
from limen_jax.search.sections import insert_section, plain


class Eureka(StrategyBase):
    name = "eureka"
    lookahead = 0  # the next batch grows from the best of this one

    @dataclasses.dataclass(frozen=True)
    class Options:
        k: int = 0  # samples per iteration; 0: search.candidates

        def __post_init__(self) -> None:
            if self.k < 0:
                raise ValueError("k must be at least 0 (0: search.candidates)")

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.parent: str | None = None

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        k = self.options.k or view.candidates
        parent = view.store.get(self.parent) if self.parent is not None and view.iteration > 0 else None
        quiet = plain(view)
        out: list[Request] = []
        for i in range(k):
            request = ask_program(quiet, rng, i, 0, parent=parent, operator="reflect" if parent else None)
            out.append(insert_section(request, reflection(parent)) if parent is not None else request)
        return out

    def tell(self, view: SearchView, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        # a repeat is no improvement: the program it repeats was told before it
        scored = [o.record for o in outcomes
                  if o.record is not None and o.record.success is not None and o.duplicate_of is None]
        if scored:
            self.parent = max(scored, key=lambda r: float(r.success)).id  # type: ignore[arg-type]
        return [{"event": "eureka", "parent": self.parent}]

    def to_dict(self) -> dict[str, Any]:
        return {"parent": self.parent}

    def load(self, state: dict[str, Any]) -> None:
        self.parent = state.get("parent")
