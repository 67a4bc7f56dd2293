"""Search strategies and the seams the loop drives them through.

- :mod:`limen_jax.search.requests`: what a strategy asks for (programs, text,
  evaluations) and the :class:`Outcome` it is told;
- :mod:`limen_jax.search.base`: :class:`Strategy` (propose a batch from a read-only
  :class:`SearchView`, be told its outcomes), request builders;
- :mod:`limen_jax.search.sections`: a strategy's own section in a standard prompt;
- :mod:`limen_jax.search.strategy_registry`: strategies by name (entry points), their options;
- :mod:`limen_jax.search.strategies`: the shipped strategies, one module each
  (``map_elites``, ``greedy``, ``independent``, ``sparse`` in :mod:`~limen_jax.search.strategies.basic`);
- :mod:`limen_jax.search.evaluation`: evaluation kinds (``ppo``, ``retrain``, ...), the
  jobs as data and the evaluators that run them (in process, on Ray);
- :mod:`limen_jax.search.faults`: whose fault a failure is, and what stops a run.

The loop's own parts are in :mod:`limen_jax.run`.
"""
from __future__ import annotations

from limen_jax.search.base import (
    SearchView,
    Strategy,
    StrategyBase,
    ask_program,
    ask_text,
    blamed_on_program,
    evaluate,
)
from limen_jax.search.requests import EvalRequest, Outcome, ProgramRequest, Request, TextRequest
from limen_jax.search.strategies.basic import Greedy, Independent, MapElites, Sparse
from limen_jax.search.strategy_registry import make_strategy, register_strategy, strategy_names

__all__ = [
    "EvalRequest",
    "Greedy",
    "Independent",
    "MapElites",
    "Outcome",
    "ProgramRequest",
    "Request",
    "SearchView",
    "Sparse",
    "Strategy",
    "StrategyBase",
    "TextRequest",
    "ask_program",
    "ask_text",
    "blamed_on_program",
    "evaluate",
    "make_strategy",
    "register_strategy",
    "strategy_names",
]
