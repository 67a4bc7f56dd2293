"""Search strategies and the seams the loop drives them through.

- :mod:`limen_jax.search.requests`: what a strategy asks for (programs, text,
  evaluations) and the :class:`Outcome` it is told;
- :mod:`limen_jax.search.base`: :class:`Strategy` (propose a batch from a read-only
  :class:`SearchView`, be told its outcomes), request builders;
- :mod:`limen_jax.search.registry`: strategies by name (entry points), their options;
- :mod:`limen_jax.search.strategies`: ``map_elites``, ``greedy``, ``independent``, ``sparse``;
- :mod:`limen_jax.search.evaluations`: evaluation kinds (``ppo``, ``retrain``, ...);
- :mod:`limen_jax.search.evaluator`: :class:`Evaluator` (submit a job, get a future of
  its results), the in-process one by default; :mod:`limen_jax.search.jobs` the data;
- :mod:`limen_jax.search.faults`: whose fault a failure is, and what stops a run;
- the loop's own parts (:mod:`limen_jax.loop`): :mod:`~limen_jax.search.batch_jobs`,
  :mod:`~limen_jax.search.run_demos`, :mod:`~limen_jax.search.interrupts`,
  :mod:`~limen_jax.search.outputs`, :mod:`~limen_jax.search.pipeline`.
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
from limen_jax.search.registry import make_strategy, register_strategy, strategy_names
from limen_jax.search.requests import EvalRequest, Outcome, ProgramRequest, Request, TextRequest
from limen_jax.search.strategies import Greedy, Independent, MapElites, Sparse

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
