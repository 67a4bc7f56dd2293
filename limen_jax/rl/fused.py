"""The fused rollout: the T steps of one update (act, the programs' kernel, settle) as
one compiled scan, for runs where running speed matters more than compiling. The
evaluation's episodes step through it too, T steps at a time (``limen_jax.rl.evaluate``).

The split path (:class:`limen_jax.rl.trainer.BatchTrainer` with ``rollout="split"``)
calls three executables per step, ``act`` and ``settle`` compiled once per shape and
shared by every later batch, the kernel per batch. That keeps a new batch's compile to
the kernel alone, which is what a search over many batches needs, but every step pays
three dispatches and XLA cannot fuse across them (docs/concepts/trainer.md compares the two).
Here the same functions are traced
into one ``lax.scan`` with the batch's programs inside, so the whole rollout compiles
per batch (a few seconds: the task step, the policy and the programs together) and
then runs at the speed of a hand-fused PureJaxRL loop. Same functions, same order of
random draws: a fused run matches a split run up to float rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from limen_jax.rl.compiled import CompileOnce, Wrap
from limen_jax.rl.core import Core, Rollout, TrainState
from limen_jax.rl.kernel import CompiledByShape, Kernel
from limen_jax.rl.update import Records


def rollout_fn(
    core: Core, kernel: Kernel, no_action: jax.Array
) -> Callable[[TrainState, Rollout], tuple[Rollout, Records]]:
    """(ts, ro) -> (ro after T steps, records stacked per slot [K, S, T, N, ...]).

    kernel: :func:`limen_jax.rl.kernel.kernel_fn` of the batch. no_action: the action
    placeholder [K, S, N] used to observe fresh start states (reset_pool = 0 only).
    """
    cfg = core.config

    def rollout(ts: TrainState, ro: Rollout) -> tuple[Rollout, Records]:
        with_reward = jnp.ones(ts.update.shape, bool)

        def step(ro: Rollout, _: None) -> tuple[Rollout, Records]:
            acted = core.act(ts, ro.env, ro.carry, ro.prev_action, ro.prev_reward, ro.key, ro.greedy)
            reward, next_obs, terms = kernel(ro.env.task.sim, acted.action, acted.next_task.sim, with_reward)
            fresh_task, fresh_obs = None, None
            if cfg.reset_pool == 0:
                fresh_task = core.reset_tasks(core.split_envs(acted.k_reset))
                fresh_obs = kernel(fresh_task.sim, no_action, fresh_task.sim, ~with_reward)[1]
            return core.settle(ts, ro, acted, reward, next_obs, fresh_task, fresh_obs, terms)

        ro, records = jax.lax.scan(step, ro, None, length=cfg.rollout_len)
        return ro, jax.tree.map(lambda x: jnp.moveaxis(x, 0, 2), records)

    return rollout


class FusedRollout(CompiledByShape):
    """:func:`rollout_fn` compiled on first use for each state shape; ``compile_s``
    accumulates the time spent compiling. ``wrap`` (e.g. a shard_map over seeds) is
    applied first. ``memo``: see :class:`CompiledByShape`."""

    def __init__(
        self, core: Core, kernel: Kernel, no_action: jax.Array, wrap: Wrap | None = None,
        memo: CompileOnce | None = None,
    ) -> None:  # fmt: skip
        fn = rollout_fn(core, kernel, no_action)
        super().__init__(wrap(fn, 2) if wrap is not None else fn, wrap is not None, memo)
