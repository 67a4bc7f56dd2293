"""go1_push: Unitree Go1 push recovery on MJX (paper §5, App. C.2; DESIGN.md §4).

The robot starts standing in the home pose at the origin. Every ``push_interval`` (75)
control steps a horizontal force of U(150, 400) N x ``push_force`` in a random direction
(vector (cos a, sin a, 0.1) x magnitude) is applied to the torso through
``data.xfrc_applied`` for 5 control steps. The episode terminates when the body
up-vector's z falls below 0.3. Success, evaluated once per trajectory at the end:
survived all 500 steps and the mean base displacement from the origin
(``cum_pos_error / 500``) is below 0.10 m.

Built on MuJoCo Playground's Go1 (feet-only flat-terrain scene, the Joystick/Getup PD
gains Kp 35, Kd 0.5) with MJX ``impl="jax"``; the menagerie model comes from a pip
package (:mod:`limen_envs.mujoco_common`). Push mechanics follow the paper's reference
code: the step counter is incremented first, a new force is drawn when
``step_count % push_interval == 0`` and applied while ``step_count % push_interval < 5``;
``info["push_force"]`` keeps the last drawn force between pushes.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from limen_envs import go1_catalog
from limen_envs.mujoco_common import (
    MjxSim,
    completed,
    patch_mjx_tree_scan,
    quat_to_yaw,
    render_frame,
    sensor_slice,
    use_offline_menagerie,
)
from limen_envs.presets import GO1_PAPER, MUJOCO_CPU, TINY_CPU, paper_budget
from mujoco import mjx

from limen_jax.catalog import Catalog
from limen_jax.task import Box, Task, TaskState, Transition

CTRL_DT = 0.02
SIM_DT = 0.004
KP = 35.0
KD = 0.5
ACTION_SCALE = 0.5
PUSH_DURATION = 5  # control steps per push
PUSH_MIN, PUSH_MAX = 150.0, 400.0  # N, before the push_force scale
FALL_UPVECTOR_Z = 0.3
SUCCESS_MEAN_DISPLACEMENT = 0.10  # m

_CONTEXT = """\
## Environment: Unitree Go1 push recovery (MuJoCo MJX)

The Go1 quadruped stands at the origin on flat ground. Random horizontal pushes hit the
torso: every {interval} control steps (at `step_count % {interval} == 0`, i.e. steps
{interval}, {interval2}, ...) a force of magnitude U({fmin:g}, {fmax:g}) N in a uniformly random
horizontal direction (vector (cos a, sin a, 0.1) x magnitude) is drawn and applied to
the torso for {duration} control steps (while `step_count % {interval} < {duration}`).

The robot must:
- stay upright (the episode terminates when `info["upvector"][2] < 0.3`),
- return to the origin after every push,
- keep its heading.

**Success** (evaluated once, at the end of the trajectory): the robot survives all
{horizon} steps AND its mean base displacement from the origin over the episode,
`info["cum_pos_error"] / {horizon}`, is below 0.10 m (10 cm).

Control: 50 Hz (ctrl_dt 0.02 s; physics sim_dt 0.004 s, 5 substeps); episode length
{horizon} steps (10 s), the same for training and evaluation.

### State (argument `state`; `state.data` is a `mujoco.mjx.Data`, `state.info` a dict)
- `state.data.qpos`: float32 (19,): base position xyz [0:3] (world frame, metres; the
  home height is 0.278), base orientation quaternion (w, x, y, z) [3:7], 12 joint
  angles [7:19] (rad).
- `state.data.qvel`: float32 (18,): base linear velocity [0:3] (world frame, m/s), base
  angular velocity [3:6] (body frame, rad/s), 12 joint velocities [6:18] (rad/s).
- `state.data.actuator_force`: float32 (12,): joint torques (N m) of the PD motors.
- `state.data.ctrl`: float32 (12,): the motor targets of the last step (rad).
- `state.info["gyro"]`: float32 (3,): IMU angular velocity, body frame (rad/s).
- `state.info["gravity"]`: float32 (3,): unit gravity vector in the body frame
  ((0, 0, -1) when level).
- `state.info["local_linvel"]`: float32 (3,): body-frame linear velocity (m/s).
- `state.info["upvector"]`: float32 (3,): the body z axis in world coordinates;
  `upvector[2]` is 1 when upright, < 0.3 means fallen (episode ends).
- `state.info["pos_xy"]`: float32 (2,): base displacement from the origin in the world
  frame (m); its norm is the per-step position error.
- `state.info["height"]`: float32 (): base height (m).
- `state.info["heading"]`: float32 (): yaw angle (rad); 0 at the start.
- `state.info["push_force"]`: float32 (3,): the most recent push force vector (N),
  (0, 0, 0) before the first push. It keeps its value between pushes; a push is being
  applied only while `state.info["step_count"] % {interval} < {duration}` (and
  `step_count >= {interval}`).
- `state.info["last_act"]`: float32 (12,): the previous action.
- `state.info["step_count"]`: int32 (): control steps taken in this episode.
- `state.info["cum_pos_error"]`: float32 (): sum over steps of `norm(pos_xy)`.
- `state.info["push_count"]`: float32 (): pushes so far.
- `state.info["rng"]`: the task's random key (internal; do not use).
- `state.obs`: float32 (52,): the default observation (local_linvel 3, gyro 3,
  gravity 3, joint angles - home 12, joint velocities 12, last_act 12, pos_xy 2,
  height 1, heading 1, push_force / 100 3).
- `state.reward`: float32 (): 1.0 on the last step of a successful episode, else 0
  (the sparse success reward; this task has no other native reward).
- `state.done`: float32 (): 1.0 when the step fell over (`upvector[2] < 0.3`).
- `state.metrics["pos_error"]`: float32 (): `norm(info["pos_xy"])`;
  `state.metrics["upright"]`: float32 (): `info["upvector"][2]`.

Joint order (qpos[7:19], qvel[6:18], actions, actuator_force): FR hip, FR thigh, FR calf,
FL hip, FL thigh, FL calf, RR hip, RR thigh, RR calf, RL hip, RL thigh, RL calf.
Home pose (qpos[7:19]): {home}.

### Actions (`action`, float32 (12,), each in [-1, 1])
Joint offsets from the home pose: motor target = home + 0.5 x action, tracked by PD
motors (Kp 35, Kd 0.5).
"""


class Go1Push(Task):
    """Unitree Go1 push recovery: stay upright and near the origin under random pushes."""

    name = "go1_push"
    description = "Unitree Go1 (MJX): recover from 150-400 N torso pushes every 75 steps; 500 steps"
    episode_length = 500
    action_space = Box(12, -1.0, 1.0)
    ppo_presets = {"cpu": MUJOCO_CPU, "paper": GO1_PAPER}
    budgets = {"paper": paper_budget(5_000_000, 25_000_000, 0.0), "cpu": TINY_CPU}
    # push_force: scale on the U(150, 400) N push magnitude; push_interval: control steps
    # between pushes. Both are closure constants: changing them builds a new task (recompiles).
    params = {"push_force": 1.0, "push_interval": 75.0}

    def __init__(self, **params: float) -> None:
        super().__init__(**params)
        patch_mjx_tree_scan()
        self._interval = int(round(self.params["push_interval"]))
        if self._interval <= PUSH_DURATION:
            raise ValueError(f"push_interval must exceed the push duration {PUSH_DURATION}")
        self._force_scale = float(self.params["push_force"])
        self.mj_model = _load_go1()
        self.mjx_model = mjx.put_model(self.mj_model, impl="jax")
        m = self.mj_model
        self._n_substeps = int(round(CTRL_DT / SIM_DT))
        self._default_pose = jnp.asarray(m.keyframe("home").qpos[7:], jnp.float32)
        self._origin_xy = jnp.asarray(m.keyframe("home").qpos[0:2], jnp.float32)
        self._torso = int(m.body("trunk").id)
        self._imu_site = int(m.site("imu").id)
        self._s_gyro = sensor_slice(m, "gyro")
        self._s_up = sensor_slice(m, "upvector")
        self._s_linvel = sensor_slice(m, "local_linvel")
        self._data0 = _home_data(m)

    # --- dynamics ---------------------------------------------------------------------

    def render(self, sim: Any) -> Any:
        return render_frame(self.mj_model, sim)

    def reset(self, key: jax.Array) -> TaskState:
        data = self._data0
        info = {
            "rng": jax.random.fold_in(key, 1),  # the pushes' own stream
            "last_act": jnp.zeros(12, jnp.float32),
            "step_count": jnp.asarray(0, jnp.int32),
            "push_force": jnp.zeros(3, jnp.float32),
            "cum_pos_error": jnp.asarray(0.0, jnp.float32),
            "push_count": jnp.asarray(0.0, jnp.float32),
        }
        sim = self._complete(MjxSim(data=data, info=self._with_sensors(data, info)))
        false = jnp.asarray(False)
        return TaskState(sim=sim, done=false, success=false)

    def step(self, state: TaskState, action: jax.Array) -> TaskState:
        info = state.sim.info
        action = jnp.asarray(action, jnp.float32)
        step_count = info["step_count"] + 1
        push_force, applied, at_push_start = self.push(info["rng"], step_count, info["push_force"])
        xfrc = jnp.zeros((self.mj_model.nbody, 6), jnp.float32).at[self._torso, :3].set(applied)
        data = state.sim.data.replace(xfrc_applied=xfrc)
        data = self._physics(data, self._default_pose + ACTION_SCALE * action)

        pos_error = jnp.linalg.norm(data.qpos[0:2] - self._origin_xy)
        new_info = {
            "rng": info["rng"],
            "last_act": action,
            "step_count": step_count,
            "push_force": push_force,
            "cum_pos_error": info["cum_pos_error"] + pos_error,
            "push_count": info["push_count"] + at_push_start.astype(jnp.float32),
        }
        sim = self._complete(MjxSim(data=data, info=self._with_sensors(data, new_info)))
        done = self._fallen(sim)
        return TaskState(sim=sim, done=done, success=state.success | self._succeeded(sim))

    def _complete(self, sim: MjxSim) -> MjxSim:
        """Fill ``obs``, ``reward``, ``done`` and ``metrics`` (Playground's State fields)."""
        metrics = {"pos_error": jnp.linalg.norm(sim.info["pos_xy"]), "upright": sim.info["upvector"][2]}
        return completed(sim, self.default_observation(sim), self._succeeded(sim), self._fallen(sim), metrics)

    def push(
        self, rng: jax.Array, step_count: jax.Array, last_force: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The push schedule at (post-increment) ``step_count``.

        Returns (push_force float32[3]: the latest drawn force, kept between pushes;
        applied float32[3]: the force on the torso this step; at_push_start bool[]).
        """
        phase = step_count % self._interval
        at_push_start = phase == 0
        k_angle, k_mag = jax.random.split(jax.random.fold_in(rng, step_count))
        angle = jax.random.uniform(k_angle, (), jnp.float32, 0.0, 2.0 * jnp.pi)
        magnitude = self._force_scale * jax.random.uniform(k_mag, (), jnp.float32, PUSH_MIN, PUSH_MAX)
        new_force = jnp.stack([jnp.cos(angle), jnp.sin(angle), jnp.asarray(0.1, jnp.float32)]) * magnitude
        push_force = jnp.where(at_push_start, new_force, last_force)
        applied = jnp.where(phase < PUSH_DURATION, push_force, 0.0)
        return push_force, applied, at_push_start

    def _physics(self, data: Any, ctrl: jax.Array) -> Any:
        def substep(d: Any, _: None) -> tuple[Any, None]:
            return mjx.step(self.mjx_model, d.replace(ctrl=ctrl)), None

        return jax.lax.scan(substep, data, None, self._n_substeps)[0]

    def _with_sensors(self, data: Any, info: dict[str, jax.Array]) -> dict[str, jax.Array]:
        return {
            **info,
            "gyro": data.sensordata[self._s_gyro],
            "gravity": data.site_xmat[self._imu_site].T @ jnp.array([0.0, 0.0, -1.0]),
            "local_linvel": data.sensordata[self._s_linvel],
            "upvector": data.sensordata[self._s_up],
            "pos_xy": data.qpos[0:2] - self._origin_xy,
            "height": data.qpos[2],
            "heading": quat_to_yaw(data.qpos[3:7]),
        }

    def sample_transitions(self, key: jax.Array, num: int, horizon: int | None = None) -> Transition:
        """Random-action transitions from rollouts long enough to include the first push
        (the default 64 steps end before step ``push_interval``)."""
        return super().sample_transitions(key, num, horizon or self._interval + 2 * PUSH_DURATION)

    # --- success ----------------------------------------------------------------------

    def _fallen(self, sim: MjxSim) -> jax.Array:
        return sim.info["upvector"][2] < FALL_UPVECTOR_Z

    def _succeeded(self, sim: MjxSim) -> jax.Array:
        """True only on the final step of a trajectory that stayed upright and near the origin."""
        steps = sim.info["step_count"]
        mean_err = sim.info["cum_pos_error"] / jnp.maximum(steps, 1).astype(jnp.float32)
        at_end = steps >= self.episode_length
        return at_end & ~self._fallen(sim) & (mean_err < SUCCESS_MEAN_DISPLACEMENT)

    # --- baselines --------------------------------------------------------------------

    def default_observation(self, sim: MjxSim) -> jax.Array:
        """The reference's raw proprioceptive state, float32[52]:

        local_linvel 3, gyro 3, gravity 3, joint angles - home 12, joint velocities 12,
        last_act 12, pos_xy 2, height 1, heading 1, push_force / 100 3.
        """
        d, info = sim.data, sim.info
        parts = [
            info["local_linvel"],
            info["gyro"],
            info["gravity"],
            d.qpos[7:] - self._default_pose,
            d.qvel[6:],
            info["last_act"],
            info["pos_xy"],
            info["height"][None],
            info["heading"][None],
            info["push_force"] / 100.0,
        ]
        return jnp.concatenate(parts).astype(jnp.float32)

    def sparse_reward(self, sim: MjxSim, action: jax.Array, next_sim: MjxSim) -> jax.Array:
        """1.0 on the final step of a successful trajectory, else 0."""
        return self._succeeded(next_sim).astype(jnp.float32)

    def offline_catalog(self) -> Catalog:
        return go1_catalog.catalog(self.episode_length, self._interval, PUSH_DURATION)

    @property
    def context(self) -> str:
        home = np.array2string(np.asarray(self._default_pose), precision=2, separator=", ")
        return _CONTEXT.format(
            interval=self._interval,
            interval2=2 * self._interval,
            duration=PUSH_DURATION,
            fmin=PUSH_MIN * self._force_scale,
            fmax=PUSH_MAX * self._force_scale,
            horizon=self.episode_length,
            home=home,
        )


def _home_data(m: mujoco.MjModel) -> Any:
    """MJX data at the home keyframe after a forward pass, computed once on the host.

    Every episode starts from it, so reset is a copy rather than a traced ``mjx.forward``
    (slow to compile, and compiled into every program that resets).
    """
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.keyframe("home").id)
    mujoco.mj_forward(m, d)
    return mjx.put_data(m, d, impl="jax")


def _load_go1() -> mujoco.MjModel:
    """Playground's Go1 feet-only flat-terrain model with the Joystick/Getup PD gains."""
    use_offline_menagerie()
    from mujoco_playground._src.locomotion.go1 import base as go1_base
    from mujoco_playground._src.locomotion.go1 import go1_constants as consts

    xml = consts.FEET_ONLY_FLAT_TERRAIN_XML.read_text()
    m = mujoco.MjModel.from_xml_string(xml, assets=go1_base.get_assets())
    m.opt.timestep = SIM_DT
    m.opt.ccd_iterations = 20
    m.dof_damping[6:] = KD
    m.actuator_gainprm[:, 0] = KP
    m.actuator_biasprm[:, 1] = -KP
    return m
