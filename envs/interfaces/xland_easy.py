"""Reference interface for xland_easy: pick up the blue pyramid; a red ball distracts.

Observation (30 features): agent pose (position / 8, direction one-hot), pocket flags,
the pyramid's and the ball's offsets from the agent (absolute and egocentric), the
distance to the pyramid, what is in front of the agent, and a 3x3 walkability view.
Reward: 10 on the goal transition (the PICKUP that puts the blue pyramid in the
pocket), potential-based shaping towards the pyramid (gamma = 0.99), a 0.01 step cost.
"""

import jax
import jax.numpy as jnp

SIZE = 9
NORM = SIZE - 1.0
FLOOR, WALL, BALL, PYRAMID = 1, 2, 3, 5
RED, BLUE = 1, 3
PICKUP = 3
GOAL_BONUS = 10.0
STEP_COST = 0.01
GAMMA = 0.99
# (dy, dx) for directions 0=up, 1=right, 2=down, 3=left
DIRS = jnp.array([[-1, 0], [0, 1], [1, 0], [0, -1]])


def find(grid, tile, colour):
    """(found: bool[], position: float32[2] (y, x)) of a cell holding (tile, colour)."""
    mask = (grid[:, :, 0] == tile) & (grid[:, :, 1] == colour)
    index = jnp.argmax(mask.reshape(-1))
    position = jnp.array([index // grid.shape[1], index % grid.shape[1]])
    return mask.any(), position.astype(jnp.float32)


def holds(state, tile, colour):
    return (state.agent.pocket[0] == tile) & (state.agent.pocket[1] == colour)


def front_cell(state):
    """(tile, colour) of the cell the agent faces."""
    y, x = state.agent.position + DIRS[state.agent.direction]
    return state.grid[y, x]


def egocentric(offset, direction):
    """(ahead, right) components of a (dy, dx) offset for an agent facing `direction`."""
    ahead = DIRS[direction].astype(jnp.float32)
    right = jnp.array([ahead[1], -ahead[0]])
    return jnp.array([jnp.dot(offset, ahead), jnp.dot(offset, right)])


def get_observation(state):
    grid = state.grid
    position = state.agent.position.astype(jnp.float32)
    direction = state.agent.direction
    has_pyramid, pyramid = find(grid, PYRAMID, BLUE)
    has_ball, ball = find(grid, BALL, RED)
    to_pyramid = jnp.where(has_pyramid, pyramid - position, 0.0)
    to_ball = jnp.where(has_ball, ball - position, 0.0)
    holding_pyramid = holds(state, PYRAMID, BLUE)
    holding_other = (state.agent.pocket[0] != 0) & ~holding_pyramid
    front = front_cell(state)
    front_flags = jnp.array(
        [
            (front[0] == PYRAMID) & (front[1] == BLUE),
            (front[0] == BALL) & (front[1] == RED),
            front[0] == WALL,
            front[0] == FLOOR,
        ]
    )
    walls = jnp.pad(grid[:, :, 0], 1, constant_values=WALL)
    local = jax.lax.dynamic_slice(walls, (state.agent.position[0], state.agent.position[1]), (3, 3))
    return jnp.concatenate(
        [
            position / NORM,
            jax.nn.one_hot(direction, 4),
            jnp.array([holding_pyramid, holding_other, has_pyramid, has_ball]),
            to_pyramid / NORM,
            egocentric(to_pyramid, direction) / NORM,
            jnp.abs(to_pyramid).sum(keepdims=True) / (2 * NORM),
            to_ball / NORM,
            front_flags,
            (local == FLOOR).reshape(-1),
        ]
    ).astype(jnp.float32)


def potential(state):
    """Higher closer to holding the pyramid: 1 when held, else minus the scaled distance,
    plus 0.5 when facing it; minus 0.5 while the pocket is blocked by the ball."""
    has_pyramid, pyramid = find(state.grid, PYRAMID, BLUE)
    distance = jnp.abs(pyramid - state.agent.position.astype(jnp.float32)).sum()
    front = front_cell(state)
    facing = (front[0] == PYRAMID) & (front[1] == BLUE)
    holding_pyramid = holds(state, PYRAMID, BLUE)
    holding_other = (state.agent.pocket[0] != 0) & ~holding_pyramid
    approach = jnp.where(has_pyramid, -distance / (2 * NORM), 0.0) + 0.5 * facing
    return jnp.where(holding_pyramid, 1.0, approach) - 0.5 * holding_other


def compute_reward(state, action, next_state):
    goal = (action == PICKUP) & holds(next_state, PYRAMID, BLUE) & ~holds(state, PYRAMID, BLUE)
    shaping = GAMMA * potential(next_state) - potential(state)
    return (GOAL_BONUS * goal + shaping - STEP_COST).astype(jnp.float32)
