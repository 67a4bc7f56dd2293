"""One batch trained and evaluated: :func:`train_batch`, and the one place a
:class:`~limen_jax.rl.result.BatchResult` is made (:func:`batch_result`, which the
cascade's stages use too)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import jax
import numpy as np

from limen_jax.interface import Interface
from limen_jax.rl.cache import CompileCache
from limen_jax.rl.config import PPOConfig
from limen_jax.rl.normalize import ObsStats
from limen_jax.rl.policy import Policy
from limen_jax.rl.result import BatchResult
from limen_jax.rl.trainer import BatchTrainer, TrainState
from limen_jax.task import Task

# A single run fuses its rollout (train_batch's "auto") from this many updates on, where
# the fused rollout's faster steps have repaid its longer compile ...
FUSE_MIN_UPDATES = 200
# ... or from two updates on where an update is this many transitions a slot, each
# update saving about what fusing costs once (docs/concepts/trainer.md).
FUSE_MIN_UPDATE_STEPS = 65_536


def auto_rollout(config: PPOConfig, updates: int) -> str:
    """The rollout "auto" picks for one run of ``updates`` updates: "fused" where its faster
    steps repay its longer compile (see FUSE_MIN_UPDATES), else "split"."""
    big = config.steps_per_update >= FUSE_MIN_UPDATE_STEPS and updates >= 2
    return "fused" if updates >= FUSE_MIN_UPDATES or big else "split"


def train_batch(
    task: Task,
    interfaces: Sequence[Interface],
    *,
    seeds: int | Sequence[int],
    total_steps: int,
    config: PPOConfig,
    eval_key: int = 0,
    rollout: str = "auto",
    deadline: float | None = None,
    return_policies: bool = False,
    cache: CompileCache | None = None,
) -> BatchResult:
    """Train every interface with every seed (K x S policies) in one compiled call, then
    evaluate each on fresh episodes. ``seeds``: a count (seeds 0..n-1) or explicit list.

    ``total_steps`` env steps per (candidate, seed), rounded down to whole updates of
    ``config.num_envs x config.rollout_len`` steps (at least one). ``rollout``: "split",
    "fused" (see :class:`BatchTrainer`) or "auto": :func:`auto_rollout`, fused where faster
    steps repay the larger compile (long runs, or big updates). ``deadline``: see
    :meth:`BatchTrainer.run`. ``return_policies``: keep every slot's trained policy on
    the result (``BatchResult.policies``). ``cache``: see :class:`BatchTrainer`.
    """
    start = time.perf_counter()
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    updates = config.num_updates(total_steps)
    if rollout == "auto":
        rollout = auto_rollout(config, updates)
    trainer = BatchTrainer(task, interfaces, config, len(seed_list), rollout=rollout, cache=cache)
    state = trainer.init(seed_list, updates)
    state, curves = trainer.run(state, updates, deadline)
    return batch_result(trainer, state, curves, seeds=seed_list, updates=updates, started=start,
                        key=jax.random.key(eval_key), return_policies=return_policies)  # fmt: skip


def batch_result(
    trainer: BatchTrainer,
    state: TrainState,
    curves: dict[str, np.ndarray],
    *,
    seeds: Sequence[int],
    updates: int,
    started: float,
    key: jax.Array,
    return_policies: bool = False,
) -> BatchResult:
    """Evaluate the trained ``state`` (``key``) and gather the run into a BatchResult.
    updates: each slot's budget (the result's steps); started: ``time.perf_counter()``
    when the run began (its wall time includes this evaluation)."""
    begin, compiled = time.perf_counter(), trainer.compile_s
    success, returns, terms = trainer.evaluate_terms(state, key)
    now = time.perf_counter()
    eval_s = now - begin - (trainer.compile_s - compiled)  # its compiling excluded
    policies = [policies_of(trainer, state, k) for k in range(trainer.num_candidates)] if return_policies else None
    return BatchResult(
        names=trainer.names,
        seeds=list(seeds),
        success=success,
        final_return=returns,
        curves=curves,
        steps=updates * trainer.config.steps_per_update,
        wall_s=now - started,
        compile_s=trainer.compile_s,
        diverged_at=trainer.real(np.asarray(state.diverged_at)),
        kernel_compile_s=trainer.kernel_compile_s,
        eval_s=eval_s,
        term_names=trainer.term_names,
        eval_terms=terms,
        policies=policies,
    )


def policies_of(trainer: BatchTrainer, state: TrainState, k: int) -> list[Policy]:
    """Candidate ``k``'s trained policies, one per seed of ``state`` (host copies)."""
    iface = trainer.iface.interfaces[k]
    params = jax.device_get(jax.tree.map(lambda x: x[k], trainer.params_tree(state)))
    stats = jax.device_get(jax.tree.map(lambda x: x[k], state.obs_stats))
    seeds = np.asarray(state.seed[k])[: trainer.num_seeds]
    updates = np.asarray(state.update[k])[: trainer.num_seeds]
    cfg = trainer.config
    out = []
    for s in range(len(seeds)):
        metadata = {
            "task": trainer.task.name,
            "task_params": {n: float(v) for n, v in dict(trainer.task.params).items()},
            "ppo": cfg.to_dict(),
            "width": int(trainer.width),
            "obs_dim": int(iface.obs_dim),
            "seed": int(seeds[s]),
            "interface": iface.name,
            "reward_terms": list(iface.reward_terms),
            "updates": int(updates[s]),
            "steps": int(updates[s]) * cfg.steps_per_update,
        }
        p = jax.tree.map(lambda x, s=s: np.asarray(x[s]), params)
        o = ObsStats(*(np.asarray(x[s]) for x in (stats.mean, stats.var, stats.count)))  # type: ignore[arg-type]
        out.append(Policy(p, o, metadata))
    return out
