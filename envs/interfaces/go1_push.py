"""Reference interface for go1_push: stay upright and return to the origin after pushes.

In the style of the paper's Appendix D.4. Observation (78 features): gravity, scaled
gyro and body velocity, position error at three scales, the direction to the origin in
the body frame, heading, up-vector z and a tilt alarm, height error, joint offsets from
home, joint velocities, the last action, the push force and where the push cycle is,
motor torques, and a 0.2 s extrapolation of the base position.
Reward: uprightness (with a bonus near level and a penalty near the fall line),
multi-scale closeness to the origin, progress towards it, velocity towards it when far
and stillness when near, heading, a fall penalty, a survival bonus, and small action-rate
and torque costs.
"""

import jax.numpy as jnp

HOME = jnp.array([0.1, 0.9, -1.8, -0.1, 0.9, -1.8, 0.1, 0.9, -1.8, -0.1, 0.9, -1.8])
HOME_HEIGHT = 0.278
PUSH_INTERVAL = 75
PUSH_DURATION = 5


def to_body(vec_xy, heading):
    """Rotate a world-frame xy vector into the yaw-aligned body frame."""
    c, s = jnp.cos(heading), jnp.sin(heading)
    return jnp.stack([c * vec_xy[0] + s * vec_xy[1], -s * vec_xy[0] + c * vec_xy[1]])


def get_observation(state):
    info, data = state.info, state.data
    pos_xy = info["pos_xy"]
    dist = jnp.linalg.norm(pos_xy)
    heading = info["heading"]
    home_dir = to_body(-pos_xy / (dist + 1e-6), heading)
    up_z = info["upvector"][2]
    phase = (info["step_count"] % PUSH_INTERVAL).astype(jnp.float32)
    pushing = ((phase < PUSH_DURATION) & (info["step_count"] >= PUSH_INTERVAL)).astype(jnp.float32)
    future_xy = pos_xy + data.qvel[0:2] * 0.2
    parts = [
        info["gravity"],
        info["gyro"] / 5.0,
        info["local_linvel"] / 3.0,
        pos_xy,
        jnp.clip(pos_xy / 0.1, -5.0, 5.0),
        to_body(pos_xy, heading) / 0.3,
        dist[None] / 0.1,
        home_dir,
        jnp.stack([jnp.sin(heading), jnp.cos(heading)]),
        jnp.stack([up_z, jnp.maximum(0.0, 0.7 - up_z), (info["height"] - HOME_HEIGHT) / 0.1]),
        (data.qpos[7:19] - HOME) / jnp.pi,
        data.qvel[6:18] / 15.0,
        info["last_act"],
        info["push_force"] / 400.0,
        jnp.stack([pushing, phase / PUSH_INTERVAL]),
        data.actuator_force / 50.0,
        future_xy / 0.3,
    ]
    return jnp.concatenate(parts).astype(jnp.float32)


def compute_reward(state, action, next_state):
    info = next_state.info
    up_z = info["upvector"][2]
    dist = jnp.linalg.norm(info["pos_xy"])
    prev_dist = jnp.linalg.norm(state.info["pos_xy"])
    vel_xy = next_state.data.qvel[0:2]

    upright = 4.0 * up_z + 10.0 * jnp.maximum(0.0, up_z - 0.8) ** 2
    tilt = -20.0 * jnp.maximum(0.0, 0.65 - up_z) ** 2
    position = 4.0 * (0.3 * jnp.exp(-dist) + 0.4 * jnp.exp(-5.0 * dist) + 0.3 * jnp.exp(-20.0 * dist))
    progress = 2.0 * jnp.clip((prev_dist - dist) * 40.0, -1.0, 1.0)
    towards = jnp.dot(vel_xy, -info["pos_xy"] / (dist + 1e-6))
    far = jnp.tanh(dist * 8.0)
    motion = 0.6 * far * jnp.tanh(3.0 * towards) - 0.3 * (1.0 - far) * jnp.tanh(jnp.linalg.norm(vel_xy))
    heading = 0.5 * jnp.cos(info["heading"])
    fall = -20.0 * (up_z < 0.3).astype(jnp.float32)
    smooth = -0.01 * jnp.sum((action - state.info["last_act"]) ** 2)
    torque = -1e-4 * jnp.sum(next_state.data.actuator_force**2)
    return upright + tilt + position + progress + motion + heading + fall + 0.3 + smooth + torque
