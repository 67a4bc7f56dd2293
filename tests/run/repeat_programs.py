"""Three interfaces for the toy corridor, each written three ways that differ only in form
(names, comments, constant spellings, order of definitions), as a model repeats itself."""

from __future__ import annotations

HEAD = "import jax.numpy as jnp\n\n\n"

# A: (pos, goal) / 10; the step's decrease in distance to the goal
A = [
    HEAD + """def get_observation(state):
    return jnp.array([state.pos / 10.0, state.goal / 10.0], dtype=jnp.float32)


def compute_reward(state, action, next_state):
    return (jnp.abs(state.goal - state.pos) - jnp.abs(next_state.goal - next_state.pos)).astype(jnp.float32)
""",
    HEAD + """def get_observation(state):
    # where the agent is and where the goal is, both scaled to [0, 1]
    scale = 1e1
    where, target = state.pos / scale, state.goal / scale
    return jnp.array([where, target], dtype=jnp.float32)


def compute_reward(state, action, next_state):
    before = jnp.abs(state.goal - state.pos)
    after = jnp.abs(next_state.goal - next_state.pos)
    return (before - after).astype(jnp.float32)  # progress toward the goal
""",
    HEAD + """def compute_reward(s, a, s2):
    gap = jnp.abs(s.goal - s.pos)
    gap_next = jnp.abs(s2.goal - s2.pos)
    return (gap - gap_next).astype(jnp.float32)


def get_observation(s):
    return jnp.array([s.pos / 10., s.goal / 10.], dtype=jnp.float32)
""",
]

# B: pos / 10 and the side the goal is on; 1 on reaching the goal
B = [
    HEAD + """def get_observation(state):
    return jnp.array([state.pos / 10.0, jnp.sign(state.goal - state.pos)], dtype=jnp.float32)


def compute_reward(state, action, next_state):
    return jnp.where(next_state.pos == next_state.goal, 1.0, 0.0).astype(jnp.float32)
""",
    HEAD + """def get_observation(state):
    side = jnp.sign(state.goal - state.pos)  # -1: the goal is to the left, +1: to the right
    return jnp.array([state.pos / 10.00, side], dtype=jnp.float32)


def compute_reward(state, action, next_state):
    arrived = next_state.pos == next_state.goal
    return jnp.where(arrived, 1.0, 0.0).astype(jnp.float32)
""",
    HEAD + """def compute_reward(state, action, next_state):
    # sparse: paid once, on the step that reaches the goal
    return jnp.where(next_state.pos == next_state.goal, 1., 0.).astype(jnp.float32)


def get_observation(state):
    return jnp.array([state.pos / 1e1, jnp.sign(state.goal - state.pos)], dtype=jnp.float32)
""",
]

# C: (pos, goal, time); 1 on reaching the goal, less 0.01 a step
C = [
    HEAD + """def get_observation(state):
    return jnp.array([state.pos / 10.0, state.goal / 10.0, state.step_num / 16.0], dtype=jnp.float32)


def compute_reward(state, action, next_state):
    return (jnp.where(next_state.pos == next_state.goal, 1.0, 0.0) - 0.01).astype(jnp.float32)
""",
    HEAD + """def get_observation(state):
    horizon = 16.0
    return jnp.array([state.pos / 10.0, state.goal / 10.0, state.step_num / horizon], dtype=jnp.float32)


def compute_reward(state, action, next_state):
    step_cost = 1e-2
    reached = next_state.pos == next_state.goal
    return (jnp.where(reached, 1.0, 0.0) - step_cost).astype(jnp.float32)
""",
    HEAD + """def compute_reward(state, action, next_state):
    return (jnp.where(next_state.pos == next_state.goal, 1.0, 0.0) - 0.010).astype(jnp.float32)


def get_observation(state):
    # position, goal, elapsed time
    return jnp.array([state.pos / 10., state.goal / 10., state.step_num / 16.], dtype=jnp.float32)
""",
]


def answer(code: str) -> str:
    """A model's answer holding ``code``."""
    return f"Here is the interface.\n\n```python\n{code}```\n"
