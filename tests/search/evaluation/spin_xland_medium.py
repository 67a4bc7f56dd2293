"""A hackable reward for xland_medium: 1 for every turn (PPO learns to spin)."""

import jax.numpy as jnp


def compute_reward(state, action, next_state):
    return jnp.where((action == 1) | (action == 2), 1.0, 0.0).astype(jnp.float32)
