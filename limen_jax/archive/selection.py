"""Parent selection and inspirations over the grid. Host randomness only through a passed Generator."""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from limen_jax.archive.grid import Cell, Grid


@dataclasses.dataclass(frozen=True)
class Selection:
    """A chosen parent: where it sits and which rule picked it."""

    program_id: str
    island: int
    cell: Cell
    rule: Literal["global", "island"]


def selection_weights(fitness: np.ndarray, epsilon: float) -> np.ndarray:
    """Fitness-proportional probabilities, float64, summing to 1.

    ``epsilon`` keeps zero-fitness elites selectable (early in a run most programs score 0).
    Negative fitness (a pluggable fitness with penalties) is shifted so the minimum is 0;
    for non-negative fitness the weights are exactly ``fitness + epsilon``.
    """
    f = np.asarray(fitness, np.float64)
    w = f - min(0.0, float(f.min())) + epsilon
    return w / w.sum()


def select_parent(
    grid: Grid, rng: np.random.Generator, island: int, p_global: float = 0.7, epsilon: float = 1e-3
) -> Selection | None:
    """Choose a parent for a candidate of ``island``; None when the whole grid is empty.

    Draws, in this order: one uniform u; if u < p_global (or the island is empty) one
    fitness-proportional choice over every occupied cell of every island (a program
    present on several islands counts once per cell), else one uniform integer over the
    island's occupied cells. Cells are enumerated in C order (island, obs bin, AST bin),
    so the same grid and Generator state always give the same parent.
    """
    everywhere = grid.occupied()
    if not everywhere:
        return None
    u = rng.random()
    local = grid.occupied(island)
    if u < p_global or not local:
        p = selection_weights(np.array([grid.fitness[c] for c in everywhere]), epsilon)
        chosen, rule = everywhere[int(rng.choice(len(everywhere), p=p))], "global"
    else:
        chosen, rule = local[int(rng.integers(len(local)))], "island"
    i, o, a = chosen
    return Selection(str(grid.ids[chosen]), i, (o, a), rule)  # type: ignore[arg-type]


def inspirations(grid: Grid, n: int, exclude_cell: Cell | None = None, exclude_ids: tuple[str, ...] = ()) -> list[str]:
    """Ids of the best programs from cells other than ``exclude_cell`` (the parent's), best first.

    For each (obs bin, AST bin) cell the best elite over all islands is taken, so the list
    spans distinct niches; ids are unique and ``exclude_ids`` are skipped. Ties keep C order.
    Deterministic: no randomness.
    """
    best = np.max(grid.fitness, axis=0)  # (obs, ast)
    best_island = np.argmax(grid.fitness, axis=0)
    cells = [(int(o), int(a)) for o, a in np.argwhere(np.isfinite(best))]
    cells = [c for c in cells if c != exclude_cell]
    cells.sort(key=lambda c: -float(best[c]))  # stable: ties stay in C order
    out: list[str] = []
    for o, a in cells:
        pid = str(grid.ids[int(best_island[o, a]), o, a])
        if pid not in out and pid not in exclude_ids:
            out.append(pid)
        if len(out) >= n:
            break
    return out
