"""A batch's evaluation jobs as the loop hands them to the evaluator: one job per
evaluation kind (:mod:`limen_jax.search.evaluation.kind_registry`), stand-in jobs to compile the first
batch ahead, and the wait for their results."""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
from collections.abc import Sequence
from typing import Any

from limen_jax.search.evaluation.jobs import EvalBatch, EvalJob
from limen_jax.search.evaluation.kind_registry import JobContext, evaluation_kind
from limen_jax.search.faults import RunStop, describe
from limen_jax.search.requests import EvalRequest, ProgramRequest

_WAIT_SLICE_S = 1.0


@dataclasses.dataclass
class Submitted:
    """One evaluation job in flight: its kind, what it scores (children of this batch or
    stored records of an eval request), the job and its future."""

    kind: str
    job: EvalJob
    future: cf.Future[EvalBatch]
    children: list[Any] = dataclasses.field(default_factory=list)
    request: EvalRequest | None = None
    records: list[Any] = dataclasses.field(default_factory=list)


def jobs_for(children: Sequence[Any], ctx: JobContext, baseline: Any = None) -> list[tuple[str, list[Any], EvalJob]]:
    """The evaluation jobs of ``children`` (:class:`limen_jax.run.ask.Child`), one per kind,
    in first-asked order, then the ``baseline``'s (:mod:`limen_jax.run.baseline`) when given."""
    kinds: dict[str, list[Any]] = {}
    for child in children:
        kinds.setdefault(child.request.evaluation, []).append(child)
    out = [(k, cs, evaluation_kind(k).job(ctx, [c.interface for c in cs], {})) for k, cs in kinds.items()]
    if baseline is not None:  # a job of its own: the default observation (1280 features on xland_hard) would pad
        # every candidate of the batch to its width, several times their cost, and change their compiled call.
        # No watchdog: the task's own code is no untrusted program, and its pace is no norm for the candidates'
        kind, alone = baseline.request.evaluation, dataclasses.replace(ctx, pad_to=None, watchdog_s=0.0)
        out.append((kind, [baseline], evaluation_kind(kind).job(alone, [baseline.interface], {})))
    return out


def training_counts(children: Sequence[Any]) -> tuple[int, int]:
    """(children whose evaluation trains, children scored without training) of ``children``."""
    n = sum(trains(c.request.evaluation) for c in children)
    return n, len(children) - n


def trains(kind: str) -> bool:
    """Whether evaluation ``kind`` compiles a trainer: the ones that do not (``demos``)
    have nothing to compile ahead."""
    return evaluation_kind(kind).trains


def placeholder_jobs(asked: Sequence[ProgramRequest], ctx: JobContext, task: Any, program_mode: str) -> list[EvalJob]:
    """Jobs with the shapes of the ``asked`` programs before any is answered, one per kind
    that trains: stand-ins of the smallest width bucket, or in reward_only mode of the
    task default's width (its observation is the default one)."""
    from limen_jax.interface import default_interface, placeholder_interface

    out = []
    for kind in dict.fromkeys(r.evaluation for r in asked):
        if trains(kind):
            dim = default_interface(task).obs_dim if program_mode == "reward_only" else 1
            n = sum(r.evaluation == kind for r in asked)
            out.append(evaluation_kind(kind).job(ctx, [placeholder_interface(dim)] * n, {}))
    return out


def wait_all(submitted: Sequence[Submitted]) -> list[EvalBatch]:
    """Every job's results, in order; RunStop ("engine") when the evaluator itself broke
    (not any candidate's fault)."""
    out = []
    for s in submitted:
        while True:
            try:  # waits in short slices, so that a signal's handler runs promptly
                out.append(s.future.result(timeout=_WAIT_SLICE_S))
                break
            except cf.TimeoutError:
                continue
            except Exception as exc:
                raise RunStop("engine", f"the evaluator failed: {describe(exc)}") from exc
    return out
