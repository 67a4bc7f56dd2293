"""MAP-Elites archive: program store, island grid with fixed bins, migration, parent selection."""

from limen_jax.archive.archive import Archive, ArchiveConfig
from limen_jax.archive.grid import DEFAULT_OBS_EDGES, OBS_DIM_MAX, Grid, GridSpec
from limen_jax.archive.islands import Migration, migrate, should_migrate
from limen_jax.archive.selection import Selection, inspirations, select_parent, selection_weights
from limen_jax.archive.store import ProgramRecord, ProgramStore, program_id

__all__ = [
    "DEFAULT_OBS_EDGES",
    "OBS_DIM_MAX",
    "Archive",
    "ArchiveConfig",
    "Grid",
    "GridSpec",
    "Migration",
    "ProgramRecord",
    "ProgramStore",
    "Selection",
    "inspirations",
    "migrate",
    "program_id",
    "select_parent",
    "selection_weights",
    "should_migrate",
]
