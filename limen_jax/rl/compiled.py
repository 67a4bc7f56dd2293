"""Compiled executables by signature, shared by threads.

The trainer compiles on first use. A batch can also be compiled ahead of time on another
thread (:meth:`limen_jax.rl.BatchTrainer.compile_ahead`) while the previous batch
trains; when the batch then runs and asks for a signature being compiled, it waits for
that compile instead of starting a second one. Compiling ahead follows the outputs'
shapes from one compiled function to the next (:func:`out_shapes`), running nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

import jax

from limen_jax.xla_maps import make_room

Wrap = Callable[..., Callable[..., Any]]  # wraps a function before it is jitted, e.g. a shard_map: (fn, nargs) -> fn
Exe = TypeVar("Exe")


class CompileOnce(Generic[Exe]):
    """sig -> executable, each built once; ``get`` from several threads is safe."""

    def __init__(self) -> None:
        self._done: dict[Hashable, Exe] = {}
        self._building: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()

    def __contains__(self, sig: Hashable) -> bool:
        return sig in self._done

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._done))

    def get(self, sig: Hashable, build: Callable[[], Exe]) -> tuple[Exe, float]:
        """The executable for ``sig`` (``build()`` on first use) and the seconds this call
        spent on it: building, or waiting for another thread's build (0 when it was done)."""
        exe = self._done.get(sig)
        if exe is not None:
            return exe, 0.0
        start = time.perf_counter()
        with self._lock:
            lock = self._building.setdefault(sig, threading.Lock())
        try:
            with lock:
                exe = self._done.get(sig)
                if exe is None:
                    make_room()  # XLA crashes instead of failing past the process's memory-map cap
                    exe = build()
                    self._done[sig] = exe
        finally:
            with self._lock:
                self._building.pop(sig, None)
        return exe, time.perf_counter() - start


def out_shapes(exe: jax.stages.Compiled) -> Any:
    """The outputs of a compiled executable as plain ``jax.ShapeDtypeStruct`` leaves
    (shape and dtype only, as a fresh array would be lowered)."""
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype), exe.out_info)
