"""JAX's persistent compilation cache, switched on by what limen_jax compiles (the
trainer, the checker, the CLIs through them), never by importing the package.

The trainer's program-independent part (task, networks, PPO, evaluation) compiles once
per shape and MJX tasks take a minute to compile their sampler; the cache makes such a
repeated compile (the same code and shapes in a later process) a lookup.
"""

from __future__ import annotations

import os

import jax


def enable_compilation_cache() -> None:
    """Turn on JAX's persistent compilation cache under ~/.cache/limen_jax/xla, or
    $LIMEN_JAX_XLA_CACHE ("off" leaves it off), unless the user configured one."""
    path = os.environ.get("LIMEN_JAX_XLA_CACHE", os.path.expanduser("~/.cache/limen_jax/xla"))
    if path == "off":
        return
    if jax.config.jax_compilation_cache_dir is None:  # type: ignore[attr-defined]
        jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
