"""Offline-mutator catalog for go1_push: observation features and reward terms.

Every block reads only the fields the LLM is told about (App. C.2). The joint state and
the body's IMU readings are required features: no policy stands without them, and the
task is reward-limited (the search is about what else to observe and how to pay).
"""

from __future__ import annotations

from limen_jax.catalog import Catalog, Feature, Term

_PRELUDE = """\
HOME = jnp.array([0.1, 0.9, -1.8, -0.1, 0.9, -1.8, 0.1, 0.9, -1.8, -0.1, 0.9, -1.8])
HOME_HEIGHT = 0.278
HORIZON = {horizon}
PUSH_INTERVAL = {interval}
PUSH_DURATION = {duration}


def to_body(vec_xy, heading):
    # a world-frame xy vector in the yaw-aligned body frame
    c, s = jnp.cos(heading), jnp.sin(heading)
    return jnp.stack([c * vec_xy[0] + s * vec_xy[1], -s * vec_xy[0] + c * vec_xy[1]])


def origin_dist(state):
    return jnp.linalg.norm(state.info["pos_xy"])
"""

_FEATURES = (
    Feature(
        "proprio",
        "f_proprio = jnp.concatenate([(state.data.qpos[7:19] - HOME) / jnp.pi, state.data.qvel[6:18] / 15.0,"
        ' state.info["gravity"], state.info["gyro"] / 5.0, state.info["local_linvel"] / 3.0])',
    ),
    Feature("last_act", 'f_last_act = state.info["last_act"]'),
    Feature("pos_xy", 'f_pos_xy = jnp.clip(state.info["pos_xy"] / 0.1, -5.0, 5.0)'),
    Feature("pos_body", 'f_pos_body = to_body(state.info["pos_xy"], state.info["heading"]) / 0.3'),
    Feature("origin_dist", "f_origin_dist = jnp.array([origin_dist(state) / 0.1])"),
    Feature(
        "home_dir",
        'f_home_dir = to_body(-state.info["pos_xy"] / (origin_dist(state) + 1e-6), state.info["heading"])',
    ),
    Feature("heading", 'f_heading = jnp.stack([jnp.sin(state.info["heading"]), jnp.cos(state.info["heading"])])'),
    Feature(
        "posture",
        'up_z = state.info["upvector"][2]\n'
        'f_posture = jnp.stack([up_z, jnp.maximum(0.0, 0.7 - up_z), (state.info["height"] - HOME_HEIGHT) / 0.1])',
    ),
    Feature("push_force", 'f_push_force = state.info["push_force"] / 400.0'),
    Feature(
        "push_phase",
        'phase = (state.info["step_count"] % PUSH_INTERVAL).astype(jnp.float32)\n'
        'pushing = (phase < PUSH_DURATION) & (state.info["step_count"] >= PUSH_INTERVAL)\n'
        "f_push_phase = jnp.stack([pushing.astype(jnp.float32), phase / PUSH_INTERVAL])",
    ),
    Feature("torques", "f_torques = state.data.actuator_force / 50.0"),
    Feature("world_vel", "f_world_vel = state.data.qvel[0:3] / 3.0"),
    Feature("future_xy", 'f_future_xy = (state.info["pos_xy"] + state.data.qvel[0:2] * 0.2) / 0.3'),
    Feature("time", 'f_time = jnp.array([state.info["step_count"] / HORIZON])'),
)

_TERMS = (
    Term(
        "success",
        'steps = next_state.info["step_count"]\n'
        'mean_err = next_state.info["cum_pos_error"] / jnp.maximum(steps, 1)\n'
        't_success = ((steps >= HORIZON) & (next_state.info["upvector"][2] >= 0.3) & (mean_err < 0.1))'
        ".astype(jnp.float32)",
        10.0,
    ),
    Term("upright", 't_upright = next_state.info["upvector"][2]', 1.0),
    Term("origin_close", "t_origin_close = jnp.exp(-jnp.square(origin_dist(next_state) / 0.1))", 1.0),
    Term("origin_far", "t_origin_far = -origin_dist(next_state)", 2.0),
    Term("progress", "t_progress = (origin_dist(state) - origin_dist(next_state)) / 0.02", 0.5),
    Term(
        "still_near",
        "near = origin_dist(next_state) < 0.05\nt_still_near = -(near * jnp.linalg.norm(next_state.data.qvel[0:2]))",
        0.2,
    ),
    Term("heading", 't_heading = jnp.cos(next_state.info["heading"])', 0.2),
    Term("height", 't_height = -jnp.square((next_state.info["height"] - HOME_HEIGHT) / 0.05)', 0.1),
    Term("fall", 't_fall = -(next_state.info["upvector"][2] < 0.3).astype(jnp.float32)', 10.0),
    Term("alive", "t_alive = 1.0", 0.5),
    Term("pose", "t_pose = -jnp.sum(jnp.square(next_state.data.qpos[7:19] - HOME))", 0.1),
    Term("action_rate", 't_action_rate = -jnp.sum(jnp.square(action - state.info["last_act"]))', 0.01),
    Term("torque", "t_torque = -jnp.sum(jnp.square(next_state.data.actuator_force)) / 100.0", 0.01),
)


def catalog(horizon: int, interval: int, duration: int) -> Catalog:
    """The go1_push catalog for a push schedule (the prelude states its constants)."""
    prelude = _PRELUDE.format(horizon=horizon, interval=interval, duration=duration)
    return Catalog(
        prelude,
        _FEATURES,
        _TERMS,
        required_features=("proprio",),
        required_terms=("success",),
        dense_terms=("upright", "origin_close"),
        seed_features=(1, 3),
        seed_terms=(0, 2),
    )
