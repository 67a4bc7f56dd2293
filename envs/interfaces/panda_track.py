"""Reference interface for panda_track: keep the end-effector on the Lissajous target.

In the style of the paper's Appendix D.5. Observation (67 features): arm joint angles
and velocities, the tracking error at three scales and its norm, the target's velocity
and (analytical) acceleration, the phase of each Lissajous component, the predicted
error to the target 0.04-0.8 s ahead, the control targets relative to the joints, and
the previous controls. It assumes the nominal trajectory (radius 0.10 m, speed 0.35);
under perturbed parameters the look-ahead is approximate.
Reward: a multi-scale Gaussian on the tracking error (sharpest at the 2 cm success
threshold), moving along the target's velocity when behind, and small control-change
and action costs.
"""

import jax.numpy as jnp

RADIUS = 0.10
SPEED = 0.35
CENTER = jnp.array([0.45, 0.0, 0.18])
CTRL_DT = 0.02
LOOKAHEAD = (0.04, 0.1, 0.2, 0.4, 0.8)


def rates(tp):
    return SPEED * jnp.stack([tp["freq_x"], tp["freq_y"], tp["freq_z"]])


def phases(tp):
    return jnp.stack([tp["phase_x"], tp["phase_y"], jnp.zeros_like(tp["phase_x"])])


def target_at(t, tp):
    amp = jnp.array([RADIUS, RADIUS, 0.7 * RADIUS])
    return CENTER + amp * jnp.sin(rates(tp) * t + phases(tp))


def get_observation(state):
    info, data = state.info, state.data
    tp = info["traj_params"]
    t = info["step_count"].astype(jnp.float32) * CTRL_DT
    gripper = info["gripper_pos"]
    error = info["target_pos"] - gripper
    dist = info["gripper_target_dist"]
    w = rates(tp)
    angle = w * t + phases(tp)
    amp = jnp.array([RADIUS, RADIUS, 0.7 * RADIUS])
    accel = -amp * w**2 * jnp.sin(angle)
    future = [jnp.clip((target_at(t + dt, tp) - gripper) / 0.05, -5.0, 5.0) for dt in LOOKAHEAD]
    parts = [
        data.qpos[0:7] / jnp.pi,
        data.qvel[0:7] / 2.0,
        jnp.clip(error / 0.02, -5.0, 5.0),
        jnp.clip(error / 0.05, -5.0, 5.0),
        error / 0.15,
        jnp.stack([dist / 0.02, dist / 0.05, dist / 0.15]),
        info["target_vel"] / 0.15,
        accel / 0.03,
        jnp.sin(angle),
        jnp.cos(angle),
        jnp.concatenate(future),
        (data.ctrl[0:7] - data.qpos[0:7]) / 0.3,
        info["prev_ctrl"][0:7] / jnp.pi,
    ]
    return jnp.concatenate(parts).astype(jnp.float32)


def compute_reward(state, action, next_state):
    info = next_state.info
    dist = info["gripper_target_dist"]
    tracking = (
        0.6 * jnp.exp(-0.5 * (dist / 0.02) ** 2)
        + 0.3 * jnp.exp(-0.5 * (dist / 0.05) ** 2)
        + 0.1 * jnp.exp(-0.5 * (dist / 0.15) ** 2)
    )
    error = info["target_pos"] - info["gripper_pos"]
    error_dir = error / (jnp.linalg.norm(error) + 1e-6)
    vel = info["target_vel"]
    vel_dir = vel / (jnp.linalg.norm(vel) + 1e-6)
    behind = jnp.clip(dist / 0.05, 0.0, 1.0)
    align = 0.05 * jnp.dot(error_dir, vel_dir) * behind
    ctrl_change = -0.002 * jnp.linalg.norm(next_state.data.ctrl - info["prev_ctrl"])
    effort = -0.001 * jnp.linalg.norm(action[0:7])
    return tracking + align + ctrl_change + effort
