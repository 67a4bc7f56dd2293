"""A trained policy as data: the network's parameters, the observation statistics it
normalises with, and what is needed to rebuild and run it.

The trainer keeps every slot's parameters flat and padded to the batch's observation
width (:mod:`limen_jax.rl.core`); a :class:`Policy` is one slot's, unflattened into the
network's pytree and copied to the host. Saved and loaded with orbax by
:mod:`limen_jax.policies`; rolled out by :func:`limen_jax.rl.rollouts.rollouts`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from limen_jax.rl.normalize import ObsStats

if TYPE_CHECKING:
    from limen_jax.rl.core import TrainState
    from limen_jax.rl.trainer import BatchTrainer


@dataclasses.dataclass(frozen=True, eq=False)
class Policy:
    """One trained (candidate, seed) policy.

    params: the network's parameters, flax's pytree of float32 numpy arrays, input
        layers ``metadata["width"]`` wide (rows past ``obs_dim`` are zero).
    obs_stats: :class:`ObsStats` of numpy arrays: mean, var float32[width], count float32[].
    metadata: JSON-ready facts: "task" (name), "task_params", "ppo" (``PPOConfig.to_dict()``),
        "width", "obs_dim", "seed", "interface" (its name), "reward_terms" (names),
        "updates" (PPO updates trained), "steps" (env steps trained).
    """

    params: Any
    obs_stats: ObsStats
    metadata: dict[str, Any]

    def arrays(self) -> dict[str, Any]:
        """The arrays, as one pytree (what is checkpointed)."""
        stats = {"mean": self.obs_stats.mean, "var": self.obs_stats.var, "count": self.obs_stats.count}
        return {"params": self.params, "obs_stats": stats}


def policies_of(trainer: BatchTrainer, state: TrainState, k: int) -> list[Policy]:
    """Candidate ``k``'s trained policies, one per seed of ``state`` (host copies)."""
    iface = trainer.iface.interfaces[k]
    params = jax.device_get(jax.tree.map(lambda x: x[k], trainer.params_tree(state)))
    stats = jax.device_get(jax.tree.map(lambda x: x[k], state.obs_stats))
    seeds = np.asarray(state.seed[k])
    updates = np.asarray(state.update[k])
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
