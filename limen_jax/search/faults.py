"""Who is to blame for a failure: the program (fed back to the LLM) or the machinery
(recorded, never shown as the program's mistake; systematic ones stop the run).

A record's ``error["blame"]`` is "program", "infra" (the LLM could not be reached) or
"engine" (the checker or the trainer broke).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any


class RunStop(Exception):
    """The run cannot go on; it stops resumably. kind: "budget", "mutator", "outage" or
    "engine"; the message says why and what to do."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Interrupted(BaseException):
    """SIGINT or SIGTERM asked the run to stop (the CLI's handlers raise it; a BaseException
    like KeyboardInterrupt, so no ``except Exception`` swallows it). signum: the signal;
    now: a second signal, which stops at once instead of at the next safe point."""

    def __init__(self, signum: int, now: bool = False) -> None:
        super().__init__(signum, now)
        self.signum, self.now = signum, now


class ProgramTooSlow(Exception):
    """The batch watchdog fired and timing this program's artifact in a sandboxed worker
    found it the outlier: the program's fault; the message is fed back to the LLM."""


class TrainingStalled(RuntimeError):
    """The batch watchdog fired and no program was found to blame: the engine's or the
    machine's fault (the run stops resumably)."""


class EngineFault(RuntimeError):
    """Raised by engine code for a failure that is the machinery's whatever program ran."""


def is_engine_error(exc: BaseException) -> bool:
    """Out of memory, XLA runtime failures (``jax.errors.JaxRuntimeError``: allocation
    failures, internal errors), a stalled batch with no slow program, an
    :class:`EngineFault`: the engine's, not the program's. Judged by type, never by the
    message, so an error re-raised by a cluster evaluator as a subclass of its cause (as
    Ray's task errors are) classifies the same."""
    if isinstance(exc, MemoryError | TrainingStalled | EngineFault):
        return True
    jax = sys.modules.get("jax")  # no jax loaded: the error cannot be one of its runtime's
    return jax is not None and isinstance(exc, jax.errors.JaxRuntimeError)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def systematic(errors: Sequence[BaseException | None]) -> str | None:
    """The message when every one of two or more candidates failed with the same
    exception (type and message): the machinery, not the candidates. None otherwise."""
    if len(errors) < 2 or any(e is None for e in errors):
        return None
    messages = {describe(e) for e in errors if e is not None}
    return messages.pop() if len(messages) == 1 else None


def batch_fault(results: Sequence[Any]) -> str | None:
    """Why a batch's ``results`` (a result or an exception per candidate) are the engine's
    failure: an engine error among them, or the same error from every candidate
    (:func:`systematic`); None when neither."""
    errors = [r if isinstance(r, BaseException) else None for r in results]
    engine = next((e for e in errors if e is not None and is_engine_error(e)), None)
    return describe(engine) if engine is not None else systematic(errors)


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
