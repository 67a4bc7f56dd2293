"""Running mean/variance observation normalisation, masked for padded features.

In a batch of candidates the observations are padded to the largest ``obs_dim``; the
mask marks a candidate's real features. Padded features are normalised to exactly 0 and
never enter the statistics (their mean stays 0 and variance 1), so a candidate trains
the same padded or alone.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


class ObsStats(struct.PyTreeNode):
    """mean, var: float32[D]; count: float32[] (observations seen)."""

    mean: jax.Array
    var: jax.Array
    count: jax.Array


def init_stats(dim: int) -> ObsStats:
    return ObsStats(jnp.zeros((dim,), jnp.float32), jnp.ones((dim,), jnp.float32), jnp.zeros((), jnp.float32))


class Moments(struct.PyTreeNode):
    """Batch moments: mean, m2 (sum of squared deviations): float32[D]; count: float32[]."""

    mean: jax.Array
    m2: jax.Array
    count: jax.Array


def batch_moments(x: jax.Array) -> Moments:
    """Moments of ``x``: float32[..., D] over every leading axis."""
    flat = x.reshape(-1, x.shape[-1])
    mean = flat.mean(0)
    return Moments(mean, jnp.square(flat - mean).sum(0), jnp.asarray(flat.shape[0], jnp.float32))


def combine_moments(a: Moments, b: Moments) -> Moments:
    """Chan et al.'s parallel combination of two sets of moments."""
    count = a.count + b.count
    safe = jnp.maximum(count, 1.0)
    delta = b.mean - a.mean
    mean = a.mean + delta * b.count / safe
    m2 = a.m2 + b.m2 + jnp.square(delta) * a.count * b.count / safe
    return Moments(mean, m2, count)


def update_stats(stats: ObsStats, batch: Moments, mask: jax.Array) -> ObsStats:
    """Fold a batch's moments into the running statistics; masked-out features keep 0/1.

    mask: bool[D], True for real features.
    """
    old = Moments(stats.mean, stats.var * stats.count, stats.count)
    new = combine_moments(old, batch)
    var = new.m2 / jnp.maximum(new.count, 1.0)
    return ObsStats(
        mean=jnp.where(mask, new.mean, 0.0),
        var=jnp.where(mask, var, 1.0),
        count=new.count,
    )


def normalize(stats: ObsStats, x: jax.Array, mask: jax.Array, clip: float, enabled: bool = True) -> jax.Array:
    """Standardise ``x``: float32[..., D]; padded features (mask False) become exactly 0."""
    if enabled:
        x = jnp.clip((x - stats.mean) / jnp.sqrt(stats.var + 1e-8), -clip, clip)
    return jnp.where(mask, x, 0.0)
