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
from typing import TypeVar

import jax
import numpy as np

from limen_jax.interface import Interface
from limen_jax.rl.batch import batch_result, train_batch
from limen_jax.rl.cache import CompileCache
from limen_jax.rl.config import PPOConfig
from limen_jax.rl.policy import Policy
from limen_jax.rl.result import BatchResult
from limen_jax.rl.trainer import BatchTrainer
from limen_jax.task import Task

T = TypeVar("T")


@dataclasses.dataclass
class CascadeResult:
    """One candidate's outcome.

    stage: "short" (stopped after stage 1) or "full". passed: reached the threshold.
    short_success: stage-1 success of the first seed.
    success_per_seed: float32 (S,) after stage 2, or (1,) if stopped after stage 1.
    success: their mean. final_return: mean evaluation return under the candidate's R.
    curves: name -> float32 (U,), the seed-mean per-update curve (NaN-aware mean);
    curves_per_seed: name -> (S, U). steps: env steps per seed trained.
    compile_s / eval_s: seconds the whole ``run_cascade`` call spent compiling and
    evaluating (both stages), on the call's first result; 0 on the others, so that
    summing over results counts each call once.
    reward_terms: the names of the reward's terms (() for a scalar reward); curves then
    hold "reward/<name>" for each, the term's mean episode sum per update.
    eval_terms: name -> each term's mean episode sum over the final evaluation's
    episodes (mean over seeds), next to ``success``; {} for a scalar reward.
    policies: with ``run_cascade(return_policies=True)``, the trained policy of each
    seed of a full-stage candidate (:class:`~limen_jax.rl.policy.Policy`); None otherwise.
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
    diverged_at: int | None = None
    compile_s: float = 0.0
    eval_s: float = 0.0
    reward_terms: tuple[str, ...] = ()
    eval_terms: dict[str, float] = dataclasses.field(default_factory=dict)
    policies: list[Policy] | None = None


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
    rollout: str = "split",
    pad_to: int | None = None,
    deadline: float | None = None,
    return_policies: bool = False,
    cache: CompileCache | None = None,
) -> list[CascadeResult]:
    """Run the cascade over ``interfaces``; one result per interface, in order.

    Budgets are env steps per seed, rounded down to whole updates. A short budget at
    least the full one means a single full stage for every candidate (short_success NaN).
    ``rollout``: "split" (default: a search's batches share every compiled function but
    the programs' kernel) or "fused" (see :class:`BatchTrainer`).
    ``pad_to``: train at least this many slots per stage (copies of the last candidate
    fill the rest and are dropped), so that a search whose batches lose a candidate to
    the checker keeps its compiled shapes; the second stage pads its survivors to the
    next power of two (at most ``pad_to``), never wasting more than half of it.
    deadline: ``time.monotonic()`` seconds for the whole cascade (rl.watchdog.BatchTimeout).
    return_policies: put each full-stage candidate's trained policies (one per seed) on
    its result (``CascadeResult.policies``); off by default (they are copied to the host).
    cache: see :class:`BatchTrainer`.
    """
    seed_list, padded, full_u, short_u = _plan(interfaces, config, short_steps, full_steps, seeds, pad_to)
    if not seed_list:
        raise ValueError("at least one seed is required")
    key = jax.random.key(eval_key)
    n = len(interfaces)
    if not n:
        return []
    if short_u >= full_u:  # no gate: one full stage
        batch = train_batch(task, padded, seeds=seed_list, total_steps=full_steps, config=config,
                            eval_key=eval_key, rollout=rollout, deadline=deadline,
                            return_policies=return_policies, cache=cache)  # fmt: skip
        out = [_result(batch, k, "full", True, float("nan")) for k in range(n)]
        return _phases(out, [batch])

    t0 = time.perf_counter()
    first = BatchTrainer(task, padded, config, 1, rollout=rollout, cache=cache)
    state1 = first.init(seed_list[:1], full_u)
    state1, curves1 = first.run(state1, short_u, deadline)
    stage1 = batch_result(first, state1, curves1, seeds=seed_list[:1], updates=short_u, started=t0, key=key)
    success1 = stage1.success
    survivors = [k for k in range(n) if success1[k, 0] >= threshold]
    stages = [stage1]

    results: list[CascadeResult | None] = [None] * len(interfaces)
    for k in range(n):
        if k not in survivors:
            results[k] = _result(stage1, k, "short", False, float(success1[k, 0]))

    if survivors:
        t1 = time.perf_counter()
        rows = _second_rows(survivors, len(padded), pad_to)
        second = BatchTrainer(task, [interfaces[k] for k in rows], config, len(seed_list), width=first.width,
                              rollout=rollout, cache=cache)  # fmt: skip
        state2 = second.init(seed_list, full_u)
        state2 = second.graft(state2, state1, rows, seed_index=0)
        rest = full_u - short_u
        state2, curves2 = second.run(state2, full_u if len(seed_list) > 1 else rest, deadline)
        curves = {}
        for name, c2 in curves2.items():
            c = np.full(c2.shape[:2] + (full_u,), np.nan, np.float32)
            if len(seed_list) > 1:  # the other seeds ran the whole budget (one seed: only the rest)
                c[:, 1:] = c2[:, 1:, :full_u]
            c[:, 0, :short_u] = curves1[name][rows, 0, :short_u]
            c[:, 0, short_u:] = c2[:, 0, :rest]
            curves[name] = c
        stage2 = batch_result(second, state2, curves, seeds=seed_list, updates=full_u, started=t1, key=key,
                              return_policies=return_policies)  # fmt: skip
        stages.append(stage2)
        for j, k in enumerate(survivors):
            results[k] = _result(stage2, j, "full", True, float(success1[k, 0]))
    return _phases([r for r in results if r is not None], stages)


def compile_cascade(
    task: Task,
    interfaces: Sequence[Interface],
    *,
    config: PPOConfig,
    short_steps: int,
    full_steps: int,
    seeds: int | Sequence[int],
    rollout: str = "split",
    pad_to: int | None = None,
    cache: CompileCache | None = None,
) -> float:
    """Compile what :func:`run_cascade` with these arguments will compile, training nothing
    (:meth:`BatchTrainer.compile_ahead`): the first stage, and the second as it is when
    every candidate passes (fewer survivors are another shape, compiled when they come).
    On another thread while an earlier batch trains, this takes the compile off the next
    batch's critical path. Returns the seconds spent compiling."""
    seed_list, padded, full_u, short_u = _plan(interfaces, config, short_steps, full_steps, seeds, pad_to)
    if not padded or not seed_list:
        return 0.0
    if short_u >= full_u:
        return BatchTrainer(task, padded, config, len(seed_list), rollout=rollout, cache=cache).compile_ahead()
    first = BatchTrainer(task, padded, config, 1, rollout=rollout, cache=cache)
    seconds = first.compile_ahead()
    rows = _second_rows(list(range(len(interfaces))), len(padded), pad_to)
    second = BatchTrainer(task, [padded[k] for k in rows], config, len(seed_list), width=first.width,
                          rollout=rollout, cache=cache)  # fmt: skip
    return seconds + second.compile_ahead()


def _plan(
    interfaces: Sequence[Interface], config: PPOConfig, short_steps: int, full_steps: int,
    seeds: int | Sequence[int], pad_to: int | None,
) -> tuple[list[int], list[Interface], int, int]:  # fmt: skip
    """The cascade's shape, shared by running and compiling it: the seed list, stage 1's
    interfaces (padded to ``pad_to``), the full and the short run's updates."""
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    full_u = config.num_updates(full_steps)
    short_u = min(config.num_updates(short_steps), full_u)
    n = len(interfaces)
    return seed_list, _padded(list(interfaces), max(n, pad_to or n)), full_u, short_u


def _second_rows(survivors: list[int], stage1_size: int, pad_to: int | None) -> list[int]:
    """The stage-1 rows stage 2 trains: :func:`stage_rows` when padding, else the survivors."""
    return stage_rows(survivors, stage1_size) if pad_to else survivors


def _phases(results: list[CascadeResult], stages: list[BatchResult]) -> list[CascadeResult]:
    """Put the call's compile and evaluation seconds (all stages) on its first result."""
    compile_s = sum(b.compile_s for b in stages)
    eval_s = sum(b.eval_s for b in stages)
    return [dataclasses.replace(r, compile_s=compile_s, eval_s=eval_s) if i == 0 else r for i, r in enumerate(results)]


def _padded(items: list[T], size: int) -> list[T]:
    """``items`` filled up to ``size`` with copies of its last element."""
    return items + items[-1:] * (size - len(items))


def stage_rows(survivors: list[int], stage1_size: int) -> list[int]:
    """The stage-1 rows that stage 2 trains: the survivors, padded with copies of the last
    to the next power of two (at most ``stage1_size``), so a search sees few shapes."""
    size = min(stage1_size, 1 << max(len(survivors) - 1, 0).bit_length())
    return _padded(survivors, max(size, len(survivors)))


def _result(batch: BatchResult, k: int, stage: str, passed: bool, short_success: float) -> CascadeResult:
    per_seed = batch.curves_of(k)
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
        diverged_at=_first_divergence(batch.diverged_at, k),
        reward_terms=batch.terms_of(k),
        eval_terms={name: float(v.mean()) for name, v in batch.eval_terms_of(k).items()},
        policies=batch.policies[k] if batch.policies is not None else None,
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
