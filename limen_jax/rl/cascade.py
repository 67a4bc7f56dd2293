"""The evaluation cascade: a short single-seed run gates the full multi-seed run.

Stage 1 trains every candidate with the first seed for ``short_steps`` (one batch, one
compile) and evaluates it; candidates whose success reaches ``threshold`` go on.
Stage 2 trains the survivors with all seeds to ``full_steps`` (a second batch). The
first seed is not restarted: its stage-1 slot (networks, optimiser, normalisation
statistics, environments, random key, update count) is grafted into stage 2, where it
trains only its remaining ``full - short`` updates and then freezes while the fresh
seeds run their ``full`` updates. Its learning-rate schedule runs over the full budget
from the start, so the continued seed is exactly the run a single full-budget training
with that seed would give. Both stages pad observations to the same width.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from limen_jax.interface import Interface
from limen_jax.rl.config import PPOConfig
from limen_jax.rl.result import BatchResult
from limen_jax.rl.trainer import BatchTrainer, train_batch
from limen_jax.task import Task


@dataclasses.dataclass
class CascadeResult:
    """One candidate's outcome.

    stage: "short" (stopped after stage 1) or "full". passed: reached the threshold.
    short_success: stage-1 success of the first seed.
    success_per_seed: float32 (S,) after stage 2, or (1,) if stopped after stage 1.
    success: their mean. final_return: mean evaluation return under the candidate's R.
    curves: name -> float32 (U,), the seed-mean per-update curve (NaN-aware mean);
    curves_per_seed: name -> (S, U). steps: env steps per seed trained.
    feedback: :meth:`BatchResult.feedback` for prompts.
    """

    name: str
    stage: str
    passed: bool
    short_success: float
    success_per_seed: np.ndarray
    success: float
    final_return: float
    curves: dict[str, np.ndarray]
    curves_per_seed: dict[str, np.ndarray]
    steps: int
    feedback: dict[str, Any]
    diverged_at: int | None = None


def run_cascade(
    task: Task,
    interfaces: Sequence[Interface],
    *,
    config: PPOConfig,
    short_steps: int,
    full_steps: int,
    seeds: int | Sequence[int],
    threshold: float,
    eval_key: int = 0,
    deadline: float | None = None,
) -> list[CascadeResult]:
    """Run the cascade over ``interfaces``; one result per interface, in order.

    Budgets are env steps per seed, rounded down to whole updates. A short budget at
    least the full one means a single full stage for every candidate (short_success NaN).
    deadline: ``time.monotonic()`` seconds for the whole cascade (rl.watchdog.BatchTimeout).
    """
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ValueError("at least one seed is required")
    full_u = config.num_updates(full_steps)
    short_u = min(config.num_updates(short_steps), full_u)
    key = jax.random.key(eval_key)
    if short_u >= full_u:  # no gate: one full stage
        batch = train_batch(task, interfaces, seeds=seed_list, total_steps=full_steps, config=config,
                            eval_key=eval_key, deadline=deadline)  # fmt: skip
        return [_result(batch, k, "full", True, float("nan")) for k in range(len(interfaces))]

    t0 = time.perf_counter()
    first = BatchTrainer(task, interfaces, config, 1)
    state1 = first.init(seed_list[:1], full_u)
    state1, curves1 = first.run(state1, short_u, deadline)
    success1, returns1 = first.evaluate_full(state1, key)
    survivors = [k for k in range(len(interfaces)) if success1[k, 0] >= threshold]
    stage1 = BatchResult(
        names=first.names, seeds=seed_list[:1], success=success1, final_return=returns1, curves=curves1,
        steps=short_u * config.steps_per_update, wall_s=time.perf_counter() - t0, compile_s=first.compile_s,
        diverged_at=np.asarray(state1.diverged_at), kernel_compile_s=first.kernel_compile_s,
    )  # fmt: skip

    results: list[CascadeResult | None] = [None] * len(interfaces)
    for k in range(len(interfaces)):
        if k not in survivors:
            results[k] = _result(stage1, k, "short", False, float(success1[k, 0]))

    if survivors:
        t1 = time.perf_counter()
        second = BatchTrainer(task, [interfaces[k] for k in survivors], config, len(seed_list), width=first.width)
        state2 = second.init(seed_list, full_u)
        state2 = second.graft(state2, state1, survivors, seed_index=0)
        rest = full_u - short_u
        state2, curves2 = second.run(state2, full_u if len(seed_list) > 1 else rest, deadline)
        success2, returns2 = second.evaluate_full(state2, key)
        curves = {}
        for name, c2 in curves2.items():
            c = np.full(c2.shape[:2] + (full_u,), np.nan, np.float32)
            c[:, 1:] = c2[:, 1:, :full_u]
            c[:, 0, :short_u] = curves1[name][survivors, 0, :short_u]
            c[:, 0, short_u:] = c2[:, 0, :rest]
            curves[name] = c
        stage2 = BatchResult(
            names=second.names, seeds=seed_list, success=success2, final_return=returns2, curves=curves,
            steps=full_u * config.steps_per_update, wall_s=time.perf_counter() - t1, compile_s=second.compile_s,
            diverged_at=np.asarray(state2.diverged_at), kernel_compile_s=second.kernel_compile_s,
        )  # fmt: skip
        for j, k in enumerate(survivors):
            results[k] = _result(stage2, j, "full", True, float(success1[k, 0]))
    return [r for r in results if r is not None]


def _result(batch: BatchResult, k: int, stage: str, passed: bool, short_success: float) -> CascadeResult:
    per_seed = {name: c[k] for name, c in batch.curves.items()}
    return CascadeResult(
        name=batch.names[k],
        stage=stage,
        passed=passed,
        short_success=short_success,
        success_per_seed=batch.success[k],
        success=float(batch.success[k].mean()),
        final_return=float(batch.final_return[k].mean()),
        curves={name: _nanmean(c) for name, c in per_seed.items()},
        curves_per_seed=per_seed,
        steps=batch.steps,
        feedback=batch.feedback(k),
        diverged_at=_first_divergence(batch.diverged_at, k),
    )


def _first_divergence(diverged_at: np.ndarray | None, k: int) -> int | None:
    if diverged_at is None:
        return None
    hit = diverged_at[k][diverged_at[k] >= 0]
    return int(hit.min()) if hit.size else None


def _nanmean(c: np.ndarray) -> np.ndarray:
    finite = np.isfinite(c)
    total = np.where(finite, c, 0.0).sum(0)
    count = finite.sum(0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan).astype(np.float32)
