"""Compiled executables by signature, shared by threads, and abstract calls.

The trainer compiles on first use. A batch can also be compiled ahead of time on another
thread (:meth:`limen_jax.rl.BatchTrainer.compile_ahead`) while the previous batch
trains; when the batch then runs and asks for a signature being compiled, it waits for
that compile instead of starting a second one.

An abstract call (``jax.ShapeDtypeStruct`` arguments, made while a trainer compiles
ahead) compiles and returns the outputs' shapes (:func:`out_shapes`) instead of
running: that is how a batch is compiled ahead without training it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import jax


class CompileOnce:
    """sig -> executable, each built once; ``get`` from several threads is safe."""

    def __init__(self) -> None:
        self._done: dict[Hashable, Any] = {}
        self._building: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()

    def __contains__(self, sig: Hashable) -> bool:
        return sig in self._done

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._done))

    def get(self, sig: Hashable, build: Callable[[], Any]) -> tuple[Any, float]:
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
                    exe = build()
                    self._done[sig] = exe
        finally:
            with self._lock:
                self._building.pop(sig, None)
        return exe, time.perf_counter() - start


def out_shapes(exe: Any) -> Any:
    """The outputs of a compiled executable as plain ``jax.ShapeDtypeStruct`` leaves
    (shape and dtype only, as a fresh array would be lowered)."""
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype), exe.out_info)
