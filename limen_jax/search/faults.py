"""Who is to blame for a failure: the program (fed back to the LLM) or the machinery
(recorded, never shown as the program's mistake; systematic ones stop the run).

A record's ``error["blame"]`` is "program", "infra" (the LLM could not be reached) or
"engine" (the checker or the trainer broke).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


class RunStop(Exception):
    """The run cannot go on; it stops resumably. kind: "budget", "mutator", "outage" or
    "engine"; the message says why and what to do."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class ProgramTooSlow(Exception):
    """The batch watchdog fired and timing this program's artifact in a sandboxed worker
    found it the outlier: the program's fault; the message is fed back to the LLM."""


class TrainingStalled(RuntimeError):
    """The batch watchdog fired and no program was found to blame: the engine's or the
    machine's fault (the run stops resumably)."""


# Messages of failures that are the machine's, whatever program ran.
_ENGINE_MARKERS = ("RESOURCE_EXHAUSTED", "out of memory", "Out of memory", "OOM", "XlaRuntimeError",
                   "INTERNAL:", "Failed to allocate")


def is_engine_error(exc: BaseException) -> bool:
    """Out-of-memory and XLA runtime failures, and a stalled batch with no slow program:
    the engine's, not the program's."""
    if isinstance(exc, MemoryError | TrainingStalled):
        return True
    text = f"{type(exc).__name__}: {exc}"
    return any(marker in text for marker in _ENGINE_MARKERS)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def systematic(errors: Sequence[BaseException | None]) -> str | None:
    """The message when every one of two or more candidates failed with the same
    exception (type and message): the machinery, not the candidates. None otherwise."""
    if len(errors) < 2 or any(e is None for e in errors):
        return None
    messages = {describe(e) for e in errors if e is not None}
    return messages.pop() if len(messages) == 1 else None


def diverged(result: Any) -> str | None:
    """Why a training result is not a score ("non-finite at update u" from the trainer's
    guard, or a NaN success), or None for a finite result."""
    at = getattr(result, "diverged_at", None)
    if at is not None:
        return f"training diverged: non-finite values at update {int(at)}"
    values = [float(result.success), *(float(x) for x in result.success_per_seed)]
    if not all(math.isfinite(v) for v in values):
        return "training diverged: the success rate is not finite"
    return None
