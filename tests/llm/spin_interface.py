"""A dict-of-terms version of the reward the LIMEN reference published for xland_easy,
as the issue describes it (the published file is not in this repository): +1 for each
turn that leaves the agent facing more toward the blue pyramid, 10 for picking it up.
PPO learns to spin (the reference's own run: return 36-39, success 0.016)."""

import jax.numpy as jnp

PYRAMID, BLUE = 5, 3
TURN_RIGHT, TURN_LEFT, PICKUP = 1, 2, 3
DIRS = jnp.array([[-1, 0], [0, 1], [1, 0], [0, -1]], dtype=jnp.float32)  # up, right, down, left


def pyramid_offset(state):
    mask = (state.grid[:, :, 0] == PYRAMID) & (state.grid[:, :, 1] == BLUE)
    index = jnp.argmax(mask.reshape(-1))
    position = jnp.array([index // state.grid.shape[1], index % state.grid.shape[1]], dtype=jnp.float32)
    return position - state.agent.position.astype(jnp.float32)


def facing(state, offset):
    """Cosine between the agent's heading and the offset (0 when the offset is 0)."""
    norm = jnp.maximum(jnp.sqrt(jnp.sum(offset * offset)), 1e-6)
    return jnp.dot(DIRS[state.agent.direction], offset) / norm


def get_observation(state):
    offset = pyramid_offset(state)
    heading = jnp.zeros(4, dtype=jnp.float32).at[state.agent.direction].set(1.0)
    holding = (state.agent.pocket[0] == PYRAMID).astype(jnp.float32)
    return jnp.concatenate([offset / 8.0, heading, jnp.array([holding])]).astype(jnp.float32)


def compute_reward(state, action, next_state):
    offset = pyramid_offset(state)
    turned = (action == TURN_RIGHT) | (action == TURN_LEFT)
    toward = facing(next_state, offset) > facing(state, offset)
    picked = (next_state.agent.pocket[0] == PYRAMID) & (state.agent.pocket[0] != PYRAMID)
    return {
        "turn_toward": jnp.where(turned & toward, 1.0, 0.0).astype(jnp.float32),
        "pickup": jnp.where(picked, 10.0, 0.0).astype(jnp.float32),
    }
