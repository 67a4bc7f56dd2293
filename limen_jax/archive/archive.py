"""The archive facade: program store + island grid + selection state, serialisable to JSON.

Typical use by the evolution loop::

    island = iteration % num_islands                      # the strategy's choice
    parent = archive.select_parent(rng, island)          # None while the grid is empty
    others = archive.inspirations(3, parent)
    ...  # mutate, validate, train -> record (record.island = island)
    archive.add(record)                                   # store always; grid if evaluated
    archive.maybe_migrate(iteration)
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from limen_jax.archive.grid import Grid, GridSpec
from limen_jax.archive.islands import Migration, migrate, should_migrate
from limen_jax.archive.selection import Selection, inspirations, select_parent
from limen_jax.archive.store import ProgramRecord, ProgramStore
from limen_jax.fields import reject_unknown

FORMAT_VERSION = 1


MAX_ISLANDS = 1_000  # as limen_jax.run.reader reads a saved grid
MAX_GRID_CELLS = 1_000_000  # islands x observation bins x reward-AST bins, made up front


@dataclasses.dataclass(frozen=True)
class ArchiveConfig:
    """num_islands: K; migration_interval: M iterations between ring migrations (0 disables);
    p_global: probability of global fitness-proportional parent selection (else uniform
    within the island); epsilon: added to fitness in the proportional weights; grid: bins."""

    num_islands: int = 3
    migration_interval: int = 5
    p_global: float = 0.7
    epsilon: float = 1e-3
    grid: GridSpec = GridSpec()

    def __post_init__(self) -> None:
        if not 1 <= self.num_islands <= MAX_ISLANDS:  # each island is a grid of cells, made up front
            raise ValueError(f"num_islands must be from 1 to {MAX_ISLANDS}, got {self.num_islands}")
        cells = self.num_islands * (len(self.grid.obs_edges) - 1) * self.grid.num_ast_bins
        if cells > MAX_GRID_CELLS:
            raise ValueError(f"the grid would have {cells} cells (islands x observation bins x reward-AST bins), "
                             f"more than {MAX_GRID_CELLS}")
        if not 0.0 <= self.p_global <= 1.0:
            raise ValueError(f"p_global must be in [0, 1], got {self.p_global}")
        if self.epsilon <= 0.0:
            raise ValueError("epsilon must be > 0 so that zero-fitness elites stay selectable")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "grid": self.grid.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArchiveConfig:
        reject_unknown(cls, data)
        grid = GridSpec.from_dict(data["grid"]) if "grid" in data else GridSpec()
        return cls(**{**data, "grid": grid})


class Archive:
    """MAP-Elites archive with islands. The store is the source of truth; the grid holds ids."""

    def __init__(self, config: ArchiveConfig | None = None, store: ProgramStore | None = None) -> None:
        self.config = config or ArchiveConfig()
        self.store = store or ProgramStore()
        self.grid = Grid.empty(self.config.grid, self.config.num_islands)
        for record in self.store:
            if record.evaluated:
                self.grid.insert(record.island, record)

    # --- adding -----------------------------------------------------------------------
    def add(self, record: ProgramRecord, fitness: float | None = None) -> bool:
        """Store ``record``; if it is evaluated, offer it to its island's cell.

        fitness: the value the grid compares (default ``record.success``; pass another for
        a pluggable fitness). Returns True when the record became its cell's elite.
        """
        if not 0 <= record.island < self.config.num_islands:
            raise ValueError(f"program {record.id}: island {record.island} out of range")
        if record.evaluated:
            self.config.grid.cell_of(record)  # fail before storing if it has no descriptors
        self.store.add(record)
        if not record.evaluated:
            return False
        return self.grid.insert(record.island, record, fitness)

    # --- selection --------------------------------------------------------------------
    def select(self, rng: np.random.Generator, island: int) -> Selection | None:
        return select_parent(self.grid, rng, island, self.config.p_global, self.config.epsilon)

    def select_parent(self, rng: np.random.Generator, island: int) -> ProgramRecord | None:
        """A parent for a candidate of ``island`` (see :func:`select_parent`); None if empty."""
        chosen = self.select(rng, island)
        return None if chosen is None else self.store.get(chosen.program_id)

    def inspirations(self, n: int, parent: ProgramRecord | None = None) -> list[ProgramRecord]:
        """Up to ``n`` best programs from cells other than the parent's, best first."""
        cell = self.config.grid.cell_of(parent) if parent is not None and parent.evaluated else None
        exclude = (parent.id,) if parent is not None else ()
        return [self.store.get(i) for i in inspirations(self.grid, n, cell, exclude)]

    # --- islands ----------------------------------------------------------------------
    def migrate(self) -> list[Migration]:
        return migrate(self.grid)

    def maybe_migrate(self, iteration: int) -> list[Migration]:
        """Ring-migrate when ``iteration`` is a positive multiple of the migration interval."""
        return self.migrate() if should_migrate(iteration, self.config.migration_interval) else []

    # --- views ------------------------------------------------------------------------
    def elites(self, island: int | None = None) -> list[ProgramRecord]:
        """Distinct elite records (of one island or all), in C order of their first cell."""
        ids = dict.fromkeys(str(self.grid.ids[c]) for c in self.grid.occupied(island))
        return [self.store.get(i) for i in ids]

    def best(self) -> ProgramRecord | None:
        """The elite with the highest grid fitness (first in C order on ties)."""
        if not self.grid.mask.any():
            return None
        index = np.unravel_index(int(np.argmax(self.grid.fitness)), self.grid.fitness.shape)
        return self.store.get(str(self.grid.ids[index]))

    def occupancy(self) -> np.ndarray:
        """(num_islands, num_obs_bins, num_ast_bins) bool: which cells hold an elite."""
        return self.grid.mask.copy()

    def coverage(self) -> float:
        """Fraction of (obs bin, AST bin) cells occupied on at least one island."""
        return float(self.grid.mask.any(axis=0).mean())

    def heatmap(self, island: int | None = None) -> np.ndarray:
        """(num_obs_bins, num_ast_bins) float32 fitness for plotting; NaN where empty.

        ``island=None`` takes the best over islands. Rows follow ``config.grid.obs_labels()``,
        columns ``config.grid.ast_labels()``.
        """
        fit = self.grid.fitness if island is None else self.grid.fitness[island : island + 1]
        best = fit.max(axis=0)
        return np.where(np.isfinite(best), best, np.nan).astype(np.float32)

    # --- persistence ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "config": self.config.to_dict(),
            "grid": self.grid.to_dict(),
            "programs": self.store.to_list(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Archive:
        """Rebuild exactly: the grid is restored as saved (not re-derived from the store),
        so migrations and tie outcomes survive a resume."""
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"archive format version {data.get('version')!r}; expected {FORMAT_VERSION}")
        archive = cls(ArchiveConfig.from_dict(data["config"]))
        archive.store = ProgramStore.from_list(data["programs"])
        archive.grid = Grid.from_dict(data["grid"])
        if archive.grid.spec != archive.config.grid or archive.grid.num_islands != archive.config.num_islands:
            raise ValueError("archive grid does not match its config")
        missing = {str(p) for p in archive.grid.ids[archive.grid.mask]} - {r.id for r in archive.store}
        if missing:
            raise ValueError(f"grid refers to programs missing from the store: {sorted(missing)}")
        return archive

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> Archive:
        return cls.from_dict(json.loads(text))
