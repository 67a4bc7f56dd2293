"""Reference interface for xland_medium: put the yellow pyramid next to the green square.

Success fires on a PUTDOWN whose placed object (pyramid or square) ends up 4-adjacent to
the other one, so carrying either object to the other works.

Observation (32 features): agent pose, pocket flags, both objects' offsets, the
egocentric offset and distance to the current subgoal (the nearer object while empty-
handed, the other object while carrying one), the objects' distance to each other,
the front cell, "a PUTDOWN now succeeds", and a 3x3 walkability view.
Reward: 10 on the goal transition, potential-based shaping through the two phases
(reach an object, carry it next to the other; gamma = 0.99), a 0.01 step cost.
"""

import jax
import jax.numpy as jnp

SIZE = 9
NORM = SIZE - 1.0
FLOOR, WALL, SQUARE, PYRAMID = 1, 2, 4, 5
GREEN, YELLOW = 2, 5
PUTDOWN = 4
GOAL_BONUS = 10.0
STEP_COST = 0.01
GAMMA = 0.99
DONE_POTENTIAL = 2.0  # the largest value potential() takes
DIRS = jnp.array([[-1, 0], [0, 1], [1, 0], [0, -1]])


def is_tile(cell, tile, colour):
    return (cell[..., 0] == tile) & (cell[..., 1] == colour)


def find(grid, tile, colour):
    """(found: bool[], position: float32[2] (y, x)) of a cell holding (tile, colour)."""
    mask = is_tile(grid, tile, colour)
    index = jnp.argmax(mask.reshape(-1))
    position = jnp.array([index // grid.shape[1], index % grid.shape[1]])
    return mask.any(), position.astype(jnp.float32)


def next_to(grid, y, x, tile, colour):
    """Whether one of the 4 neighbours of (y, x) holds (tile, colour)."""
    padded = jnp.pad(grid, ((1, 1), (1, 1), (0, 0)))
    around = jnp.stack([padded[y, x + 1], padded[y + 2, x + 1], padded[y + 1, x], padded[y + 1, x + 2]])
    return is_tile(around, tile, colour).any()


def front(state):
    """(y, x) of the cell the agent faces and its (tile, colour)."""
    y, x = state.agent.position + DIRS[state.agent.direction]
    return y, x, state.grid[y, x]


def phase(state):
    """Carrying flags and the position of the current subgoal object."""
    grid, pocket = state.grid, state.agent.pocket
    has_pyramid, pyramid = find(grid, PYRAMID, YELLOW)
    has_square, square = find(grid, SQUARE, GREEN)
    carry_pyramid = is_tile(pocket, PYRAMID, YELLOW)
    carry_square = is_tile(pocket, SQUARE, GREEN)
    position = state.agent.position.astype(jnp.float32)
    d_pyramid = jnp.where(has_pyramid, jnp.abs(pyramid - position).sum(), 2 * SIZE)
    d_square = jnp.where(has_square, jnp.abs(square - position).sum(), 2 * SIZE)
    nearer = jnp.where(d_pyramid <= d_square, pyramid, square)
    subgoal = jnp.where(carry_pyramid, square, jnp.where(carry_square, pyramid, nearer))
    return carry_pyramid, carry_square, subgoal


def putdown_ready(state):
    """A PUTDOWN now would place the carried object next to the other one."""
    y, x, cell = front(state)
    carry_pyramid, carry_square, _ = phase(state)
    free = cell[0] == FLOOR
    near_square = next_to(state.grid, y, x, SQUARE, GREEN)
    near_pyramid = next_to(state.grid, y, x, PYRAMID, YELLOW)
    return free & ((carry_pyramid & near_square) | (carry_square & near_pyramid))


def get_observation(state):
    grid = state.grid
    position = state.agent.position.astype(jnp.float32)
    direction = state.agent.direction
    has_pyramid, pyramid = find(grid, PYRAMID, YELLOW)
    has_square, square = find(grid, SQUARE, GREEN)
    carry_pyramid, carry_square, subgoal = phase(state)
    to_subgoal = subgoal - position
    ahead = DIRS[direction].astype(jnp.float32)
    right = jnp.array([ahead[1], -ahead[0]])
    _, _, cell = front(state)
    walls = jnp.pad(grid[:, :, 0], 1, constant_values=WALL)
    local = jax.lax.dynamic_slice(walls, (state.agent.position[0], state.agent.position[1]), (3, 3))
    return jnp.concatenate(
        [
            position / NORM,
            jax.nn.one_hot(direction, 4),
            jnp.array([carry_pyramid, carry_square, has_pyramid, has_square]),
            jnp.where(has_pyramid, pyramid - position, 0.0) / NORM,
            jnp.where(has_square, square - position, 0.0) / NORM,
            jnp.array([jnp.dot(to_subgoal, ahead), jnp.dot(to_subgoal, right)]) / NORM,
            jnp.abs(to_subgoal).sum(keepdims=True) / (2 * NORM),
            jnp.where(has_pyramid & has_square, jnp.abs(pyramid - square).sum(), 0.0)[None] / (2 * NORM),
            jnp.array(
                [
                    is_tile(cell, PYRAMID, YELLOW),
                    is_tile(cell, SQUARE, GREEN),
                    cell[0] == WALL,
                    cell[0] == FLOOR,
                    putdown_ready(state),
                ]
            ),
            (local == FLOOR).reshape(-1),
        ]
    ).astype(jnp.float32)


def potential(state):
    """Empty-handed: minus the scaled distance to the nearer object (+0.3 when facing one).
    Carrying: 1.5 minus the scaled distance to the other object (+0.5 when ready to put down)."""
    carry_pyramid, carry_square, subgoal = phase(state)
    distance = jnp.abs(subgoal - state.agent.position.astype(jnp.float32)).sum() / (2 * NORM)
    _, _, cell = front(state)
    facing = is_tile(cell, PYRAMID, YELLOW) | is_tile(cell, SQUARE, GREEN)
    carrying = carry_pyramid | carry_square
    return jnp.where(carrying, 1.5 - distance + 0.5 * putdown_ready(state), -distance + 0.3 * facing)


def goal_reached(next_state, action):
    """xminigrid's TileNear goal: after PUTDOWN the front cell holds one object next to the other."""
    y, x, cell = front(next_state)
    pyramid_by_square = is_tile(cell, PYRAMID, YELLOW) & next_to(next_state.grid, y, x, SQUARE, GREEN)
    square_by_pyramid = is_tile(cell, SQUARE, GREEN) & next_to(next_state.grid, y, x, PYRAMID, YELLOW)
    return (action == PUTDOWN) & (pyramid_by_square | square_by_pyramid)


def compute_reward(state, action, next_state):
    goal = goal_reached(next_state, action)
    # The episode ends on the goal: value its state as the best potential (2.0), not as
    # "object dropped" (which would charge the winning PUTDOWN for giving the object up).
    shaping = GAMMA * jnp.where(goal, DONE_POTENTIAL, potential(next_state)) - potential(state)
    return (GOAL_BONUS * goal + shaping - STEP_COST).astype(jnp.float32)
