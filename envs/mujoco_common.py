"""Shared plumbing for the MJX tasks (go1_push, panda_track): the sim pytree, helpers.

The offline menagerie and the MJX compile-time fix are engine code shared with the
Playground adapter (:mod:`limen_jax.adapters.mjx_support`); they are re-exported here.
"""

from __future__ import annotations

import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from limen_jax.adapters.mjx_support import menagerie_path, patch_mjx_tree_scan, use_offline_menagerie

__all__ = ["ASSETS_DIR", "MjxSim", "completed", "menagerie_path", "patch_mjx_tree_scan", "quat_to_yaw", "sensor_slice",
           "use_offline_menagerie"]  # fmt: skip

ASSETS_DIR = pathlib.Path(__file__).resolve().parent / "assets"


class MjxSim(struct.PyTreeNode):
    """The simulator state interface programs see for the MJX tasks.

    The fields of MuJoCo Playground's ``State``, which the reference's task contexts
    document, so that programs written for the reference run here:

    data: ``mujoco.mjx.Data`` of the robot (``data.qpos``, ``data.qvel``, ``data.ctrl``,
        ``data.actuator_force``, ``data.site_xpos``, ...).
    info: dict of task quantities (names as in the paper's Appendix C); ``info["rng"]``
        is the task's own key for in-episode randomness.
    obs: float32[D], the task's default observation of this state.
    reward: float32[], the task's sparse reward for the step into this state (1.0 on the
        last step of a successful trajectory; these tasks have no native dense reward).
    done: float32[], 1.0 when the step into this state terminated the episode.
    metrics: dict of float32[] scalars the task logs each step.
    """

    data: Any
    info: dict[str, Any]
    obs: Any = None
    reward: Any = None
    done: Any = None
    metrics: Any = None


def completed(sim: MjxSim, obs: jax.Array, reward: jax.Array, done: jax.Array, metrics: dict[str, Any]) -> MjxSim:
    """``sim`` with Playground's documented fields filled (dtypes fixed: float32)."""
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    metrics = {k: f32(v) for k, v in metrics.items()}
    return sim.replace(obs=f32(obs), reward=f32(reward), done=f32(done), metrics=metrics)


def quat_to_yaw(quat: jax.Array) -> jax.Array:
    """Yaw (rad) of a (w, x, y, z) quaternion: float32[]."""
    w, x, y, z = quat[0], quat[1], quat[2], quat[3]
    return jnp.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def sensor_slice(mj_model: Any, name: str) -> slice:
    """The slice of ``data.sensordata`` that holds sensor ``name`` (resolved once, on the host)."""
    sid = mj_model.sensor(name).id
    adr = int(mj_model.sensor_adr[sid])
    return slice(adr, adr + int(mj_model.sensor_dim[sid]))


def render_frame(mj_model: Any, sim: MjxSim, height: int = 240, width: int = 320) -> np.ndarray:
    """An RGB frame (uint8[height, width, 3]) of one simulator state, MuJoCo's offscreen
    renderer. It needs an OpenGL backend (MUJOCO_GL=egl or osmesa); without one this
    raises NotImplementedError saying so."""
    import mujoco

    data = mujoco.MjData(mj_model)
    data.qpos[:] = np.asarray(sim.data.qpos)
    data.qvel[:] = np.asarray(sim.data.qvel)
    mujoco.mj_forward(mj_model, data)
    try:
        renderer = mujoco.Renderer(mj_model, height, width)
    except Exception as exc:  # no GL context: the message is the backend's own
        raise NotImplementedError(
            f"MuJoCo offscreen rendering needs an OpenGL backend (set MUJOCO_GL=egl or osmesa): {exc}"
        ) from None
    with renderer:
        renderer.update_scene(data)
        return np.asarray(renderer.render())
