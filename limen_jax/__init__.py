"""limen_jax: discover reinforcement-learning interfaces (observation and reward programs).

Importing this package is cheap; the heavy parts load on first use.
"""

from limen_jax.config import EvolveConfig
from limen_jax.evolve import RunResult, evolve, resume  # rebinds `evolve` from the module to the function
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
