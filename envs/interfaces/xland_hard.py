"""Reference interface for xland_hard: four rooms; the blue pyramid becomes a green ball
when picked up; put the green ball next to the yellow hex. A purple ball and an orange
square distract (together they make a useless grey star).

Walls split the grid into rooms, so straight-line distances mislead; both φ and R use
the shortest-path distance to the current subgoal, computed by 40 rounds of relaxation
over the grid (closed doors count as passable: one TOGGLE opens them).

Observation (35 features): agent pose, pocket flags, offsets to the pyramid, a dropped
green ball and the hex, the path distance to the subgoal and which egocentric move
(ahead / right / back / left) shortens it, the front cell, "a PUTDOWN now succeeds",
and a 3x3 walkability view.
Reward: 10 on the goal transition, potential-based shaping on the path distance through
the phases (get the ball, carry it to the hex; gamma = 0.99), a 0.01 step cost.
"""

import jax
import jax.numpy as jnp

SIZE = 13
NORM = SIZE - 1.0
FAR = 60.0  # longer than any path in the 13x13 four-rooms grid
RELAX_STEPS = 40
FLOOR, WALL, BALL, PYRAMID = 1, 2, 3, 5
GOAL_TILE, DOOR_CLOSED, DOOR_OPEN, HEX = 6, 9, 10, 11
GREEN, BLUE, YELLOW = 2, 3, 5
PUTDOWN = 4
GOAL_BONUS = 10.0
STEP_COST = 0.01
GAMMA = 0.99
DONE_POTENTIAL = 2.5  # the largest value potential() takes
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


def subgoal_mask(state):
    """Cells of the current subgoal object: the hex while carrying the green ball, else a
    green ball lying on the grid, else the blue pyramid."""
    grid = state.grid
    carrying = is_tile(state.agent.pocket, BALL, GREEN)
    ball = is_tile(grid, BALL, GREEN)
    pyramid = is_tile(grid, PYRAMID, BLUE)
    hex_ = is_tile(grid, HEX, YELLOW)
    return jnp.where(carrying, hex_, jnp.where(ball.any(), ball, pyramid))


def path_distances(grid, target):
    """float32[H, W]: steps from each walkable cell to a cell next to `target` (FAR if none)."""
    tiles = grid[:, :, 0]
    walkable = (tiles == FLOOR) | (tiles == GOAL_TILE) | (tiles == DOOR_OPEN) | (tiles == DOOR_CLOSED)

    def relax(_, dist):
        padded = jnp.pad(dist, 1, constant_values=FAR)
        around = jnp.minimum(
            jnp.minimum(padded[:-2, 1:-1], padded[2:, 1:-1]), jnp.minimum(padded[1:-1, :-2], padded[1:-1, 2:])
        )
        return jnp.where(walkable, jnp.minimum(dist, around + 1.0), dist)

    start = jnp.where(target, 0.0, FAR)
    return jnp.minimum(jax.lax.fori_loop(0, RELAX_STEPS, relax, start), FAR)


def route(state):
    """Path distance from the agent to the subgoal, and the four neighbours' distances
    in egocentric order (ahead, right, back, left)."""
    dist = path_distances(state.grid, subgoal_mask(state))
    padded = jnp.pad(dist, 1, constant_values=FAR)
    y, x = state.agent.position
    order = (state.agent.direction + jnp.arange(4)) % 4
    steps = DIRS[order]
    around = padded[y + 1 + steps[:, 0], x + 1 + steps[:, 1]]
    return dist[y, x], around


def putdown_ready(state):
    """A PUTDOWN now would place the green ball next to the hex."""
    y, x, cell = front(state)
    carrying = is_tile(state.agent.pocket, BALL, GREEN)
    return carrying & (cell[0] == FLOOR) & next_to(state.grid, y, x, HEX, YELLOW)


def get_observation(state):
    grid = state.grid
    position = state.agent.position.astype(jnp.float32)
    direction = state.agent.direction
    has_pyramid, pyramid = find(grid, PYRAMID, BLUE)
    has_ball, ball = find(grid, BALL, GREEN)
    has_hex, hex_ = find(grid, HEX, YELLOW)
    carrying = is_tile(state.agent.pocket, BALL, GREEN)
    carrying_other = (state.agent.pocket[0] != 0) & ~carrying
    distance, around = route(state)
    best_move = jax.nn.one_hot(jnp.argmin(around), 4) * (around.min() < distance)
    _, _, cell = front(state)
    walls = jnp.pad(grid[:, :, 0], 1, constant_values=WALL)
    local = jax.lax.dynamic_slice(walls, (state.agent.position[0], state.agent.position[1]), (3, 3))
    walkable = (local == FLOOR) | (local == DOOR_OPEN)
    return jnp.concatenate(
        [
            position / NORM,
            jax.nn.one_hot(direction, 4),
            jnp.array([carrying, carrying_other, has_pyramid, has_ball, has_hex]),
            jnp.where(has_pyramid, pyramid - position, 0.0) / NORM,
            jnp.where(has_ball, ball - position, 0.0) / NORM,
            jnp.where(has_hex, hex_ - position, 0.0) / NORM,
            (distance / FAR)[None],
            best_move,
            jnp.array([cell[0] == DOOR_CLOSED, cell[0] == WALL, cell[0] == FLOOR, putdown_ready(state)]),
            walkable.reshape(-1),
        ]
    ).astype(jnp.float32)


def potential(state):
    """Phase value (0: fetch the pyramid, 1: pick up the dropped ball, 2: carry the ball)
    minus the scaled path distance to the subgoal; +0.5 when a PUTDOWN would succeed,
    -0.5 while carrying a distractor."""
    carrying = is_tile(state.agent.pocket, BALL, GREEN)
    ball_down = is_tile(state.grid, BALL, GREEN).any()
    stage = jnp.where(carrying, 2.0, jnp.where(ball_down, 1.0, 0.0))
    distance, _ = route(state)
    carrying_other = (state.agent.pocket[0] != 0) & ~carrying
    return stage - distance / FAR + 0.5 * putdown_ready(state) - 0.5 * carrying_other


def goal_reached(next_state, action):
    """xminigrid's TileNear goal: after PUTDOWN the front cell holds the ball next to the hex (or
    the hex next to the ball)."""
    y, x, cell = front(next_state)
    ball_by_hex = is_tile(cell, BALL, GREEN) & next_to(next_state.grid, y, x, HEX, YELLOW)
    hex_by_ball = is_tile(cell, HEX, YELLOW) & next_to(next_state.grid, y, x, BALL, GREEN)
    return (action == PUTDOWN) & (ball_by_hex | hex_by_ball)


def compute_reward(state, action, next_state):
    goal = goal_reached(next_state, action)
    # The episode ends on the goal: value its state as the best potential (2.5), not as
    # "object dropped" (which would charge the winning PUTDOWN for giving the object up).
    shaping = GAMMA * jnp.where(goal, DONE_POTENTIAL, potential(next_state)) - potential(state)
    return (GOAL_BONUS * goal + shaping - STEP_COST).astype(jnp.float32)
