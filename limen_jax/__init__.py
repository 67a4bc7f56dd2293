"""limen_jax: discover reinforcement-learning interfaces (observation and reward programs).

Importing this package is cheap; the heavy parts load on first use. The training core
(``limen_jax.rl``) and the sandbox workers load no search, LLM or archive module
(tests/test_imports.py).
"""

from typing import Any

from limen_jax.interface import Interface, default_interface
from limen_jax.task import Box, Discrete, Task, TaskState, Transition, make, register, registered_tasks

__all__ = [
    "Box",
    "Discrete",
    "EvolveConfig",
    "Interface",
    "RunResult",
    "Task",
    "TaskState",
    "Transition",
    "default_interface",
    "evolve",
    "make",
    "register",
    "registered_tasks",
    "resume",
]
__version__ = "0.1.0"

# Loaded on first use. `evolve` is the function (limen_jax.run.start); the module
# limen_jax.evolve is only the command line, run with `python -m limen_jax.evolve`.
_LAZY = {"evolve": ("limen_jax.run.start", "evolve"), "resume": ("limen_jax.run.start", "resume"),
         "EvolveConfig": ("limen_jax.config", "EvolveConfig"),
         "RunResult": ("limen_jax.run_result", "RunResult"), "train": ("limen_jax.rl", "train")}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        mod = importlib.import_module(module)
        return getattr(mod, attr)
    raise AttributeError(f"module 'limen_jax' has no attribute {name!r}")
