"""A scripted expert for the XLand tasks: breadth-first search to each subgoal.

Every XLand task of the suite is "pick up object A (it may turn into another in the
pocket), then, if asked, put it down next to object B". The expert reads the grid each
step: while the pocket is empty its targets are the cells holding A; once A is held,
the free floor cells next to B. It walks along a shortest path (closed doors count as
passable and are toggled open when faced) to a cell beside a target, turns to face the
target, then PICKUPs or PUTDOWNs. Pure JAX, one state at a time: vmap it over episodes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from xminigrid.core.constants import DIRECTIONS, PICKABLE, Tiles

FORWARD, TURN_RIGHT, TURN_LEFT, PICKUP, PUTDOWN, TOGGLE = 0, 1, 2, 3, 4, 5
_FAR = 1_000_000
OBJECT_COST = 1_000  # more than any walk on a 13x13 grid


def _shift(a: jax.Array, dy: int, dx: int, fill: int | bool) -> jax.Array:
    """a[y + dy, x + dx] at (y, x); ``fill`` outside the grid. a: [H, W]."""
    h, w = a.shape
    padded = jnp.pad(a, 1, constant_values=fill)
    return padded[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]


def _neighbours(a: jax.Array, fill: int | bool) -> jax.Array:
    """[4, H, W]: a at the up, right, down and left neighbour of each cell (the order
    of xminigrid's directions)."""
    return jnp.stack([_shift(a, int(dy), int(dx), fill) for dy, dx in DIRECTIONS.tolist()])


def distance_to_stand(passable: jax.Array, target: jax.Array, cost: jax.Array | None = None) -> jax.Array:
    """Cost from each cell to the nearest passable cell beside a target, moving through
    passable cells. passable, target: bool[H, W]; cost: int32[H, W], the cost of being
    in a cell (1 each when None) -> int32[H, W] (``_FAR`` or more if none)."""
    cost = jnp.ones(passable.shape, jnp.int32) if cost is None else cost
    beside = passable & _neighbours(target, False).any(0)
    dist0 = jnp.where(beside, cost - 1, _FAR).astype(jnp.int32)

    def relax(carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        dist, _ = carry
        best = _neighbours(dist, _FAR).min(0) + cost
        new = jnp.where(passable, jnp.minimum(dist, best), _FAR)
        return new, (new != dist).any()

    dist, _ = jax.lax.while_loop(lambda c: c[1], relax, (dist0, jnp.asarray(True)))
    return dist


def _is(grid: jax.Array, tile: jax.Array) -> jax.Array:
    return (grid[..., 0] == tile[0]) & (grid[..., 1] == tile[1])


def expert_action(sim: object, pick: jax.Array, near: jax.Array | None, product: jax.Array | None = None) -> jax.Array:
    """The expert's action (int32[]) in xminigrid state ``sim``.

    pick: uint8[2], the (tile, colour) to pick up. near: uint8[2], the tile to put it
    down next to, or None when holding ``pick`` is the goal. product: what ``pick``
    turns into once held (a rule), if anything.

    Objects can wall a room off (one in front of each of its doors): when the object
    cannot be reached, or the drop zone cannot be reached from it, the expert first
    walks through as few objects as it can, picks up the first one in its way and puts it
    down in the open (floor on all eight sides), then plans again.
    """
    grid, agent = sim.grid, sim.agent  # type: ignore[attr-defined]
    tile = grid[..., 0]
    product = pick if product is None else product
    pocket = agent.pocket
    empty_hand = pocket[0] == Tiles.EMPTY
    holding_goal = ((pocket[0] == pick[0]) & (pocket[1] == pick[1])) | (
        (pocket[0] == product[0]) & (pocket[1] == product[1]))
    is_goal_obj = _is(grid, pick) | _is(grid, product)
    closed = tile == Tiles.DOOR_CLOSED
    door = closed | (tile == Tiles.DOOR_OPEN)
    free = (tile == Tiles.FLOOR) | door
    obstacle = jnp.isin(tile, PICKABLE) & ~is_goal_obj
    y, x = agent.position[0], agent.position[1]
    if near is None:
        drop = jnp.zeros_like(free)
        zone_ok = jnp.asarray(True)
    else:
        drop = (tile == Tiles.FLOOR) & _neighbours(_is(grid, near), False).any(0)
        # the drop zone, walking from beside the object (its cell counts as passable)
        from_obj = distance_to_stand(free | is_goal_obj, drop)
        zone_ok = (jnp.where(is_goal_obj, from_obj, _FAR) < _FAR).any()
    pick_dist = distance_to_stand(free, is_goal_obj)
    drop_dist = distance_to_stand(free, drop)
    reachable = jnp.where(holding_goal, drop_dist[y, x], pick_dist[y, x]) < _FAR
    # objects in the way: through them to whatever cannot be reached
    stuck = jnp.where(reachable & zone_ok, False, empty_hand)
    via = jnp.where(empty_hand & (pick_dist[y, x] < _FAR), drop, is_goal_obj)
    # an object put down with floor all round it (the 8 cells) cannot block a way through
    floor = tile == Tiles.FLOOR
    ring = jnp.stack([_shift(floor, dy, dx, False) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx])
    harmless = floor & ring.all(0) & ~drop
    target = jnp.where(holding_goal, drop, jnp.where(empty_hand, is_goal_obj, harmless))
    passable = jnp.where(stuck, free | obstacle, free)
    # through as few objects as possible: one costs as much as a long walk round it
    cost = jnp.where(obstacle, OBJECT_COST, 1).astype(jnp.int32)
    dist = distance_to_stand(passable, jnp.where(stuck, via, target), cost)
    act = jnp.where(holding_goal, PUTDOWN, PICKUP) if near is not None else PICKUP
    act = jnp.where(empty_hand | holding_goal, act, PUTDOWN)
    d = agent.direction
    front = agent.position + DIRECTIONS[d]
    fy, fx = front[0], front[1]
    # a target beside the agent: face it, then act on it (not while clearing the way)
    target_dirs = _neighbours(target, False)[:, y, x] & ~stuck  # bool[4]
    # otherwise: a neighbour one step closer (the one in front first: fewer turns)
    nbr_dist = _neighbours(dist, _FAR)[:, y, x]
    closer = (nbr_dist < dist[y, x]) & (nbr_dist < _FAR)  # dist[y, x]: the agent stands on floor
    wanted = jnp.where(target_dirs.any(), target_dirs, closer)
    order = (d + jnp.arange(4)) % 4  # front, right, back, left
    goal_dir = order[jnp.argmax(wanted[order])]
    turn = jnp.where((goal_dir - d) % 4 == 3, TURN_LEFT, TURN_RIGHT)
    move = jnp.where(closed[fy, fx], TOGGLE, jnp.where(obstacle[fy, fx], PICKUP, FORWARD))
    at_front = jnp.where(target_dirs.any(), act, move)
    return jnp.where(goal_dir == d, at_front, turn).astype(jnp.int32)
