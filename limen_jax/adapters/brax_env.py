"""Brax environments as tasks: ``--task brax:<env>``.

Any environment of ``brax.envs`` (``reacher``, ``pusher``, ``inverted_pendulum``, ...),
stepped on Brax's default (generalized) pipeline without Brax's training wrappers (the
engine handles horizons and auto-reset). The state programs see is Brax's own ``State``
(``pipeline_state``, ``obs``, ``reward``, ``done``, ``metrics``, ``info``); see
:mod:`limen_jax.adapters.env_task` for what is added and for the default success rule.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, ClassVar

from limen_jax.adapters.env_task import EnvTask, SuccessFn, subclass
from limen_jax.adapters.mjx_support import patch_mjx_tree_scan
from limen_jax.registry import unknown_env

# Brax's training wrappers cut episodes at 1000 steps; its environments have no horizon.
BRAX_EPISODE_LENGTH = 1000


class BraxEnvTask(EnvTask):
    """A Brax environment as a task."""

    family = "brax"
    backend: ClassVar[str] = "generalized"

    def load_env(self) -> tuple[Any, int]:
        from brax import envs

        patch_mjx_tree_scan()
        if self.env_name not in envs._envs:
            raise unknown_env("brax", self.env_name, sorted(envs._envs))
        with warnings.catch_warnings():
            # Brax's notice that it is unmaintained, printed on every load
            warnings.filterwarnings("ignore", message="Brax System", category=UserWarning)
            env = envs.get_environment(self.env_name, backend=self.backend)
        return env, BRAX_EPISODE_LENGTH


@functools.cache
def _cached(env_name: str) -> type[EnvTask]:
    return subclass(BraxEnvTask, env_name)


def task_class(env_name: str, *, name: str | None = None, success: SuccessFn | None = None,
               success_doc: str = "", horizon: int = 0, success_reward: float | None = None,
               description: str = "", backend: str = "generalized") -> type[EnvTask]:  # fmt: skip
    """The task class for Brax environment ``env_name`` (one class per name when called
    with the name alone, as ``--task brax:<env>`` does)."""
    if (name, success, horizon, success_reward, description, backend) == (None, None, 0, None, "", "generalized"):
        return _cached(env_name)
    return subclass(BraxEnvTask, env_name, name=name, success=success, success_doc=success_doc, horizon=horizon,
                    success_reward=success_reward, description=description, backend=backend)  # fmt: skip
