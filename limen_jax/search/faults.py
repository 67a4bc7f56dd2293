"""Who is to blame for a failure: the program (fed back to the LLM) or the machinery
(recorded, never shown as the program's mistake; systematic ones stop the run).

A rejected candidate carries a :class:`Rejection`; its ``blame`` is "program", "infra"
(the LLM could not be reached) or "engine" (the checker or the trainer broke). A
program record stores it as JSON (``record.error``, :meth:`Rejection.to_dict`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

BLAMES = ("program", "infra", "engine")


@dataclasses.dataclass(frozen=True)
class Rejection:
    """Why a candidate was not trained or scored. stage: where it failed (a checker stage,
    "mutator", "truncated", "checker", "train", "prescreen", ...); message: the reason, as
    the prompts show it; trace: the traceback or rule detail ("" when none); blame: whose
    fault (:data:`BLAMES`); details: extra JSON fields a stage adds (e.g. ``kind:
    "diverged"``, a prescreen ``score``), kept flat beside the others on disk."""

    stage: str
    message: str
    trace: str = ""
    blame: str = "program"
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON a record stores: ``{"stage", "message", "trace", "blame", **details}``."""
        return {"stage": self.stage, "message": self.message, "trace": self.trace, "blame": self.blame,
                **self.details}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rejection:
        """Inverse of :meth:`to_dict`; a stored error without ``blame`` (older runs) is the program's."""
        rest = {k: v for k, v in data.items() if k not in ("stage", "message", "trace", "blame")}
        return cls(str(data.get("stage", "")), str(data.get("message", "")), str(data.get("trace") or ""),
                   str(data.get("blame", "program")), rest)


def rejection_of(record: Any) -> Rejection | None:
    """The :class:`Rejection` a program record stores (``record.error``), or None."""
    return None if record.error is None else Rejection.from_dict(record.error)


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
