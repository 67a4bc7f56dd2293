"""The per-batch kernel: the K candidates' φ and R, the only compiled code that depends
on the programs.

Everything else the trainer compiles (task step and reset, networks, PPO update,
evaluation) is built from shapes alone, so it is compiled once per (task, K, S, width,
config) and then served from memory or the persistent cache (see ``limen_jax.rl.core``).
A new batch of programs compiles just this kernel: one φ and one R per candidate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from limen_jax.rl.compiled import CompileOnce, Wrap
from limen_jax.rl.env import BatchedInterface

PyTree = Any
# (sim, action, next_sim, with_reward) -> (reward, φ(next_sim), terms or None): see kernel_fn
Kernel = Callable[[PyTree, jax.Array, PyTree, jax.Array], tuple[jax.Array, jax.Array, jax.Array | None]]


def kernel_fn(iface: BatchedInterface, parts: int = 1) -> Kernel:
    """(sim, action, next_sim, with_reward) -> (reward float32[K, S, N], φ(next_sim)
    float32[K, S, N, width], terms float32[K, S, N, M] or None); leaves of sim lead with
    [K, S, N]. terms: the reward's named terms in ``iface.num_terms`` slots (see
    :meth:`BatchedInterface.reward_terms`), None when no candidate has any (M = 0).

    ``with_reward`` (bool[K, S], one value): False skips R (zeros), e.g. for fresh start
    states whose observation alone is needed; a ``cond`` keeps one compiled copy of each
    program. Every argument leads with [K, S], so a seed-sharded batch shards it too.

    ``parts`` > 1: the kernel of a batch whose K axis is sharded over ``parts`` devices
    (the mesh axis "cand", inside a shard_map): each device gets K / parts candidates and
    runs only theirs, a switch on its index among ``parts`` kernels of K / parts programs.
    """
    if parts > 1:
        return _sharded_kernel(iface, parts)

    def kernel(
        sim: PyTree, action: jax.Array, next_sim: PyTree, with_reward: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        obs = iface.observe(next_sim, 2)
        if not iface.num_terms:
            reward = jax.lax.cond(
                with_reward[0, 0],
                lambda: iface.reward(sim, action, next_sim, 2),
                lambda: jnp.zeros(obs.shape[:-1], jnp.float32),
            )
            return reward, obs, None
        reward, terms = jax.lax.cond(
            with_reward[0, 0],
            lambda: iface.reward_terms(sim, action, next_sim, 2),
            lambda: (jnp.zeros(obs.shape[:-1], jnp.float32), jnp.zeros(obs.shape[:-1] + (iface.num_terms,))),
        )
        return reward, obs, terms

    return kernel


def _sharded_kernel(iface: BatchedInterface, parts: int) -> Kernel:
    n = len(iface) // parts
    kernels = []
    for j in range(parts):
        part = BatchedInterface(iface.interfaces[j * n : (j + 1) * n], iface.width)
        part.num_terms = iface.num_terms  # every branch carries the batch's term slots
        kernels.append(kernel_fn(part))

    def kernel(
        sim: PyTree, action: jax.Array, next_sim: PyTree, with_reward: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        return jax.lax.switch(jax.lax.axis_index("cand"), kernels, sim, action, next_sim, with_reward)  # type: ignore[no-any-return]

    return kernel


class CompiledByShape:
    """``fn`` jitted, compiled on first use for each argument shape and dtype (``compile_s``
    accumulates the seconds spent compiling, or waiting for another thread's compile);
    with ``sharded``, arguments are placed as the executable expects (a shard_map over
    seeds). ``memo``: executables shared with other instances of the same function (a
    batch compiled ahead by another trainer)."""

    def __init__(self, fn: Callable[..., Any], sharded: bool = False, memo: CompileOnce | None = None) -> None:
        self._jit = jax.jit(fn)
        self._sharded = sharded
        self._compiled = CompileOnce() if memo is None else memo
        self.compile_s = 0.0

    def compile(self, *args: Any) -> jax.stages.Compiled:
        """The executable for these arguments (arrays or ``jax.ShapeDtypeStruct``)."""
        return self._executable(args)

    def __call__(self, *args: Any) -> Any:
        exe = self._executable(args)
        if self._sharded:
            args = jax.device_put(args, exe.input_shardings[0])
        return exe(*args)

    def _executable(self, args: tuple[Any, ...]) -> jax.stages.Compiled:
        sig = tuple((x.shape, x.dtype) for x in jax.tree.leaves(args))
        exe, seconds = self._compiled.get(sig, lambda: self._jit.lower(*args).compile())
        self.compile_s += seconds
        return exe  # type: ignore[no-any-return]


class ProgramKernel(CompiledByShape):
    """:func:`kernel_fn` compiled on first use for each batch shape [K, S, N] (``compile_s``
    accumulates the time spent compiling). ``wrap`` (e.g. a shard_map) is applied first.
    ``memo``: see :class:`CompiledByShape`; one per (programs, width, wrap). ``parts``: see
    :func:`kernel_fn`. ``with_reward`` is a Python bool here (the flag array is made once)."""

    def __init__(
        self, iface: BatchedInterface, wrap: Wrap | None = None, memo: CompileOnce | None = None, parts: int = 1
    ) -> None:
        fn = kernel_fn(iface, parts)
        super().__init__(wrap(fn) if wrap is not None else fn, wrap is not None, memo)
        self._flags: dict[tuple[tuple[int, ...], bool], jax.Array] = {}  # made once: not an eager op per step

    def _flag(self, action: jax.Array | jax.ShapeDtypeStruct, with_reward: bool) -> jax.Array:
        key = (action.shape[:2], bool(with_reward))
        if key not in self._flags:
            self._flags[key] = jnp.full(key[0], key[1])
        return self._flags[key]

    def compile(  # type: ignore[override]
        self, sim: PyTree, action: jax.Array | jax.ShapeDtypeStruct, next_sim: PyTree, with_reward: bool
    ) -> jax.stages.Compiled:
        return super().compile(sim, action, next_sim, self._flag(action, with_reward))

    def __call__(  # type: ignore[override]
        self, sim: PyTree, action: jax.Array, next_sim: PyTree, with_reward: bool
    ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        return super().__call__(sim, action, next_sim, self._flag(action, with_reward))  # type: ignore[no-any-return]
