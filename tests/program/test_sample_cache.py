"""The check sample on disk: written once, read back leaf for leaf (PRNG keys included),
and a file that does not hold exactly the expected leaves is ignored, never unpickled."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

import limen_jax
from limen_jax.program import Limits, sample_cache
from limen_jax.program.checks import check_sample


@pytest.fixture
def stored(easy_task, easy_sample, tmp_path, monkeypatch):
    monkeypatch.setenv("LIMEN_JAX_XLA_CACHE", str(tmp_path / "xla"))
    key = sample_cache.cache_key(easy_task, Limits())
    sample_cache.save(key, easy_sample)
    shapes = lambda: jax.eval_shape(lambda s: s, easy_sample)  # noqa: E731
    return key, shapes, tmp_path / "xla" / "check_samples" / f"{key}.npz"


def test_a_stored_sample_reads_back_leaf_for_leaf(stored, easy_sample):
    key, shapes, path = stored
    assert path.is_file()
    back = sample_cache.load(key, shapes)
    assert jax.tree.structure(back) == jax.tree.structure(easy_sample)
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(easy_sample), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_file_that_does_not_fit_is_ignored(stored):
    key, shapes, path = stored
    with np.load(path) as f:
        arrays = dict(f)
    np.savez(path, **{**arrays, "leaf_0": arrays["leaf_0"][:3]})  # a leaf of the wrong shape
    assert sample_cache.load(key, shapes) is None
    np.savez(path, **{**arrays, "leaf_0": np.array([{"x": 1}], dtype=object)})  # would need unpickling
    assert sample_cache.load(key, shapes) is None
    path.write_bytes(b"not an npz")
    assert sample_cache.load(key, shapes) is None
    assert sample_cache.load("no-such-key", shapes) is None


def test_the_key_follows_the_limits_and_the_task(easy_task):
    base = sample_cache.cache_key(easy_task, Limits())
    assert base == sample_cache.cache_key(easy_task, Limits())
    assert base != sample_cache.cache_key(easy_task, dataclasses.replace(Limits(), sample_seed=1))
    assert base != sample_cache.cache_key(limen_jax.make("xland_medium"), Limits())


def test_check_sample_keeps_what_it_built(easy_task, tmp_path, monkeypatch):
    from limen_jax.program import checks

    monkeypatch.setenv("LIMEN_JAX_XLA_CACHE", str(tmp_path / "xla"))
    monkeypatch.setattr(checks, "_SAMPLES", dict(checks._SAMPLES))  # this test's memo only
    limits = dataclasses.replace(Limits(), long_sample_size=0, scripted_sample_size=0)
    for k in [k for k in checks._SAMPLES if k[0] == "check"]:
        del checks._SAMPLES[k]
    built = check_sample(easy_task, limits)
    assert list((tmp_path / "xla" / "check_samples").iterdir()) == [
        tmp_path / "xla" / "check_samples" / f"{sample_cache.cache_key(easy_task, limits)}.npz"]
    assert check_sample(easy_task, limits) is built
