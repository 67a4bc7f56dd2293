"""The MAP-Elites grid as plain data: per island, one elite (id, fitness) per cell.

Descriptors are (observation dimension, reward AST node count). Bins are declared up
front and never rescaled from running min/max, so a cell means the same thing for the
whole run and across runs (DESIGN.md §3):

- observation dimension: 1-50, 51-100, ..., 401-450, 451-512 (10 bins);
- reward AST node count: uniform bins of ``ast_bin_width`` nodes, the last one open-ended.

Insertion rule: a program replaces a cell's elite only if its fitness is strictly
greater (compared in float32, the storage type); on a tie the incumbent stays, so an
archive never churns between equal programs and earlier discoveries keep their cell.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from limen_jax.archive.store import ProgramRecord

OBS_DIM_MAX = 512
# Lower edges of the observation-dimension bins, then one past the largest allowed size:
# bin i holds dims in [edges[i], edges[i + 1]).
DEFAULT_OBS_EDGES: tuple[int, ...] = (1, 51, 101, 151, 201, 251, 301, 351, 401, 451, OBS_DIM_MAX + 1)

Cell = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class GridSpec:
    """Declared bins.

    obs_edges: increasing lower edges of the observation bins plus a final exclusive
        upper edge; ``len(obs_edges) - 1`` bins.
    ast_bin_width: width of each reward-AST bin in nodes.
    num_ast_bins: number of reward-AST bins; the last one is open-ended
        ([width * (n - 1), inf)). The default covers 0-499 in steps of 25, then 475+.
    """

    obs_edges: tuple[int, ...] = DEFAULT_OBS_EDGES
    ast_bin_width: int = 25
    num_ast_bins: int = 20

    def __post_init__(self) -> None:
        edges = tuple(int(e) for e in self.obs_edges)
        object.__setattr__(self, "obs_edges", edges)
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
            raise ValueError(f"obs_edges must be strictly increasing with at least 2 entries: {edges}")
        if self.ast_bin_width < 1 or self.num_ast_bins < 1:
            raise ValueError("ast_bin_width and num_ast_bins must be >= 1")

    @property
    def num_obs_bins(self) -> int:
        return len(self.obs_edges) - 1

    @property
    def shape(self) -> tuple[int, int]:
        return self.num_obs_bins, self.num_ast_bins

    def obs_bin(self, obs_dim: int) -> int:
        """Bin of an observation dimension.

        Values outside the declared range are clamped into the first/last bin: programs
        are validated to 1..512 elsewhere, so only a task's default observation in the
        reward-only ablation (which may be larger) lands here, and there every candidate
        shares that one dimension anyway.
        """
        index = int(np.searchsorted(np.asarray(self.obs_edges), obs_dim, side="right")) - 1
        return min(max(index, 0), self.num_obs_bins - 1)

    def ast_bin(self, reward_ast_size: int) -> int:
        if reward_ast_size < 0:
            raise ValueError(f"reward AST size must be >= 0, got {reward_ast_size}")
        return min(reward_ast_size // self.ast_bin_width, self.num_ast_bins - 1)

    def cell(self, obs_dim: int, reward_ast_size: int) -> Cell:
        return self.obs_bin(obs_dim), self.ast_bin(reward_ast_size)

    def cell_of(self, record: ProgramRecord) -> Cell:
        """The record's cell. A missing reward AST size counts as 0 (the sparse default reward)."""
        if record.obs_dim is None:
            raise ValueError(f"program {record.id} has no observation dimension; it cannot enter the grid")
        return self.cell(record.obs_dim, record.reward_ast_size or 0)

    def obs_labels(self) -> list[str]:
        """Axis labels for plots, e.g. "1-50", ..., "451+": the last bin is open-ended
        (:meth:`obs_bin` clamps larger observations into it)."""
        e, n = self.obs_edges, self.num_obs_bins
        return [f"{e[i]}-{e[i + 1] - 1}" for i in range(n - 1)] + [f"{e[n - 1]}+"]

    def ast_labels(self) -> list[str]:
        w, n = self.ast_bin_width, self.num_ast_bins
        return [f"{i * w}-{(i + 1) * w - 1}" for i in range(n - 1)] + [f"{(n - 1) * w}+"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "obs_edges": list(self.obs_edges),
            "ast_bin_width": self.ast_bin_width,
            "num_ast_bins": self.num_ast_bins,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GridSpec:
        return cls(tuple(data["obs_edges"]), int(data["ast_bin_width"]), int(data["num_ast_bins"]))


@dataclasses.dataclass
class Grid:
    """Elites of every island.

    fitness: (num_islands, num_obs_bins, num_ast_bins) float32, -inf where empty.
    ids: same shape, dtype object, the elite's program id or None where empty.
    """

    spec: GridSpec
    fitness: np.ndarray
    ids: np.ndarray

    @classmethod
    def empty(cls, spec: GridSpec, num_islands: int) -> Grid:
        if num_islands < 1:
            raise ValueError("num_islands must be >= 1")
        shape = (num_islands, *spec.shape)
        return cls(spec, np.full(shape, -np.inf, np.float32), np.full(shape, None, object))

    @property
    def num_islands(self) -> int:
        return int(self.fitness.shape[0])

    def place(self, island: int, cell: Cell, program_id: str, fitness: float) -> bool:
        """Put ``program_id`` in ``cell`` of ``island`` if strictly better than the incumbent."""
        value = np.float32(fitness)
        if not np.isfinite(value):
            raise ValueError(f"program {program_id}: fitness must be finite, got {fitness}")
        index = (island, *cell)
        if not value > self.fitness[index]:  # tie or worse: the incumbent stays
            return False
        self.fitness[index] = value
        self.ids[index] = program_id
        return True

    def insert(self, island: int, record: ProgramRecord, fitness: float | None = None) -> bool:
        """Insert an evaluated record into its cell; ``fitness`` defaults to ``record.success``."""
        value = record.success if fitness is None else fitness
        if value is None:
            raise ValueError(f"program {record.id} has no fitness; only evaluated programs enter the grid")
        return self.place(island, self.spec.cell_of(record), record.id, value)

    @property
    def mask(self) -> np.ndarray:
        """(num_islands, num_obs_bins, num_ast_bins) bool, True where a cell holds an elite."""
        return np.array([pid is not None for pid in self.ids.flat], bool).reshape(self.ids.shape)

    def occupied(self, island: int | None = None) -> list[tuple[int, int, int]]:
        """(island, obs_bin, ast_bin) of occupied cells in C order (island-major)."""
        mask = self.mask
        if island is not None:
            mask = mask & (np.arange(self.num_islands) == island)[:, None, None]
        return [(int(i), int(o), int(a)) for i, o, a in np.argwhere(mask)]

    def best(self, island: int) -> tuple[Cell, str, float] | None:
        """The island's best elite: (cell, id, fitness); ties go to the first cell in C order."""
        if not self.mask[island].any():
            return None
        flat = int(np.argmax(self.fitness[island]))
        o, a = np.unravel_index(flat, self.spec.shape)
        cell = (int(o), int(a))
        return cell, str(self.ids[island][cell]), float(self.fitness[island][cell])

    def to_dict(self) -> dict[str, Any]:
        # -inf is not JSON; empty cells are None in both arrays. float(np.float32) is exact,
        # so float32(fitness) round-trips bit for bit.
        fit = [
            [
                [
                    None if self.ids[i, o, a] is None else float(self.fitness[i, o, a])
                    for a in range(self.spec.num_ast_bins)
                ]
                for o in range(self.spec.num_obs_bins)
            ]
            for i in range(self.num_islands)
        ]
        return {"spec": self.spec.to_dict(), "fitness": fit, "ids": self.ids.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Grid:
        spec = GridSpec.from_dict(data["spec"])
        grid = cls.empty(spec, len(data["ids"]))
        for i, plane in enumerate(data["ids"]):
            for o, row in enumerate(plane):
                for a, pid in enumerate(row):
                    if pid is not None:
                        grid.ids[i, o, a] = pid
                        grid.fitness[i, o, a] = np.float32(data["fitness"][i][o][a])
        return grid
