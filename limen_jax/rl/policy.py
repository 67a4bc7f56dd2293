"""A trained policy as data: the network's parameters, the observation statistics it
normalises with, and what is needed to rebuild and run it.

The trainer keeps every slot's parameters flat and padded to the batch's observation
width (:mod:`limen_jax.rl.core`); a :class:`Policy` is one slot's, unflattened into the
network's pytree and copied to the host. Saved and loaded with orbax by
:mod:`limen_jax.policies`; rolled out by :func:`limen_jax.rl.rollouts.rollouts`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from limen_jax.rl.normalize import ObsStats


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
