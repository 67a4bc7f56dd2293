"""Reference interface for ant: run forward (+x) without falling.

Observation (32 features): torso height and orientation (quaternion and up-vector z),
torso velocity and angular velocity, hinge angles and velocities, the distance run so
far relative to the success pace, and the time left.
Reward: forward velocity of the torso, a healthy bonus that fades near the height
limits, an uprightness term, a sideways-drift cost and a control cost.
"""

import jax.numpy as jnp

DT = 0.05  # ant's control step (5 x 0.01 s)
HORIZON = 1000
PACE = 1.0  # m/s, the success threshold


def up_z(quat):
    """z of the torso's up axis from a (w, x, y, z) quaternion."""
    x, y = quat[1], quat[2]
    return 1.0 - 2.0 * (x * x + y * y)


def get_observation(state):
    ps = state.pipeline_state
    q, qd = ps.q, ps.qd
    steps = state.info["step_count"].astype(jnp.float32)
    run = ps.x.pos[0, 0] - state.info["start_x"]
    parts = [
        q[2:3],
        q[3:7],
        up_z(q[3:7])[None],
        qd[0:3] / 3.0,
        qd[3:6] / 5.0,
        q[7:15],
        qd[6:14] / 10.0,
        jnp.stack([(run - PACE * steps * DT) / 10.0, 1.0 - steps / HORIZON]),
        ps.xd.vel[0, 0:2] / 3.0,
    ]
    return jnp.concatenate(parts).astype(jnp.float32)


def compute_reward(state, action, next_state):
    before, after = state.pipeline_state, next_state.pipeline_state
    forward = (after.x.pos[0, 0] - before.x.pos[0, 0]) / DT
    drift = jnp.abs(after.x.pos[0, 1] - before.x.pos[0, 1]) / DT
    z = after.x.pos[0, 2]
    healthy = jnp.clip((z - 0.2) / 0.1, 0.0, 1.0) * jnp.clip((1.0 - z) / 0.1, 0.0, 1.0)
    upright = up_z(after.q[3:7])
    ctrl = jnp.sum(action**2)
    return forward + 0.5 * healthy + 0.2 * upright - 0.1 * drift - 0.25 * ctrl
