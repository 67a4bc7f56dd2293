"""limen_jax: discover reinforcement-learning interfaces (observation and reward programs).

Importing this package is cheap; the heavy parts load on first use.
"""

from limen_jax.interface import Interface, default_interface
from limen_jax.task import Box, Discrete, Task, TaskState, Transition, make, register, registered_tasks

__all__ = [
    "Box",
    "Discrete",
    "Interface",
    "Task",
    "TaskState",
    "Transition",
    "default_interface",
    "make",
    "register",
    "registered_tasks",
]
__version__ = "0.1.0"
