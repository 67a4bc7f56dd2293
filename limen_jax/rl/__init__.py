"""Our PPO, batched over candidate interfaces and seeds (DESIGN.md §3).

    from limen_jax import rl
    result = rl.train("xland_easy", [iface_a, iface_b], seeds=3, steps=500_000)
    result.success          # (K, S) evaluation success rates

Modules: config (PPOConfig, presets), networks (MLP / GRU actor-critics), normalize,
losses (compute_gae, ppo_loss), ppo (one slot's PPO epochs), env (the batched
interface, the environment state, the reset pool), state (the carried pytrees), core
(the program-independent pure functions: init, begin, act, settle), update (GAE, PPO,
statistics, freezing), kernel (the per-batch φ and R), fused (the rollout as one
scan), evaluate, compiled and cache (executables shared by threads and trainers),
shapes (width buckets, device layout), trainer (BatchTrainer: the host loop), batch
(train_batch, BatchResult's making), cascade (run_cascade, compile_cascade), result,
policy and rollouts (a trained policy, its episodes), watchdog (BatchTimeout: a
deadline passed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from limen_jax.interface import Interface, default_interface
from limen_jax.rl.batch import train_batch
from limen_jax.rl.cache import CompileCache
from limen_jax.rl.cascade import CascadeResult, compile_cascade, run_cascade
from limen_jax.rl.config import PPOConfig
from limen_jax.rl.losses import compute_gae, ppo_loss
from limen_jax.rl.result import BatchResult
from limen_jax.rl.trainer import BatchTrainer, TrainState
from limen_jax.rl.watchdog import BatchTimeout
from limen_jax.task import Task, make

__all__ = [
    "BatchResult",
    "BatchTimeout",
    "BatchTrainer",
    "CascadeResult",
    "CompileCache",
    "PPOConfig",
    "TrainState",
    "compile_cascade",
    "compute_gae",
    "ppo_loss",
    "run_cascade",
    "train",
    "train_batch",
]


def train(
    task_or_name: Task | str,
    interfaces: Interface | Sequence[Interface] | None = None,
    *,
    seeds: int | Sequence[int] = 3,
    steps: int = 1_000_000,
    preset: str = "cpu",
    config: PPOConfig | None = None,
    rollout: str = "auto",
    **overrides: Any,
) -> BatchResult:
    """Train one or several interfaces (default: the task's own) with several seeds at once.

    ``config`` defaults to ``PPOConfig.preset(task.name, preset)``; keyword ``overrides``
    replace single fields (``lr=3e-4``). ``rollout``: "split", "fused" or "auto" (see
    :func:`train_batch`).
    """
    task = make(task_or_name) if isinstance(task_or_name, str) else task_or_name
    if interfaces is None:
        interfaces = [default_interface(task)]
    elif isinstance(interfaces, Interface):
        interfaces = [interfaces]
    cfg = config or PPOConfig.preset(task.name, preset)
    if overrides:
        cfg = cfg.replace(**overrides)
    return train_batch(task, list(interfaces), seeds=seeds, total_steps=steps, config=cfg, rollout=rollout)
