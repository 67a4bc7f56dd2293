"""Offline-mutator catalog for panda_track: observation features and reward terms.

Every block reads only the fields the LLM is told about (App. C.3). The arm's joint
state is a required feature; the search is over what else to observe (the tracking
error, where the target is heading) and how to pay for tracking.
"""

from __future__ import annotations

from limen_jax.catalog import Catalog, Feature, Term

_PRELUDE = """\
CTRL_DT = 0.02
HORIZON = {horizon}
RADIUS = {radius}
SPEED = {speed}


def error(state):
    # target minus end-effector, world frame (m)
    return state.info["target_pos"] - state.info["gripper_pos"]


def gripper_vel(state, next_state):
    return (next_state.info["gripper_pos"] - state.info["gripper_pos"]) / CTRL_DT
"""

_FEATURES = (
    Feature("arm", "f_arm = jnp.concatenate([state.data.qpos[0:7], state.data.qvel[0:7] / 2.0])"),
    Feature("gripper_pos", 'f_gripper_pos = state.info["gripper_pos"]'),
    Feature("target_pos", 'f_target_pos = state.info["target_pos"]'),
    Feature("error", "f_error = error(state) / RADIUS"),
    Feature("error_fine", "f_error_fine = jnp.clip(error(state) / 0.02, -5.0, 5.0)"),
    Feature("error_norm", 'f_error_norm = jnp.array([state.info["gripper_target_dist"] / 0.05])'),
    Feature("target_vel", 'f_target_vel = state.info["target_vel"] / (RADIUS * SPEED * 3.0)'),
    Feature(
        "target_ahead",
        'f_target_ahead = (error(state) + state.info["target_vel"] * 5 * CTRL_DT) / RADIUS',
    ),
    Feature("ctrl_offset", "f_ctrl_offset = (state.data.ctrl[0:7] - state.data.qpos[0:7]) * 10.0"),
    Feature("time", 'f_time = jnp.array([state.info["step_count"] / HORIZON])'),
    Feature(
        "traj_params",
        'tp = state.info["traj_params"]\n'
        'f_traj_params = jnp.stack([tp["freq_x"] / 3.0, tp["freq_y"] / 3.0, tp["freq_z"] / 2.0,'
        ' jnp.sin(tp["phase_x"]), jnp.cos(tp["phase_x"]), jnp.sin(tp["phase_y"]), jnp.cos(tp["phase_y"])])',
    ),
)

_TERMS = (
    Term(
        "success",
        'steps = next_state.info["step_count"]\n'
        'mean_err = next_state.info["cumulative_tracking_error"] / jnp.maximum(steps, 1)\n'
        "t_success = ((steps >= HORIZON) & (mean_err < 0.02)).astype(jnp.float32)",
        10.0,
    ),
    Term("track", 't_track = jnp.exp(-next_state.info["gripper_target_dist"] / 0.05)', 1.0),
    Term("track_fine", 't_track_fine = jnp.exp(-jnp.square(next_state.info["gripper_target_dist"] / 0.02))', 1.0),
    Term("distance", 't_distance = -next_state.info["gripper_target_dist"]', 5.0),
    Term(
        "progress",
        't_progress = (state.info["gripper_target_dist"] - next_state.info["gripper_target_dist"]) / CTRL_DT',
        0.1,
    ),
    Term(
        "vel_match",
        't_vel_match = -jnp.linalg.norm(gripper_vel(state, next_state) - next_state.info["target_vel"])',
        0.2,
    ),
    Term("action", "t_action = -jnp.sum(jnp.square(action[0:7]))", 0.01),
    Term("joint_vel", "t_joint_vel = -jnp.sum(jnp.square(next_state.data.qvel[0:7]))", 0.005),
)


def catalog(horizon: int, radius: float, speed: float) -> Catalog:
    """The panda_track catalog for a trajectory (the prelude states its constants)."""
    prelude = _PRELUDE.format(horizon=horizon, radius=radius, speed=speed)
    return Catalog(
        prelude,
        _FEATURES,
        _TERMS,
        required_features=("arm",),
        required_terms=("success",),
        dense_terms=("track", "distance"),
        seed_features=(1, 3),
        seed_terms=(0, 2),
    )
