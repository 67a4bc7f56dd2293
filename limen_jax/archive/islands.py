"""Islands: K sub-populations on one grid, and ring migration between them.

Islands slow the takeover of the whole archive by one early lineage; migration lets a
strong program seed the next island now and then so islands do not stay stuck.
"""

from __future__ import annotations

import dataclasses

from limen_jax.archive.grid import Cell, Grid


@dataclasses.dataclass(frozen=True)
class Migration:
    """One program copied from ``source`` to ``target`` (the next island on the ring)."""

    source: int
    target: int
    program_id: str
    cell: Cell
    fitness: float
    inserted: bool


def should_migrate(iteration: int, interval: int) -> bool:
    """Migrate after every ``interval`` iterations (never at iteration 0; interval <= 0 disables)."""
    return interval > 0 and iteration > 0 and iteration % interval == 0


def migrate(grid: Grid) -> list[Migration]:
    """Ring migration: each island's best goes to island ``(i + 1) % K``, same cell.

    The bests are taken before any insertion so that one round moves a program at most
    one step along the ring. The target keeps the usual rule: the migrant replaces the
    cell's elite only if strictly better. Mutates ``grid``; returns what happened.
    """
    k = grid.num_islands
    if k < 2:
        return []
    bests = [grid.best(i) for i in range(k)]
    moves = []
    for source, best in enumerate(bests):
        if best is None:
            continue
        cell, program_id, fitness = best
        target = (source + 1) % k
        inserted = grid.place(target, cell, program_id, fitness)
        moves.append(Migration(source, target, program_id, cell, fitness, inserted))
    return moves
