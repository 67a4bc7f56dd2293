"""The strategies that ship with the loop (registered by entry point, like any plug-in).

- ``map_elites`` (LIMEN): per child, a parent drawn by the archive (70 % fitness-
  proportional over all elites, 30 % uniform within the batch's island), the best
  programs, programs from other cells and recent program failures shown; island bests
  migrate around the ring every ``migration_interval`` iterations.
- ``greedy``: always mutate the best program found so far.
- ``independent`` (the paper's independent-sampling baseline): every child from
  scratch; the prompt shows nothing from the archive, failures included.
- ``sparse`` (the paper's sparse baseline): one generation, the task's default
  observation and sparse reward, no LLM.

Their only memory is the archive, which the loop checkpoints, so they keep no state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from limen_jax.archive import ProgramRecord, program_id
from limen_jax.search.base import SearchView, StrategyBase, ask_program
from limen_jax.search.requests import Outcome, ProgramRequest, Request

NUM_SHOWN = 3  # top programs, other-cell programs and failures shown per prompt


class _ArchiveStrategy(StrategyBase):
    """Shared shape: one island per batch (round-robin by iteration), children asked
    independently, the parent chosen by :meth:`parent`."""

    def parent(self, view: SearchView, rng: np.random.Generator, island: int) -> ProgramRecord | None:
        raise NotImplementedError

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        archive = view.archive
        island = view.iteration % archive.config.num_islands
        out: list[Request] = []
        for k in range(view.candidates):
            parent = self.parent(view, rng, island) if view.iteration > 0 else None
            diverse = archive.inspirations(NUM_SHOWN, parent) if parent else []
            out.append(ask_program(
                view, rng, k, island, parent=parent, diverse=diverse,
                top=archive.store.top_k(NUM_SHOWN) if parent else [],
                failures=view.program_failures(NUM_SHOWN),
            ))
        return out

    def tell(self, view: SearchView, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        moves = view.archive.maybe_migrate(view.iteration)
        return [{"event": "migrate", "moves": [dataclasses.asdict(m) for m in moves]}] if moves else []


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

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        island = view.iteration % view.archive.config.num_islands
        return [ask_program(view, rng, k, island, parent=None) for k in range(view.candidates)]


class Sparse(StrategyBase):
    """The task's default interface, trained once: the baseline every search must beat."""

    name = "sparse"
    lookahead = 0
    max_iterations = 0
    asks_llm = False

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        return [ProgramRequest(
            id=program_id(view.iteration, 0), iteration=view.iteration, island=0, operator="default",
            parent_ids=(), context_ids=(), system="", user="", sections=(), rng_seed=0, source="default",
        )]
