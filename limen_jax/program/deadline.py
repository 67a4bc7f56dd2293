"""Wall-clock and memory limits for running untrusted Python code in this process.

:func:`deadline` raises :class:`Deadline` (time) or :class:`MemoryLimit` (resident
memory growth) *inside* the code it guards: through SIGALRM ticks on the main thread,
through a ``sys.settrace`` hook on other threads. Only Python code can be interrupted;
a single long C call (an XLA compile) runs to its end, which is why checks.py compiles
and runs in worker threads with a join timeout instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

from limen_jax.program.errors import PROGRAM_FILENAME


class Deadline(BaseException):
    """Raised into the program when its time is up.

    A BaseException so that ``except Exception`` handlers inside JAX do not swallow it.
    """


class MemoryLimit(BaseException):
    """Raised into the program when the process grew by more than its memory allowance."""


# --- deadlines ------------------------------------------------------------------------

_TICK = 0.1  # seconds between clock and memory checks


@contextlib.contextmanager
def deadline(seconds: float, max_growth_bytes: int | None = None) -> Iterator[None]:
    """Raise :class:`Deadline` inside the block once ``seconds`` of wall-clock time pass,
    and :class:`MemoryLimit` once the process's resident memory grows by more than
    ``max_growth_bytes`` (checked every 0.1 s; Linux only).

    Interrupts Python code only: a single long C call (an XLA compile) finishes first,
    which is why compiling and running happen in worker threads (see checks.py).
    Nested use is allowed; an outer timer (e.g. pytest-timeout's) is restored after.
    """
    end = time.monotonic() + seconds
    baseline = _rss_bytes() if max_growth_bytes is not None else None
    limit = None if baseline is None or max_growth_bytes is None else baseline + max_growth_bytes
    # The first limit hit is sticky: if its exception lands in a finaliser or a gc callback
    # (which swallow it), the next check raises the same one rather than another kind.
    tripped: list[type[BaseException]] = []

    def check() -> None:
        if not tripped:
            if time.monotonic() >= end:
                tripped.append(Deadline)
            elif limit is not None and (_rss_bytes() or 0) > limit:
                tripped.append(MemoryLimit)
        if tripped:
            raise tripped[0]()

    on_main = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    with _quiet_unraisable(), _alarm(check) if on_main else _settrace(check):
        yield


@contextlib.contextmanager
def _quiet_unraisable() -> Iterator[None]:
    """Do not print our own exceptions when a finaliser swallows them (they are raised again)."""
    previous = sys.unraisablehook

    def hook(info: Any) -> None:
        if not isinstance(info.exc_value, Deadline | MemoryLimit):
            previous(info)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _rss_bytes() -> int | None:
    """Resident set size of this process (Linux /proc), or None where unavailable."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


try:
    _PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):
    _PAGE_SIZE = 4096


@contextlib.contextmanager
def _alarm(check: Callable[[], None]) -> Iterator[None]:
    armed = [True]

    def on_alarm(signum: int, frame: types.FrameType | None) -> None:
        if armed[0]:
            check()

    start = time.monotonic()
    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    old_delay, old_interval = signal.getitimer(signal.ITIMER_REAL)
    # Ticks keep coming: a Deadline swallowed somewhere is raised again at the next one.
    signal.setitimer(signal.ITIMER_REAL, _TICK, _TICK)
    try:
        try:
            yield
        finally:
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        # Twice, in case a tick landed at the start of the inner finally.
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay > 0:
            remaining = old_delay - (time.monotonic() - start)
            signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-3), old_interval)


@contextlib.contextmanager
def _settrace(check: Callable[[], None]) -> Iterator[None]:
    """Off the main thread: check on function calls, and on lines of the program's own code."""
    next_check = [0.0]
    failure: list[BaseException] = []

    def maybe_check() -> None:
        now = time.monotonic()
        if now >= next_check[0]:
            next_check[0] = now + _TICK / 10
            try:
                check()
            except BaseException as exc:
                failure.append(exc)
                raise

    def local(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            maybe_check()
        return local

    def on_call(frame: types.FrameType, event: str, arg: Any) -> Any:
        maybe_check()
        # Line events only in the program's frames: JAX's own code is not slowed down.
        return local if frame.f_code.co_filename == PROGRAM_FILENAME else None

    old = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(old)
    # Raising from a trace function uninstalls it; if something swallowed the exception,
    # raise it now.
    if failure:
        raise failure[0]
