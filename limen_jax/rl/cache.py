"""What trainers share of their compiling: one :class:`~limen_jax.rl.core.Core` per shape
(its executables serve every batch of programs of that shape) and the executables of the
last few batches' kernels (a batch compiled ahead hands them to the trainer that runs it).

A :class:`CompileCache` owns both. Trainers not given one share :data:`PROCESS_CACHE`, so
that a search's batches, and its compile-ahead thread, reuse each other's compiles.
"""

from __future__ import annotations

import collections
import threading
import weakref
from collections.abc import Hashable, Sequence

from limen_jax.interface import Interface
from limen_jax.rl.compiled import CompileOnce
from limen_jax.rl.config import PPOConfig
from limen_jax.rl.core import Core
from limen_jax.task import Task
from limen_jax.xla_maps import on_pressure

Layout = tuple[int, int] | None  # a trainer's (devices along K, along S); None: unsharded


class CompileCache:
    """Cores by (task, config, width, layout, term slots) and kernel executables by
    (programs, width, layout[, core]); safe to use from several threads.

    kernels_kept: how many batches' kernel executables stay (least recently used go);
    cores_kept: how many shapes' cores stay (least recently used go). A search uses a few
    shapes; a process sweeping configs would otherwise keep every config's executables.
    Every cache lets go of everything when the process nears its memory-map cap
    (:mod:`limen_jax.xla_maps`).
    """

    def __init__(self, kernels_kept: int = 8, cores_kept: int = 8) -> None:
        self._cores: collections.OrderedDict[Hashable, Core] = collections.OrderedDict()
        self._cores_kept = int(cores_kept)
        self._kernels: collections.OrderedDict[Hashable, CompileOnce] = collections.OrderedDict()
        self._kernels_kept = int(kernels_kept)
        self._lock = threading.Lock()
        _LIVE.add(self)

    def core(self, task: Task, config: PPOConfig, width: int, layout: Layout, num_terms: int = 0) -> Core:
        """The Core of these shapes. A task is known by its class, name, horizon and
        parameters (what ``Task.with_params`` changes)."""
        ident = (type(task).__module__, type(task).__qualname__, task.name, int(task.episode_length),
                 tuple(sorted((k, repr(v)) for k, v in dict(task.params).items())))  # fmt: skip
        key = (ident, config, int(width), layout, int(num_terms))
        with self._lock:
            core = self._cores.pop(key, None) or Core(task, config, width, num_terms)
            self._cores[key] = core
            while len(self._cores) > self._cores_kept:
                self._cores.popitem(last=False)
            return core

    def kernels(
        self, interfaces: Sequence[Interface], width: int, layout: Layout, core: Core | None = None
    ) -> CompileOnce:
        """The shared executables of these programs' kernel (interfaces by identity), or
        with ``core`` of their fused rollout."""
        key = (tuple(interfaces), int(width), layout, core)
        with self._lock:
            memo = self._kernels.pop(key, None) or CompileOnce()
            self._kernels[key] = memo
            while len(self._kernels) > self._kernels_kept:
                self._kernels.popitem(last=False)
        return memo

    def clear(self) -> None:
        """Forget every compiled function, so the next batch of every shape compiles them
        again (benchmarks comparing cold runs in one process)."""
        with self._lock:
            self._cores.clear()
            self._kernels.clear()


def _clear_all() -> None:
    for cache in list(_LIVE):
        cache.clear()


_LIVE: weakref.WeakSet[CompileCache] = weakref.WeakSet()
on_pressure(_clear_all)
PROCESS_CACHE = CompileCache()
