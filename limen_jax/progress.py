"""The run's live status: what it is doing now, from the first second.

On a terminal one line (a ``rich`` status with a spinner) shows every phase in flight,
e.g. ``iter 3: training 4 candidates x 2 seeds, 12 s of ~40 s (52k steps/s) | iter 4:
asking 3/4 answered``; lines the loop prints go above it. When stdout is not a terminal
(a log file, CI) each phase that starts is one plain line instead, and nothing is
redrawn. The estimate of a batch's training time is the last batch's throughput (env
steps per second of training wall time) applied to this batch's steps: a first batch
has none.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

Text = str | Callable[[], str]  # a phase's text, or a function giving it now (elapsed seconds)


class Progress:
    """Phases in flight, by key ("setup", "ask", "train", ...), each with its text."""

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.enabled = enabled
        self.tty = enabled and bool(getattr(self.stream, "isatty", lambda: False)())
        self._phases: dict[str, Text] = {}
        self._lock = threading.Lock()
        self._status: Any = None
        self._ticker: threading.Thread | None = None  # redraws a callable phase's text every second
        self._stop = threading.Event()  # the ticker's wait: close() sets it, so the ticker ends at once
        self.rate: float | None = None  # env steps per second of training, from the last batch

    def set(self, key: str, text: Text, *, announce: bool = True) -> None:
        """Phase ``key`` now reads ``text`` (a callable is asked again every second on a
        terminal). Off a terminal, ``announce`` prints it as a line (a phase starting);
        updates of a phase under way pass ``announce=False``."""
        if not self.enabled:
            return
        with self._lock:
            self._phases[key] = text
            if self.tty:
                self._show()
                if callable(text) and self._ticker is None:
                    # a new Event per ticker: clearing a shared one could keep a closed ticker going
                    self._stop = threading.Event()
                    self._ticker = threading.Thread(target=self._tick, args=(self._stop,), name="limen-progress",
                                                    daemon=True)
                    self._ticker.start()
            elif announce:
                print(f"  {text() if callable(text) else text}", file=self.stream, flush=True)

    def clear(self, key: str) -> None:
        with self._lock:
            self._phases.pop(key, None)
            if self.tty:
                self._show()

    def close(self) -> None:
        """Clear every phase and stop the status line; returns once the ticker has ended."""
        with self._lock:
            self._phases.clear()
            self._stop.set()
            ticker, self._ticker = self._ticker, None
            self._show()  # no phase: stops the status line
        if ticker is not None:
            ticker.join()  # outside the lock, which the ticker takes to redraw

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(1.0):
            with self._lock:
                if self._status is not None:
                    self._show()

    def _show(self) -> None:
        line = " | ".join(t() if callable(t) else t for t in self._phases.values())
        if not line:
            if self._status is not None:
                self._status.stop()
                self._status = None
            return
        if self._status is None:
            from rich.console import Console

            self._status = Console(file=self.stream, highlight=False).status(line, spinner="dots")
            self._status.start()
        else:
            self._status.update(line)

    # --- training -------------------------------------------------------------------
    def training_text(self, it: int, candidates: int, seeds: int, steps: int, elapsed: float,
                      scoring: int = 0) -> str:
        """``iter 3: training 4 candidate(s) x 2 seed(s), 12 s of ~40 s (52k steps/s)``; at
        ``elapsed`` under half a second the expected time alone; without a previous batch no
        estimate. ``scoring``: rewards scored on demonstrations (no training), said first;
        with no candidate to train, ``iter 3: scoring 2 reward(s) on demonstrations, 1 s``."""
        if not candidates:
            return f"iter {it}: scoring {scoring} reward(s) on demonstrations, {elapsed:.0f} s"
        text = f"iter {it}: " + (f"scoring {scoring} reward(s) on demonstrations, " if scoring else "")
        text += f"training {candidates} candidate(s) x {seeds} seed(s)"
        total = candidates * seeds * steps / self.rate if self.rate else None
        if elapsed >= 0.5:
            text += f", {elapsed:.0f} s" + (f" of ~{total:.0f} s" if total is not None else "")
        elif total is not None:
            text += f", ~{total:.0f} s expected"
        return text + (f" ({_si(self.rate)} steps/s)" if self.rate else "")

    def trained(self, candidates: int, seeds: int, steps: int, seconds: float) -> None:
        """Record a finished batch's throughput for the next estimate."""
        if seconds > 0 and candidates * seeds * steps > 0:
            self.rate = candidates * seeds * steps / seconds


class AskStatus:
    """What the status line says while batch ``it`` is asked for and checked: ``iter 3: 2/4
    answered, checked 1/2, 12 s (~8 s left)``. ``answered`` counts the LLM's answers;
    :meth:`checked` is the checks' callback (``limen_jax.run.ask.ask_and_check``'s
    ``on_check``); ``expected``: the programs the batch will check. The estimate (once a
    check has ended) is the time per ended check applied to those still to end."""

    def __init__(self, it: int, asks: int, expected: int) -> None:
        self.it, self.asks, self.expected = it, asks, expected
        self.answered = self.done = self.submitted = 0
        self.start = time.time()
        self.first_check: float | None = None

    def checked(self, done: int, submitted: int) -> None:
        if self.first_check is None:
            self.first_check = time.time()
        self.done, self.submitted = done, submitted

    def text(self) -> str:
        now = time.time()
        parts = [f"iter {self.it}: " + (f"{self.answered}/{self.asks} answered" if self.answered or not self.asks
                                        else f"asking for {self.asks} answer(s)")]
        total = max(self.expected, self.submitted)
        if self.submitted:
            parts.append(f"checked {self.done}/{total}")
        text = ", ".join(parts) + (f", {now - self.start:.0f} s" if now - self.start >= 1 else "")
        if self.done and self.first_check is not None and self.done < total:
            left = (now - self.first_check) / self.done * (total - self.done)
            text += f" (checks ~{left:.0f} s left)"
        return text


def _si(x: float) -> str:
    return f"{x / 1e6:.1f}M" if x >= 1e6 else f"{x / 1e3:.0f}k" if x >= 1e3 else f"{x:.0f}"
