"""The three strategies that ship with the loop, ported to the :class:`Strategy` protocol.

- ``map_elites`` (LIMEN): per child, a parent drawn by the archive (70 % fitness-
  proportional over all elites, 30 % uniform within the batch's island), the best
  programs, programs from other cells and recent program failures shown; island bests
  migrate around the ring every ``migration_interval`` iterations.
- ``greedy`` (Eureka-style): always mutate the best program found so far.
- ``independent`` (the paper's independent-sampling baseline): every child from
  scratch; the prompt shows nothing from the archive, failures included.

Their only state is the archive, which the loop checkpoints, so ``to_dict`` is empty.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from limen_jax.archive import ProgramRecord
from limen_jax.search.base import Outcome, Proposal, SearchView, make_proposal

NUM_SHOWN = 3  # top programs, other-cell programs and failures shown per prompt


class _ArchiveStrategy:
    """Shared shape: one island per batch (round-robin by iteration), children asked
    independently, the parent chosen by :meth:`parent`."""

    name = "base"

    def parent(self, view: SearchView, rng: np.random.Generator, island: int) -> ProgramRecord | None:
        raise NotImplementedError

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Proposal]:
        archive = view.archive
        island = view.iteration % archive.config.num_islands
        out = []
        for k in range(view.candidates):
            parent = self.parent(view, rng, island) if view.iteration > 0 else None
            diverse = archive.inspirations(NUM_SHOWN, parent) if parent else []
            out.append(make_proposal(
                view, rng, k, island, parent=parent, diverse=diverse,
                top=archive.store.top_k(NUM_SHOWN) if parent else [],
                failures=view.program_failures(NUM_SHOWN),
            ))
        return out

    def tell(self, view: SearchView, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        moves = view.archive.maybe_migrate(view.iteration)
        return [{"event": "migrate", "moves": [dataclasses.asdict(m) for m in moves]}] if moves else []

    def to_dict(self) -> dict[str, Any]:
        return {}

    def done(self, view: SearchView) -> str | None:
        return None


class MapElites(_ArchiveStrategy):
    name = "map_elites"

    def parent(self, view: SearchView, rng: np.random.Generator, island: int) -> ProgramRecord | None:
        return view.archive.select_parent(rng, island)


class Greedy(_ArchiveStrategy):
    name = "greedy"

    def parent(self, view: SearchView, rng: np.random.Generator, island: int) -> ProgramRecord | None:
        return view.archive.store.best()


class Independent(_ArchiveStrategy):
    name = "independent"

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Proposal]:
        island = view.iteration % view.archive.config.num_islands
        return [make_proposal(view, rng, k, island, parent=None) for k in range(view.candidates)]


STRATEGIES: dict[str, type[_ArchiveStrategy]] = {s.name: s for s in (MapElites, Greedy, Independent)}


def make_strategy(name: str, state: dict[str, Any] | None = None) -> Any:
    """The strategy called ``name``, restored from its ``to_dict`` state if given."""
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown search strategy {name!r}; expected one of {sorted(STRATEGIES)}") from None
    return cls()
