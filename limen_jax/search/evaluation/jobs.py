"""What an evaluation is asked and what it answers: plain data every evaluator shares.

:class:`EvalJob` (the task, interfaces, seeds, budget, PPO config, watchdog, the
evaluation kind) goes in; :class:`EvalBatch` (a result or an exception per interface)
comes out. A cluster evaluator ships these between processes.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any


@dataclasses.dataclass(frozen=True)
class Budget:
    """Env steps per seed of the short single-seed run and of the full run, and the
    short run's success threshold (``short_steps == full_steps``: one full stage)."""

    short_steps: int
    full_steps: int
    threshold: float


@dataclasses.dataclass(frozen=True)
class EvalJob:
    """What a submission asks: the task, its interfaces, the training seeds and budget,
    the PPO config, and the batch watchdog: ``watchdog_s`` seconds for a batch when
    nothing has been learned yet (0: no watchdog), ``watchdog_factor`` x the time the
    batch is expected to take once earlier batches have been timed. pad_to: the batch size the
    search asks for; a batch that lost candidates to the checker is padded to it so compiled
    shapes repeat (None: no padding). kind: the evaluation kind that runs and scores it
    (:mod:`limen_jax.search.evaluation.kind_registry`). return_policies: bring each full-budget
    candidate's trained policies back on its result (to keep them). options: the kind's own
    settings, plain JSON data (e.g. the ``episodes`` kind's episode and frame counts). data:
    what a kind needs besides interfaces, arrays in plain containers (the ``demos`` kind: the
    demonstration set; ``episodes``: the kept policies' parameters), or None. Never a path
    on the driver's disk: a worker on another node cannot read it."""

    task: Any
    interfaces: Sequence[Any]
    seeds: Sequence[int]
    budget: Budget
    config: Any
    pad_to: int | None = None
    watchdog_s: float = 0.0
    watchdog_factor: float = 5.0
    kind: str = "ppo"
    return_policies: bool = False
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    data: Any = None


@dataclasses.dataclass
class EvalBatch:
    """The answer: one ``CascadeResult`` or ``Exception`` per interface, in order;
    ``batch_error`` is the batched call's exception message when it had to be split;
    ``wall_s`` the seconds the evaluation took, of which ``compile_s`` compiling and
    ``eval_s`` the final evaluations (None when the evaluator does not tell);
    ``finished_at`` when it ended (epoch s)."""

    results: list[Any]
    batch_error: str | None = None
    wall_s: float = 0.0
    finished_at: float = dataclasses.field(default_factory=time.time)
    compile_s: float | None = None
    eval_s: float | None = None


# The watchdog never gives a batch less than this (compiling a new batch's kernel varies).
MIN_BUDGET_S = 60.0


def watchdog_budget(job: EvalJob, per_update_s: float | None) -> float | None:
    """The watchdog's seconds for ``job``: ``watchdog_s`` until a batch has been timed
    (``per_update_s`` None), then ``watchdog_factor`` x the expected time (at least
    MIN_BUDGET_S); None when off. Every evaluator learns ``per_update_s`` the same way."""
    if job.watchdog_s <= 0:
        return None
    if per_update_s is None:
        return job.watchdog_s
    return max(MIN_BUDGET_S, job.watchdog_factor * per_update_s * updates_of(job))


def updates_of(job: EvalJob) -> int:
    """Most PPO updates the job's cascade runs (both stages)."""
    b, cfg = job.budget, job.config
    full = cfg.num_updates(b.full_steps)
    return full + (min(cfg.num_updates(b.short_steps), full) if b.short_steps < b.full_steps else 0)


def split_job(job: EvalJob, parts: int) -> list[EvalJob]:
    """``job`` as at most ``parts`` jobs of contiguous interfaces, as even as they divide
    (the first ones one larger), each padded to its share of ``pad_to`` so that compiled
    shapes still repeat from batch to batch. For kinds whose interfaces train apart (a
    slot's randomness comes from its seed alone), so the parts' results, in order, are the
    whole job's."""
    n = max(1, min(parts, len(job.interfaces)))
    size, extra = divmod(len(job.interfaces), n)
    pad = None if job.pad_to is None else math.ceil(job.pad_to / n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (i < extra)
        out.append(dataclasses.replace(job, interfaces=list(job.interfaces[start:end]), pad_to=pad))
        start = end
    return out


def merge_batches(batches: Sequence[EvalBatch]) -> EvalBatch:
    """The parts of a split job (:func:`split_job`) as one answer: results in order, the
    parts' batch errors joined, and the times of the slowest part (they ran side by side)."""

    def most(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return max(known) if known else None

    errors = [b.batch_error for b in batches if b.batch_error]
    return EvalBatch(
        results=[r for b in batches for r in b.results],
        batch_error="; ".join(errors) if errors else None,
        wall_s=max(b.wall_s for b in batches),
        finished_at=max(b.finished_at for b in batches),
        compile_s=most([b.compile_s for b in batches]),
        eval_s=most([b.eval_s for b in batches]),
    )
