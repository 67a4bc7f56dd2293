"""Offline-mutator catalog for the Brax classics: observation features and reward terms.

The reward-only setting: Brax's native observation is a required feature, and the
search is mostly over reward terms (forward speed, staying healthy, control cost, an
upright torso, the native reward itself). Every block reads only fields the LLM is
told about (:mod:`limen_envs.brax_classics`).
"""

from __future__ import annotations

from limen_jax.catalog import Catalog, Feature, Term

_PRELUDE = """\
DT = {dt}
HORIZON = {horizon}
TARGET_SPEED = {velocity}


def torso_x(state):
    return state.pipeline_state.x.pos[0, 0]


def torso_up(state):
    # z of the torso's body z axis in the world: 1 when level, from its quaternion (w, x, y, z)
    q = state.pipeline_state.x.rot[0]
    return 1.0 - 2.0 * (q[1] * q[1] + q[2] * q[2])
"""

_FEATURES = (
    Feature("native", "f_native = state.obs"),
    Feature("torso_height", "f_torso_height = state.pipeline_state.x.pos[0, 2:3]"),
    Feature("torso_vel", "f_torso_vel = state.pipeline_state.xd.vel[0] / 3.0"),
    Feature("torso_ang", "f_torso_ang = state.pipeline_state.xd.ang[0] / 5.0"),
    Feature("torso_rot", "f_torso_rot = state.pipeline_state.x.rot[0]"),
    Feature("torso_up", "f_torso_up = jnp.array([torso_up(state)])"),
    Feature("time", 'f_time = jnp.array([state.info["step_count"] / HORIZON])'),
    Feature(
        "progress",
        'f_progress = jnp.array([(torso_x(state) - state.info["start_x"]) / (TARGET_SPEED * HORIZON * DT)])',
    ),
)

_TERMS = (
    Term(
        "success",
        'distance = torso_x(next_state) - next_state.info["start_x"]\n'
        't_success = ((next_state.info["step_count"] >= HORIZON) & (next_state.done < 0.5)'
        " & (distance >= TARGET_SPEED * HORIZON * DT)).astype(jnp.float32)",
        10.0,
    ),
    Term("forward", "t_forward = (torso_x(next_state) - torso_x(state)) / DT", 1.0),
    Term(
        "speed_target",
        "t_speed_target = -jnp.abs((torso_x(next_state) - torso_x(state)) / DT - 1.25 * TARGET_SPEED)",
        0.5,
    ),
    Term("healthy", "t_healthy = 1.0 - next_state.done", 1.0),
    Term("control", "t_control = -jnp.sum(jnp.square(action))", 0.1),
    Term("upright", "t_upright = torso_up(next_state)", 0.2),
    Term("lateral", "t_lateral = -jnp.abs(next_state.pipeline_state.xd.vel[0, 1])", 0.2),
    Term("native", "t_native = next_state.reward", 1.0),
)


def catalog(dt: float, horizon: int, velocity: float) -> Catalog:
    """The catalog for a Brax task with control step ``dt`` and success speed ``velocity``."""
    prelude = _PRELUDE.format(dt=dt, horizon=horizon, velocity=velocity)
    return Catalog(
        prelude,
        _FEATURES,
        _TERMS,
        required_features=("native",),
        required_terms=("success",),
        dense_terms=("forward",),
        seed_features=(0, 2),
        seed_terms=(1, 2),
    )
