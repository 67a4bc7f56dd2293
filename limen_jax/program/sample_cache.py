"""The check sample on disk: built once per task and machine, then read back.

Building the sample compiles and runs the task's rollouts: seconds for XLand, minutes for
an MJX task on a CPU (``playground:CartpoleBalance``: see docs/concepts/checker.md). The built
sample is kept under the XLA compile cache's directory (``$LIMEN_JAX_XLA_CACHE`` or
``~/.cache/limen_jax/xla``; ``off`` keeps nothing) in ``check_samples/<key>.npz``,
keyed by the task (its name, class, parameters and the source of its classes), the
sample's limits and the versions of the packages that simulate it.

The file is input like any other: it is read with ``allow_pickle=False`` and used only
when it holds exactly the leaves the task's sampler would return (count, shapes, dtypes,
found by tracing the sampler, not running it); anything else is ignored and rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

# the distributions whose code decides what a sample holds
VERSIONED = ("limen_jax", "jax", "jaxlib", "xminigrid", "mujoco", "mujoco-mjx", "brax", "playground")


def cache_dir() -> Path | None:
    """Where samples are kept; None when the compile cache is off."""
    path = os.environ.get("LIMEN_JAX_XLA_CACHE", os.path.expanduser("~/.cache/limen_jax/xla"))
    return None if path == "off" else Path(path) / "check_samples"


def cache_key(task: Any, limits: Any) -> str:
    """A hex digest of what decides the sample of ``task`` under ``limits``."""
    sources = []
    for cls in type(task).__mro__:
        try:
            sources.append(hashlib.sha256(Path(inspect.getfile(cls)).read_bytes()).hexdigest())
        except (TypeError, OSError):  # a builtin, or a class with no file
            continue
    facts = {
        "task": task.name, "class": f"{type(task).__module__}.{type(task).__qualname__}", "sources": sources,
        "params": sorted((k, float(v)) for k, v in dict(task.params).items()),
        "limits": [limits.sample_size, limits.long_sample_size, limits.scripted_sample_size, limits.sample_seed],
        "versions": {d: _version(d) for d in VERSIONED},
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]


def load(key: str, expected: Callable[[], Any]) -> Any | None:
    """The sample stored under ``key`` as the pytree ``expected()`` (its
    ``jax.ShapeDtypeStruct`` leaves; asked only when a file is there) describes; None when
    there is none or it does not fit."""
    root = cache_dir()
    if root is None or not (root / f"{key}.npz").is_file():
        return None
    shapes, treedef = jax.tree.flatten(expected())
    try:
        with np.load(root / f"{key}.npz", allow_pickle=False) as f:
            arrays = [f[f"leaf_{i}"] for i in range(len(shapes))]
            impls = [str(x) for x in f["key_impls"]]
            extra = len(f.files) != len(shapes) + 1
    except (OSError, KeyError, ValueError):
        return None
    if extra or len(impls) != len(shapes):
        return None
    leaves = []
    for array, impl, want in zip(arrays, impls, shapes, strict=True):
        try:
            leaf = jax.random.wrap_key_data(array, impl=impl) if impl else jax.numpy.asarray(array)
        except (TypeError, ValueError):
            return None
        if leaf.shape != want.shape or leaf.dtype != want.dtype:
            return None
        leaves.append(leaf)
    return jax.tree.unflatten(treedef, leaves)


def save(key: str, sample: Any) -> None:
    """Store ``sample`` under ``key`` (written to a temporary file, then renamed, so a
    reader never sees half a file); a directory that cannot be written keeps nothing."""
    root = cache_dir()
    if root is None:
        return
    arrays, impls = {}, []
    for i, leaf in enumerate(jax.tree.leaves(sample)):
        typed = jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)
        impls.append(str(jax.random.key_impl(leaf)) if typed else "")
        arrays[f"leaf_{i}"] = np.asarray(jax.random.key_data(leaf) if typed else leaf)
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, suffix=".tmp", delete=False) as f:
            np.savez(f, key_impls=np.array(impls, dtype=str), **arrays)  # type: ignore[arg-type]
        os.replace(f.name, root / f"{key}.npz")
    except OSError:
        return


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
