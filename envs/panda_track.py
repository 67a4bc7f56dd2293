"""panda_track: Franka Panda Lissajous target tracking on MJX (paper §5, App. C.3; DESIGN.md §4).

The arm's end-effector (the hand's ``gripper`` site) must follow a target moving on a
3-D Lissajous curve

    x = 0.45 + r sin(s fx t + px),  y = r sin(s fy t + py),  z = 0.18 + 0.7 r sin(s fz t)

with t = step_count x 0.02 s, r = ``radius`` (0.10 m), s = ``traj_speed`` (0.35) and, per
episode, fx, fy ~ U(1, 3), fz ~ U(0.8, 2), px, py ~ U(0, 2 pi). Actions are 8 control
deltas (7 arm joints + gripper) x 0.04 added to the previous position-control targets and
clipped to the actuator ranges. Success, evaluated once at the end: the mean
end-effector error over the 500 steps is below 0.02 m.

The scene (``assets/panda_track.xml``) is the menagerie's MJX Panda with contacts
disabled and no floor, so MJX's jax implementation runs no collision detection; the
target is a mocap body. Mechanics follow the paper's reference code (which used
Playground's cube scene): ``prev_ctrl`` is the control before the step's update, the
trajectory time is the post-step counter x ctrl_dt, and the episode ends early only if
the physics produces NaNs.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import mujoco
from limen_envs import panda_catalog
from limen_envs.mujoco_common import ASSETS_DIR, MjxSim, completed, patch_mjx_tree_scan, render_frame
from limen_envs.presets import MUJOCO_CPU, PANDA_PAPER, TINY_CPU, paper_budget
from mujoco import mjx

from limen_jax.catalog import Catalog
from limen_jax.task import Box, Task, TaskState

CTRL_DT = 0.02
SIM_DT = 0.005
ACTION_SCALE = 0.04
CENTER = (0.45, 0.0, 0.18)
Z_AMPLITUDE = 0.7  # z amplitude = 0.7 x radius
SUCCESS_MEAN_ERROR = 0.02  # m

_CONTEXT = """\
## Environment: Franka Panda target tracking (MuJoCo MJX)

The 7-joint Panda arm must keep its end-effector (the point between the fingertips,
`state.info["gripper_pos"]`) on a target that moves along a 3-D Lissajous curve:

    t = state.info["step_count"] * 0.02          # seconds
    x = 0.45 + {r:g} * sin({s:g} * freq_x * t + phase_x)
    y = 0.00 + {r:g} * sin({s:g} * freq_y * t + phase_y)
    z = 0.18 + {rz:g} * sin({s:g} * freq_z * t)

(radius {r:g} m, z amplitude 0.7 x radius, speed factor {s:g}). Per episode,
freq_x, freq_y ~ U(1, 3), freq_z ~ U(0.8, 2), phase_x, phase_y ~ U(0, 2 pi); they are
in `state.info["traj_params"]`. The arm starts in its home pose with the end-effector
at about (0.68, 0.00, 0.38), some 0.3 m from the curve.

**Success** (evaluated once, at the end of the trajectory): the mean end-effector
tracking error over the {horizon}-step episode, `info["cumulative_tracking_error"] / {horizon}`,
is below 0.02 m (2 cm).

Control: 50 Hz (ctrl_dt 0.02 s; physics sim_dt 0.005 s, 4 substeps); episode length
{horizon} steps (10 s), the same for training and evaluation. No contacts (arm-only scene).

### State (argument `state`; `state.data` is a `mujoco.mjx.Data`, `state.info` a dict)
- `state.data.qpos`: float32 (9,): 7 arm joint angles [0:7] (rad), 2 finger joints
  [7:9] (m, 0..0.04).
- `state.data.qvel`: float32 (9,): the matching joint velocities.
- `state.data.ctrl`: float32 (8,): current position-control targets (7 arm joints in rad,
  gripper opening 0..0.04).
- `state.data.actuator_force`: float32 (8,): actuator forces.
- `state.info["target_pos"]`: float32 (3,): the target position now (m, world frame).
- `state.info["target_vel"]`: float32 (3,): its analytical velocity (m/s).
- `state.info["gripper_pos"]`: float32 (3,): end-effector position (m, world frame).
- `state.info["gripper_target_dist"]`: float32 (): Euclidean tracking error (m).
- `state.info["traj_params"]`: dict of float32 () scalars `freq_x`, `freq_y`, `freq_z`,
  `phase_x`, `phase_y` (the angular rate on x is {s:g} * freq_x rad/s).
- `state.info["prev_ctrl"]`: float32 (8,): the control targets before the last action.
- `state.info["step_count"]`: int32 (): control steps taken in this episode.
- `state.info["cumulative_tracking_error"]`: float32 (): sum over steps of
  `gripper_target_dist`.
- `state.info["tracking_steps"]`: float32 (): steps accumulated (= step_count).
- `state.info["rng"]`: the task's random key (internal; do not use).
- `state.obs`: float32 (20,): the default observation (arm qpos 7, arm qvel 7,
  gripper_pos 3, target_pos 3).
- `state.reward`: float32 (): 1.0 on the last step of a successful episode, else 0
  (the sparse success reward; this task has no other native reward).
- `state.done`: float32 (): 1.0 when the physics produced NaNs (the only termination).
- `state.metrics["tracking_error"]`: float32 (): `info["gripper_target_dist"]`.

Scene: arm only. The reference ran on Playground's pick-cube scene, whose qpos (16,)
adds a free cube (7) to the arm's 9; the cube plays no part in tracking, and this scene
leaves it (and the floor and contacts) out so that MJX runs no collision detection:
`state.data.qpos` is (9,) here. Index the arm as `qpos[0:7]`, `qvel[0:7]` and the
fingers as `qpos[7:9]`; these match the reference's layout.

Arm joint ranges (rad): {ranges}.

### Actions (`action`, float32 (8,), each in [-1, 1])
Deltas of the position-control targets: ctrl <- clip(ctrl + 0.04 x action, limits), for
the 7 arm joints and the gripper (index 7, irrelevant to tracking).
"""


class PandaTrack(Task):
    """Franka Panda: track a moving Lissajous target with the end-effector."""

    name = "panda_track"
    description = "Franka Panda (MJX): track a 3-D Lissajous target with the end-effector; 500 steps"
    episode_length = 500
    action_space = Box(8, -1.0, 1.0)
    ppo_presets = {"cpu": {**MUJOCO_CPU, "ent_coef": 0.015}, "paper": PANDA_PAPER}
    budgets = {"paper": paper_budget(3_000_000, 15_000_000, 0.0), "cpu": TINY_CPU}
    # traj_speed: the reference's target_speed (angular rate = traj_speed x freq); radius:
    # Lissajous amplitude in metres (z amplitude 0.7 x radius). Closure constants.
    params = {"traj_speed": 0.35, "radius": 0.10}

    def __init__(self, **params: float) -> None:
        super().__init__(**params)
        patch_mjx_tree_scan()
        self._speed = float(self.params["traj_speed"])
        self._radius = float(self.params["radius"])
        self.mj_model = _load_panda()
        self.mjx_model = mjx.put_model(self.mj_model, impl="jax")
        m = self.mj_model
        self._n_substeps = int(round(CTRL_DT / SIM_DT))
        self._init_ctrl = jnp.asarray(m.keyframe("home").ctrl, jnp.float32)
        self._lowers = jnp.asarray(m.actuator_ctrlrange[:, 0], jnp.float32)
        self._uppers = jnp.asarray(m.actuator_ctrlrange[:, 1], jnp.float32)
        self._gripper_site = int(m.site("gripper").id)
        self._mocap = int(m.body("mocap_target").mocapid[0])
        d = mujoco.MjData(m)
        mujoco.mj_resetDataKeyframe(m, d, m.keyframe("home").id)
        mujoco.mj_forward(m, d)
        self._data0 = mjx.put_data(m, d, impl="jax")

    # --- trajectory -------------------------------------------------------------------

    def target_pos(self, t: jax.Array, tp: dict[str, jax.Array]) -> jax.Array:
        """Target position at time ``t`` (s): float32[3]."""
        s, r = self._speed, self._radius
        return jnp.stack(
            [
                CENTER[0] + r * jnp.sin(s * tp["freq_x"] * t + tp["phase_x"]),
                CENTER[1] + r * jnp.sin(s * tp["freq_y"] * t + tp["phase_y"]),
                CENTER[2] + Z_AMPLITUDE * r * jnp.sin(s * tp["freq_z"] * t),
            ]
        ).astype(jnp.float32)

    def target_vel(self, t: jax.Array, tp: dict[str, jax.Array]) -> jax.Array:
        """Analytical target velocity at time ``t`` (m/s): float32[3]."""
        s, r = self._speed, self._radius
        return jnp.stack(
            [
                r * s * tp["freq_x"] * jnp.cos(s * tp["freq_x"] * t + tp["phase_x"]),
                r * s * tp["freq_y"] * jnp.cos(s * tp["freq_y"] * t + tp["phase_y"]),
                Z_AMPLITUDE * r * s * tp["freq_z"] * jnp.cos(s * tp["freq_z"] * t),
            ]
        ).astype(jnp.float32)

    # --- dynamics ---------------------------------------------------------------------

    def render(self, sim: Any) -> Any:
        return render_frame(self.mj_model, sim)

    def reset(self, key: jax.Array) -> TaskState:
        k_traj, k_rng = jax.random.split(key)
        ks = jax.random.split(k_traj, 5)
        u = lambda k, lo, hi: jax.random.uniform(k, (), jnp.float32, lo, hi)  # noqa: E731
        traj = {
            "freq_x": u(ks[0], 1.0, 3.0),
            "freq_y": u(ks[1], 1.0, 3.0),
            "freq_z": u(ks[2], 0.8, 2.0),
            "phase_x": u(ks[3], 0.0, 2.0 * jnp.pi),
            "phase_y": u(ks[4], 0.0, 2.0 * jnp.pi),
        }
        target = self.target_pos(jnp.float32(0.0), traj)
        # The arm always starts at home: reuse a host-computed forward pass (no traced
        # mjx.forward, which is slow to compile); only the target moves.
        data = self._data0.replace(mocap_pos=self._data0.mocap_pos.at[self._mocap].set(target))
        info = {
            "rng": k_rng,
            "traj_params": traj,
            "step_count": jnp.asarray(0, jnp.int32),
            "prev_ctrl": self._init_ctrl,
            "cumulative_tracking_error": jnp.asarray(0.0, jnp.float32),
            "tracking_steps": jnp.asarray(0.0, jnp.float32),
        }
        sim = self._complete(MjxSim(data=data, info=self._with_tracking(data, info)))
        false = jnp.asarray(False)
        return TaskState(sim=sim, done=false, success=false)

    def step(self, state: TaskState, action: jax.Array) -> TaskState:
        data, info = state.sim.data, state.sim.info
        ctrl = jnp.clip(data.ctrl + ACTION_SCALE * jnp.asarray(action, jnp.float32), self._lowers, self._uppers)
        data = self._physics(data, ctrl)
        step_count = info["step_count"] + 1
        target = self.target_pos(step_count * CTRL_DT, info["traj_params"])
        data = data.replace(mocap_pos=data.mocap_pos.at[self._mocap].set(target))
        dist = jnp.linalg.norm(data.site_xpos[self._gripper_site] - target)
        new_info = {
            **info,
            "step_count": step_count,
            "prev_ctrl": state.sim.data.ctrl,
            "cumulative_tracking_error": info["cumulative_tracking_error"] + dist,
            "tracking_steps": info["tracking_steps"] + 1.0,
        }
        sim = self._complete(MjxSim(data=data, info=self._with_tracking(data, new_info)))
        done = jnp.isnan(data.qpos).any() | jnp.isnan(data.qvel).any()
        return TaskState(sim=sim, done=done, success=state.success | self._succeeded(sim))

    def _complete(self, sim: MjxSim) -> MjxSim:
        """Fill ``obs``, ``reward``, ``done`` and ``metrics`` (Playground's State fields)."""
        done = jnp.isnan(sim.data.qpos).any() | jnp.isnan(sim.data.qvel).any()
        metrics = {"tracking_error": sim.info["gripper_target_dist"]}
        return completed(sim, self.default_observation(sim), self._succeeded(sim), done, metrics)

    def _physics(self, data: Any, ctrl: jax.Array) -> Any:
        def substep(d: Any, _: None) -> tuple[Any, None]:
            return mjx.step(self.mjx_model, d.replace(ctrl=ctrl)), None

        return jax.lax.scan(substep, data, None, self._n_substeps)[0]

    def _with_tracking(self, data: Any, info: dict[str, Any]) -> dict[str, Any]:
        t = info["step_count"] * CTRL_DT
        target = self.target_pos(t, info["traj_params"])
        gripper = data.site_xpos[self._gripper_site]
        return {
            **info,
            "target_pos": target,
            "target_vel": self.target_vel(t, info["traj_params"]),
            "gripper_pos": gripper,
            "gripper_target_dist": jnp.linalg.norm(target - gripper),
        }

    # --- success ----------------------------------------------------------------------

    def _succeeded(self, sim: MjxSim) -> jax.Array:
        """True only on the final step of a trajectory whose mean tracking error is < 2 cm."""
        steps = sim.info["step_count"]
        mean_err = sim.info["cumulative_tracking_error"] / jnp.maximum(steps, 1).astype(jnp.float32)
        finite = ~(jnp.isnan(sim.data.qpos).any() | jnp.isnan(sim.data.qvel).any())
        return (steps >= self.episode_length) & finite & (mean_err < SUCCESS_MEAN_ERROR)

    # --- baselines --------------------------------------------------------------------

    def default_observation(self, sim: MjxSim) -> jax.Array:
        """The reference's raw observation, float32[20]: arm qpos 7, arm qvel 7,
        gripper_pos 3, target_pos 3."""
        d, info = sim.data, sim.info
        parts = [d.qpos[0:7], d.qvel[0:7], info["gripper_pos"], info["target_pos"]]
        return jnp.concatenate(parts).astype(jnp.float32)

    def sparse_reward(self, sim: MjxSim, action: jax.Array, next_sim: MjxSim) -> jax.Array:
        """1.0 on the final step of a successful trajectory, else 0."""
        return self._succeeded(next_sim).astype(jnp.float32)

    def offline_catalog(self) -> Catalog:
        return panda_catalog.catalog(self.episode_length, self._radius, self._speed)

    @property
    def context(self) -> str:
        lo, hi = self.mj_model.jnt_range[:7].T
        ranges = ", ".join(f"[{a:.2f}, {b:.2f}]" for a, b in zip(lo, hi, strict=True))
        r, s = self._radius, self._speed
        return _CONTEXT.format(r=r, rz=Z_AMPLITUDE * r, s=s, horizon=self.episode_length, ranges=ranges)


def _load_panda() -> mujoco.MjModel:
    """The arm-only Panda scene (menagerie dynamics, primitive geoms, no contacts, mocap target)."""
    m = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "panda_track.xml"))
    m.opt.timestep = SIM_DT
    return m
