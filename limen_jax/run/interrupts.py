"""SIGINT and SIGTERM during a run (the CLI's handlers): the first stops the run at the
next safe point, a second at once. Both raise :class:`~limen_jax.search.faults.Interrupted`
in the main thread; the loop records the stop and ends resumably."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from limen_jax.search.faults import Interrupted


class Interrupts:
    """The run's signal handlers and what they caught. handle: install them while the run
    runs (the CLI's runs; a library call leaves the process's own)."""

    def __init__(self, handle: bool) -> None:
        self.handle = handle
        self.signum: int | None = None  # the first signal caught
        self.stopping = False  # an interrupt has been caught and is being recorded
        self._critical = 0  # > 0 while a batch is being recorded and checkpointed

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.stopping:  # the stop is being recorded: it ends the run in a moment anyway
            return
        if self.signum is not None:
            raise Interrupted(signum, now=True)
        self.signum = signum
        print(f"\n{signal.Signals(signum).name}: stopping at the next safe point (again to stop at once)",
              file=sys.stderr, flush=True)
        if self._critical == 0:  # asking, checking, compiling, training: the batch in flight is abandoned
            raise Interrupted(signum)

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Recording and checkpointing a batch finishes before a first signal takes effect."""
        self._critical += 1
        try:
            yield
        finally:
            self._critical -= 1
        if self.signum is not None and self._critical == 0:
            raise Interrupted(self.signum)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """The handlers in place (when ``handle``, in the main thread: the only one that
        may set them), the previous ones back afterwards."""
        previous = {}
        if self.handle and threading.current_thread() is threading.main_thread():
            previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, handler in previous.items():  # after an interrupt the process is on its way out
                signal.signal(s, handler if self.signum is None else signal.SIG_IGN)
