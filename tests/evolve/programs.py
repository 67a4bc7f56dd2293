"""Interface programs for the toy corridor that tests hand to a run as a model's answer."""

from __future__ import annotations


def two_terms(closer_weight: float) -> str:
    """A program whose reward is a dict of two terms: ``goal``, 1.0 on the step that reaches
    the goal, and ``closer``, ``closer_weight`` times the step's decrease in distance to it;
    its observation is (pos, goal) / 10, float32 of shape (2,)."""
    return f"""\
import jax.numpy as jnp

def get_observation(state):
    return jnp.array([state.pos / 10.0, state.goal / 10.0], dtype=jnp.float32)

def compute_reward(state, action, next_state):
    closer = jnp.abs(state.goal - state.pos) - jnp.abs(next_state.goal - next_state.pos)
    return {{"goal": jnp.asarray(next_state.pos == next_state.goal, jnp.float32),
            "closer": {closer_weight:.2f} * closer.astype(jnp.float32)}}
"""
