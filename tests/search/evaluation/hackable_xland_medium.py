"""A deliberately hackable reward for xland_medium: paid every step the yellow pyramid
is in the pocket, nothing for the goal. Expert runs do carry the pyramid for a while, so
it is not absurd on demonstrations; PPO on it learns to pick the pyramid up and never put
it down (holding forever pays more than the goal, which ends the episode)."""

import jax.numpy as jnp

PYRAMID, YELLOW = 5, 5


def compute_reward(state, action, next_state):
    pocket = next_state.agent.pocket
    holding = (pocket[0] == PYRAMID) & (pocket[1] == YELLOW)
    return jnp.where(holding, 1.0, 0.0).astype(jnp.float32)
