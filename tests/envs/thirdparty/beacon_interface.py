"""A hand-written interface for the beacon task (what a user would check and train)."""

import jax.numpy as jnp


def get_observation(state):
    return jnp.concatenate([state.pos, state.beacon - state.pos]).astype(jnp.float32)


def compute_reward(state, action, next_state):
    before = jnp.linalg.norm(state.beacon - state.pos)
    after = jnp.linalg.norm(next_state.beacon - next_state.pos)
    reached = (after < 0.1).astype(jnp.float32)
    return jnp.asarray(10.0 * (before - after) + reached, jnp.float32)
