"""Search strategies and the seams the loop drives them through.

- :mod:`limen_jax.search.base`: :class:`Strategy` (propose a batch from a read-only
  :class:`SearchView`, be told its :class:`Outcome` s), :class:`Proposal`;
- :mod:`limen_jax.search.strategies`: ``map_elites``, ``greedy``, ``independent``;
- :mod:`limen_jax.search.evaluator`: :class:`Evaluator` (submit a batch of interfaces,
  get a future of per-candidate results), the in-process batched cascade by default;
- :mod:`limen_jax.search.faults`: whose fault a failure is, and what stops a run.
"""

from __future__ import annotations

from limen_jax.search.base import Outcome, Proposal, SearchView, Strategy, blamed_on_program, make_proposal
from limen_jax.search.strategies import STRATEGIES, Greedy, Independent, MapElites, make_strategy

__all__ = [
    "STRATEGIES",
    "Greedy",
    "Independent",
    "MapElites",
    "Outcome",
    "Proposal",
    "SearchView",
    "Strategy",
    "blamed_on_program",
    "make_proposal",
    "make_strategy",
]
