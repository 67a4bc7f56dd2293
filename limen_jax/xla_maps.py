"""The process's memory-map budget, which XLA's CPU executables spend.

Every loaded CPU executable (compiled or read from the persistent cache) maps its code
in a few hundred separate memory regions, and Linux caps the regions of one process at
``vm.max_map_count`` (65530 by default). XLA does not survive reaching the cap: it logs
"Cannot allocate memory" and the process dies of a segmentation fault. A search frees
each batch's executables and stays far below it (about 8,000 regions in a long run), but
one process that trains many shapes (a notebook sweeping configs, a test session) keeps
every shape's executables in its compile caches and can reach it.

:func:`make_room` runs before the trainer builds an executable: past half the cap it
empties the caches that hold executables (the trainer's, registered with
:func:`on_pressure`, and JAX's); if that does not bring the process back under nine
tenths of the cap, it raises :class:`ExecutableMapsExhausted`, a ``MemoryError`` (the
machinery's failure: a search stops resumably), instead of letting XLA crash.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

import jax

# Fractions of the cap: past RELEASE the caches are emptied; past REFUSE nothing new loads.
RELEASE = 0.5
REFUSE = 0.9
_MAPS = "/proc/self/maps"
_LIMIT = "/proc/sys/vm/max_map_count"

_releasers: list[Callable[[], None]] = []
_lock = threading.Lock()


class ExecutableMapsExhausted(MemoryError):
    """The process is too near ``vm.max_map_count`` to load another XLA executable."""


def maps_in_use() -> int:
    """The memory regions this process has mapped now (0 where /proc is not there)."""
    try:
        with open(_MAPS, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def map_limit() -> int | None:
    """``vm.max_map_count``, or None where it cannot be read (no cap known, none enforced)."""
    try:
        with open(_LIMIT, "rb") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def on_pressure(release: Callable[[], None]) -> None:
    """Call ``release`` (it should drop cached executables) when the process nears the cap."""
    with _lock:
        _releasers.append(release)


def make_room(limit: int | None = None) -> None:
    """Before loading an executable: empty the executable caches when past
    :data:`RELEASE` of ``limit`` (default :func:`map_limit`), and raise
    :class:`ExecutableMapsExhausted` when still past :data:`REFUSE` after that."""
    limit = map_limit() if limit is None else limit
    if not limit:
        return
    used = maps_in_use()
    if used <= RELEASE * limit:
        return
    with _lock:
        releasers = list(_releasers)
    for release in releasers:
        release()
    jax.clear_caches()
    gc.collect()
    used = maps_in_use()
    if used > REFUSE * limit:
        raise ExecutableMapsExhausted(
            f"this process maps {used} memory regions of the {limit} the system allows (vm.max_map_count), "
            "and XLA crashes when it loads an executable past that; the executables still held "
            "(trainers or results kept alive) cannot be freed: let go of them, run fewer trainings in "
            "one process, or raise the cap (sysctl -w vm.max_map_count=262144)"
        )
