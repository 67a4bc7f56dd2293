"""Masked running observation statistics."""

import jax.numpy as jnp
import numpy as np

from limen_jax.rl.normalize import Moments, batch_moments, combine_moments, init_stats, normalize, update_stats


def test_running_stats_match_numpy_and_skip_padded_features():
    rng = np.random.default_rng(0)
    a = rng.normal(3.0, 2.0, (50, 4)).astype(np.float32)
    b = rng.normal(-1.0, 0.5, (70, 4)).astype(np.float32)
    a[:, 3] = b[:, 3] = 0.0  # the padded feature is always 0
    mask = jnp.array([True, True, True, False])
    stats = update_stats(init_stats(4), batch_moments(jnp.asarray(a)), mask)
    stats = update_stats(stats, batch_moments(jnp.asarray(b)), mask)
    both = np.concatenate([a, b])
    np.testing.assert_allclose(stats.mean[:3], both.mean(0)[:3], rtol=1e-5)
    np.testing.assert_allclose(stats.var[:3], both.var(0)[:3], rtol=1e-4)
    assert float(stats.mean[3]) == 0.0 and float(stats.var[3]) == 1.0
    assert float(stats.count) == 120
    x = normalize(stats, jnp.asarray(both), mask, clip=10.0)
    np.testing.assert_allclose(np.asarray(x)[:, :3].mean(0), 0.0, atol=1e-4)
    assert np.all(np.asarray(x)[:, 3] == 0.0)


def test_padded_features_are_zeroed_even_if_nonzero():
    stats = init_stats(3)
    x = normalize(stats, jnp.array([[1.0, 2.0, 5.0]]), jnp.array([True, True, False]), clip=10.0)
    np.testing.assert_array_equal(np.asarray(x), [[1.0, 2.0, 0.0]])
    x = normalize(stats, jnp.array([[1.0, 20.0, 5.0]]), jnp.array([True, True, False]), clip=10.0, enabled=False)
    np.testing.assert_array_equal(np.asarray(x), [[1.0, 20.0, 0.0]])


def test_clip():
    x = normalize(init_stats(1), jnp.array([[50.0]]), jnp.array([True]), clip=5.0)
    assert float(x[0, 0]) == 5.0


def test_combine_moments_empty_side():
    m = batch_moments(jnp.array([[1.0], [3.0]]))
    empty = Moments(jnp.zeros(1), jnp.zeros(1), jnp.zeros(()))
    c = combine_moments(empty, m)
    assert float(c.mean[0]) == 2.0 and float(c.m2[0]) == 2.0 and float(c.count) == 2.0
