"""Search strategies: how the loop picks the parent of the next candidate.

- ``map_elites`` (LIMEN): 70 % fitness-proportional over the whole archive, 30 % uniform
  within the candidate's island (the archive's own selection).
- ``greedy`` (Eureka-style): always mutate the best program found so far.
- ``independent`` (the paper's independent-sampling baseline): every candidate is
  written from scratch, with no parent and no archive feedback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

ParentPicker = Callable[[Any, np.random.Generator, int], Any]


def _map_elites(archive: Any, rng: np.random.Generator, island: int) -> Any:
    return archive.select_parent(rng, island)


def _greedy(archive: Any, rng: np.random.Generator, island: int) -> Any:
    return archive.store.best()


def _independent(archive: Any, rng: np.random.Generator, island: int) -> Any:
    return None


STRATEGIES: dict[str, ParentPicker] = {
    "map_elites": _map_elites,
    "greedy": _greedy,
    "independent": _independent,
}


def parent_picker(name: str) -> ParentPicker:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown search strategy {name!r}; expected one of {sorted(STRATEGIES)}") from None
