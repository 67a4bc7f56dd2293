"""Hand-written reference interfaces for the bundled tasks, one program file per task.

They are ordinary interface programs (the same AST policy and checks apply) and serve
as examples, as baselines, and as fixtures for learning tests.
"""

from __future__ import annotations

import pathlib

_HERE = pathlib.Path(__file__).resolve().parent


def path(task_name: str) -> pathlib.Path:
    """The reference interface program for ``task_name`` (e.g. ``"xland_easy"``)."""
    file = _HERE / f"{task_name}.py"
    if task_name.startswith("_") or not file.is_file():
        known = sorted(p.stem for p in _HERE.glob("*.py") if not p.stem.startswith("_"))
        raise KeyError(f"no reference interface for {task_name!r}; available: {', '.join(known)}")
    return file
