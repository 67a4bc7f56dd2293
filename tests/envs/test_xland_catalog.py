"""The xland_hard catalog's route pieces measure distance along the floor: on real reset
states of the four-rooms grid they agree with a breadth-first search written here in
plain Python, and the shaping term pays exactly the steps a move saves."""

from __future__ import annotations

from collections import deque

import jax
import jax.numpy as jnp
import numpy as np

import limen_jax as lj
from limen_jax.llm.offline import render

FLOOR, DOOR_CLOSED, DOOR_OPEN = 1, 9, 10
PYRAMID = (5, 3)
DIRS = [(-1, 0), (0, 1), (1, 0), (0, -1)]
FORWARD = 0


def bfs_to_pyramid(grid: np.ndarray) -> dict[tuple[int, int], int]:
    """Steps from every walkable cell to a cell next to the blue pyramid (doors walkable)."""
    h, w, _ = grid.shape
    walkable = np.isin(grid[:, :, 0], (FLOOR, DOOR_CLOSED, DOOR_OPEN))
    target = (grid[:, :, 0] == PYRAMID[0]) & (grid[:, :, 1] == PYRAMID[1])
    dist = {(int(y), int(x)): 0 for y, x in zip(*np.nonzero(target))}
    queue = deque(dist)
    while queue:
        y, x = queue.popleft()
        for dy, dx in DIRS:
            p = (y + dy, x + dx)
            if 0 <= p[0] < h and 0 <= p[1] < w and walkable[p] and p not in dist:
                dist[p] = dist[(y, x)] + 1
                queue.append(p)
    return dist


def test_route_feature_and_shaping_follow_the_shortest_path_through_the_doors():
    task = lj.make("xland_hard")
    catalog = task.offline_catalog()
    program: dict = {}
    # one scalar reward ("named": False), the shaping term's value itself
    source = render(catalog, {"features": ["route"], "terms": {"approach_route": 1.0}, "named": False})
    exec(compile(source, "route_program", "exec"), program)  # noqa: S102 (the catalog's own source)
    far = program["FAR"]
    keys = jax.random.split(jax.random.key(0), 12)

    @jax.jit
    def run(keys):  # one compiled call for every reset state and its forward step
        states = jax.vmap(task.reset)(keys)
        nexts = jax.vmap(task.step, in_axes=(0, None))(states, jnp.int32(FORWARD))
        obs = jax.vmap(program["get_observation"])(states.sim)
        paid = jax.vmap(program["compute_reward"], in_axes=(0, None, 0))(states.sim, jnp.int32(FORWARD), nexts.sim)
        agent, moved = states.sim.agent, nexts.sim.agent
        return states.sim.grid, agent.position, agent.direction, moved.position, obs, paid

    grids, positions, directions, moved, obs, paid = (np.asarray(a) for a in run(keys))
    across_rooms = 0
    for k in range(len(keys)):
        grid = grids[k]
        dist = bfs_to_pyramid(grid)
        y, x = (int(v) for v in positions[k])
        direction = int(directions[k])
        f = obs[k]
        assert f.shape == (5,)
        assert round(float(f[0]) * far, 3) == dist[(y, x)]
        # the one-hot names the egocentric move (ahead, right, back, left) that shortens the route
        around = [dist.get((y + DIRS[(direction + i) % 4][0], x + DIRS[(direction + i) % 4][1]), far)
                  for i in range(4)]  # fmt: skip
        expected = np.zeros(4)
        if min(around) < dist[(y, x)]:
            expected[int(np.argmin(around))] = 1.0
        assert np.array_equal(f[1:], expected)
        pyramid = np.nonzero((grid[:, :, 0] == PYRAMID[0]) & (grid[:, :, 1] == PYRAMID[1]))
        manhattan = min(abs(y - py) + abs(x - px) for py, px in zip(*pyramid))
        across_rooms += dist[(y, x)] > manhattan + 1  # a wall in the way: the floor route is longer
        # a step forward is paid what it saves along the floor (weight 1): +1, 0 or -1
        ny, nx = (int(v) for v in moved[k])
        assert paid[k] == dist[(y, x)] - dist[(ny, nx)]
    assert across_rooms >= 1
