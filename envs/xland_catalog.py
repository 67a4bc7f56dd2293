"""Offline-mutator catalogs for the XLand tasks: observation features and reward terms.

Every block is plain JAX source in the style of the paper's Appendix D; the offline
mutator combines them into programs that pass the same checks as an LLM's answer.
"""

from __future__ import annotations

import dataclasses

from limen_jax.catalog import Catalog, Feature, Term

_HELPERS = """\
DIRS = jnp.array([[-1, 0], [0, 1], [1, 0], [0, -1]])
FLOOR, WALL, DOOR_CLOSED, DOOR_OPEN = 1, 2, 9, 10


def locate(grid, tile, color):
    # mean (y, x) of the cells holding (tile, color), and 1.0 if there is any
    mask = ((grid[:, :, 0] == tile) & (grid[:, :, 1] == color)).astype(jnp.float32)
    ys = jnp.arange(grid.shape[0], dtype=jnp.float32)[:, None] * jnp.ones((1, grid.shape[1]))
    xs = jnp.ones((grid.shape[0], 1)) * jnp.arange(grid.shape[1], dtype=jnp.float32)[None, :]
    count = jnp.sum(mask)
    pos = jnp.array([jnp.sum(ys * mask), jnp.sum(xs * mask)]) / jnp.maximum(count, 1.0)
    return pos, (count > 0).astype(jnp.float32)


def holds(state, tile, color):
    pocket = state.agent.pocket
    return ((pocket[0] == tile) & (pocket[1] == color)).astype(jnp.float32)


def agent_yx(state):
    return state.agent.position.astype(jnp.float32)


def front_yx(state):
    size = state.grid.shape[0]
    return jnp.clip(state.agent.position + DIRS[state.agent.direction], 0, size - 1)


def front_is(state, tile, color):
    f = front_yx(state)
    cell = state.grid[f[0], f[1]]
    return ((cell[0] == tile) & (cell[1] == color)).astype(jnp.float32)


def near(grid, yx, tile, color):
    # 1.0 if a 4-neighbour of cell yx holds (tile, color)
    size = grid.shape[0]
    found = jnp.asarray(False)
    for d in range(4):
        p = jnp.clip(yx + DIRS[d], 0, size - 1)
        found = found | ((grid[p[0], p[1], 0] == tile) & (grid[p[0], p[1], 1] == color))
    return found.astype(jnp.float32)


def dist_to(state, tile, color):
    # Manhattan distance to the object; 0 when it is not on the grid (held or gone)
    pos, present = locate(state.grid, tile, color)
    return present * jnp.sum(jnp.abs(pos - agent_yx(state)))


def local_view(state, radius):
    size = state.grid.shape[0]
    offsets = jnp.arange(-radius, radius + 1)
    ys = jnp.clip(state.agent.position[0] + offsets, 0, size - 1)
    xs = jnp.clip(state.agent.position[1] + offsets, 0, size - 1)
    patch = state.grid[ys[:, None], xs[None, :]].astype(jnp.float32)
    return jnp.concatenate([patch[:, :, 0].ravel() / 12.0, patch[:, :, 1].ravel() / 11.0])
"""


def _generic_features(objects: dict[str, tuple[int, int]], distractors: tuple[str, ...] = ()) -> list[Feature]:
    """Agent, pocket and view features, and four per object; a distractor's (an object
    the goal does not involve) get a low prior."""
    feats = [
        Feature("agent_pos", "f_agent_pos = agent_yx(state) / (state.grid.shape[0] - 1)"),
        Feature("direction", "f_direction = jax.nn.one_hot(state.agent.direction, 4)", prior=2.0),
        Feature("pocket", "f_pocket = state.agent.pocket.astype(jnp.float32) / jnp.array([12.0, 11.0])"),
        Feature("step_frac", "f_step_frac = jnp.array([state.step_num / HORIZON])"),
        Feature(
            "front_cell",
            "fy = front_yx(state)\n"
            "f_front_cell = state.grid[fy[0], fy[1]].astype(jnp.float32) / jnp.array([12.0, 11.0])",
        ),
        Feature("local_view_3", "f_local_view_3 = local_view(state, 1)"),
        Feature("local_view_5", "f_local_view_5 = local_view(state, 2)"),
    ]
    for name, (tile, color) in objects.items():
        obj = f"{tile}, {color}"
        prior = 0.3 if name in distractors else 1.0
        feats += [
            Feature(
                f"{name}_rel",
                f"pos, present = locate(state.grid, {obj})\n"
                f"f_{name}_rel = jnp.concatenate([(pos - agent_yx(state)) / state.grid.shape[0] * present,"
                " jnp.array([present])])",
                prior,
            ),
            Feature(f"{name}_dist", f"f_{name}_dist = jnp.array([dist_to(state, {obj}) / state.grid.shape[0]])", prior),
            Feature(f"facing_{name}", f"f_facing_{name} = jnp.array([front_is(state, {obj})])", prior),
            Feature(
                f"{name}_side",
                f"pos, present = locate(state.grid, {obj})\n"
                "delta = pos - agent_yx(state)\n"
                f"f_{name}_side = present * jnp.array([delta[0] < 0, delta[0] > 0, delta[1] < 0, delta[1] > 0],"
                " dtype=jnp.float32)",
                prior,
            ),
        ]
    return feats


def _approach(name: str, obj: str, when: str = "1.0") -> Term:
    return Term(
        f"approach_{name}",
        f"t_approach_{name} = ({when}) * (dist_to(state, {obj}) - dist_to(next_state, {obj}))",
        0.5,
    )


_STEP_COST = Term("step_cost", "t_step_cost = -1.0", 0.01)

# Shaping terms are differences of a state function (potential-based, Ng et al. 1999) so
# that no cycle pays: picking up then dropping, or stepping in and out of the ready spot,
# nets zero, and every weight the mutator tries leaves the optimal policy alone.


def easy() -> Catalog:
    pyramid, ball = (5, 3), (3, 1)
    prelude = _HELPERS + "HORIZON = 80.0\nPYRAMID = (5, 3)\nBALL = (3, 1)\n"
    feats = _generic_features({"pyramid": pyramid, "ball": ball}, distractors=("ball",))
    feats.append(Feature("holding_pyramid", "f_holding_pyramid = jnp.array([holds(state, *PYRAMID)])"))
    terms = [
        Term(
            "goal",
            "t_goal = (action == 3) * holds(next_state, *PYRAMID) * (1.0 - holds(state, *PYRAMID))",
            10.0,
        ),
        _approach("pyramid", "*PYRAMID"),
        Term("facing_pyramid", "t_facing_pyramid = front_is(next_state, *PYRAMID) - front_is(state, *PYRAMID)", 0.1),
        Term(
            "wrong_pickup",
            "t_wrong_pickup = -1.0 * (action == 3) * holds(next_state, *BALL) * (1.0 - holds(state, *BALL))",
            0.5,
        ),
        _STEP_COST,
    ]
    return Catalog(prelude, tuple(feats), tuple(terms), required_terms=("goal",), dense_terms=("approach_pyramid",))


_PLACED = """\
fy = front_yx(next_state)
placed = (action == 4) * holds(state, *CARRY) * (1.0 - holds(next_state, *CARRY))
"""


# Medium and hard share the placement structure: carry CARRY, put it down next to ANCHOR.
_READY = """

def ready(state):
    # holding CARRY while facing an empty floor cell next to ANCHOR: PUTDOWN now succeeds
    fy = front_yx(state)
    cell = state.grid[fy[0], fy[1], 0]
    return holds(state, *CARRY) * near(state.grid, fy, *ANCHOR) * (cell == FLOOR)
"""


def _pickup(weight: float) -> Term:
    return Term("pickup", "t_pickup = holds(next_state, *CARRY) - holds(state, *CARRY)", weight)


def _placement_goal(weight: float) -> Term:
    return Term("goal", _PLACED + "t_goal = placed * near(next_state.grid, fy, *ANCHOR)", weight)


def _placement_terms(ready: float, bad_drop: float) -> tuple[Term, Term]:
    return (
        Term("ready_putdown", "t_ready_putdown = ready(next_state) - ready(state)", ready),
        Term("bad_drop", _PLACED + "t_bad_drop = -placed * (1.0 - near(next_state.grid, fy, *ANCHOR))", bad_drop),
    )


def _front_by_anchor(name: str) -> Feature:
    return Feature(
        f"front_by_{name}",
        "fy = front_yx(state)\n"
        f"f_front_by_{name} = jnp.array([near(state.grid, fy, *ANCHOR),"
        " (state.grid[fy[0], fy[1], 0] == FLOOR).astype(jnp.float32)])",
    )


def medium() -> Catalog:
    prelude = _HELPERS + "HORIZON = 80.0\nCARRY = (5, 5)\nANCHOR = (4, 2)\n" + _READY
    feats = _generic_features({"pyramid": (5, 5), "square": (4, 2)})
    feats += [
        Feature("holding_pyramid", "f_holding_pyramid = jnp.array([holds(state, *CARRY)])"),
        _front_by_anchor("square"),
    ]
    terms = [
        _placement_goal(10.0),
        _pickup(2.0),
        _approach("pyramid", "*CARRY", "1.0 - holds(state, *CARRY)"),
        Term(
            "approach_square",
            "t_approach_square = holds(state, *CARRY) * (dist_to(state, *ANCHOR) - dist_to(next_state, *ANCHOR))",
            0.5,
        ),
        *_placement_terms(0.2, 1.0),
        _STEP_COST,
    ]
    return Catalog(prelude, tuple(feats), tuple(terms), required_terms=("goal",), dense_terms=("approach_pyramid",))


# Walls split the hard grid into four rooms joined by doors, so the Manhattan distance to
# a subgoal in another room points into a wall; an author who reads "four rooms" measures
# distance along the floor instead: a breadth-first relaxation over walkable cells (closed
# doors count as walkable: one TOGGLE opens them).
_ROUTE = """

FAR = 60.0  # longer than any path in a 13x13 grid


def target_mask(state):
    # cells of the current subgoal: the hex while carrying the ball, else the dropped ball, else the pyramid
    grid = state.grid
    hex_ = (grid[:, :, 0] == ANCHOR[0]) & (grid[:, :, 1] == ANCHOR[1])
    ball = (grid[:, :, 0] == CARRY[0]) & (grid[:, :, 1] == CARRY[1])
    pyramid = (grid[:, :, 0] == PYRAMID[0]) & (grid[:, :, 1] == PYRAMID[1])
    return jnp.where(holds(state, *CARRY) > 0, hex_, jnp.where(jnp.any(ball), ball, pyramid))


def route(state):
    # steps along the floor from the agent to a cell next to the subgoal, and the same for
    # the four cells around it in egocentric order (ahead, right, back, left)
    tiles = state.grid[:, :, 0]
    walkable = (tiles == FLOOR) | (tiles == DOOR_CLOSED) | (tiles == DOOR_OPEN)

    def relax(_, dist):
        pad = jnp.pad(dist, 1, constant_values=FAR)
        around = jnp.minimum(jnp.minimum(pad[:-2, 1:-1], pad[2:, 1:-1]), jnp.minimum(pad[1:-1, :-2], pad[1:-1, 2:]))
        return jnp.where(walkable, jnp.minimum(dist, around + 1.0), dist)

    dist = jax.lax.fori_loop(0, 40, relax, jnp.where(target_mask(state), 0.0, FAR))
    pad = jnp.pad(dist, 1, constant_values=FAR)
    y, x = state.agent.position
    moves = DIRS[(state.agent.direction + jnp.arange(4)) % 4]
    return dist[y, x], pad[y + 1 + moves[:, 0], x + 1 + moves[:, 1]]
"""


def hard() -> Catalog:
    prelude = (
        _HELPERS
        + (
            "HORIZON = 400.0\nPYRAMID = (5, 3)\nCARRY = (3, 2)\nANCHOR = (11, 5)\n\n\n"
            "def target_yx(state):\n"
            "    # the hex while carrying the ball, else the ball if dropped, else the pyramid\n"
            "    p, _ = locate(state.grid, *PYRAMID)\n"
            "    b, dropped = locate(state.grid, *CARRY)\n"
            "    h, _ = locate(state.grid, *ANCHOR)\n"
            "    return jnp.where(holds(state, *CARRY) > 0, h, jnp.where(dropped > 0, b, p))\n"
        )
        + _READY
        + _ROUTE
    )
    feats = _generic_features({"pyramid": (5, 3), "hex": (11, 5), "purple_ball": (3, 4)}, ("purple_ball",))
    # what an informed author reaches for first: heading, walls ahead, the subgoal's offset
    promising = ("direction", "front_cell", "local_view_3")
    feats = [dataclasses.replace(f, prior=3.0) if f.name in promising else f for f in feats]
    feats += [
        Feature("holding_ball", "f_holding_ball = jnp.array([holds(state, *CARRY)])", prior=3.0),
        Feature(
            "target_rel",
            "f_target_rel = (target_yx(state) - agent_yx(state)) / state.grid.shape[0]",
            prior=6.0,
        ),
        dataclasses.replace(_front_by_anchor("hex"), prior=3.0),
        Feature(
            "route",
            "steps, around = route(state)\n"
            "f_route = jnp.concatenate([jnp.array([steps / FAR]),"
            " jax.nn.one_hot(jnp.argmin(around), 4) * (jnp.min(around) < steps)])",
            prior=6.0,
        ),
        Feature(
            "front_door",
            "fy = front_yx(state)\n"
            "f_front_door = jnp.array([state.grid[fy[0], fy[1], 0] == DOOR_CLOSED,"
            " state.grid[fy[0], fy[1], 0] == DOOR_OPEN], dtype=jnp.float32)",
        ),
        Feature(
            "room",
            "half = state.grid.shape[0] // 2\n"
            "f_room = jnp.array([state.agent.position[0] < half, state.agent.position[1] < half],"
            " dtype=jnp.float32)",
        ),
    ]
    terms = [
        _placement_goal(20.0),
        _pickup(5.0),
        Term(
            "approach_target",
            "before = jnp.sum(jnp.abs(target_yx(state) - agent_yx(state)))\n"
            "after = jnp.sum(jnp.abs(target_yx(next_state) - agent_yx(next_state)))\n"
            "same_phase = holds(state, *CARRY) == holds(next_state, *CARRY)\n"
            "t_approach_target = same_phase * (before - after)",
            0.5,
        ),
        Term(
            "approach_route",
            "before, _ = route(state)\n"
            "after, _ = route(next_state)\n"
            "same_phase = holds(state, *CARRY) == holds(next_state, *CARRY)\n"
            "t_approach_route = same_phase * (before - after)",
            0.5,
            prior=2.0,
        ),
        Term(
            "open_door",
            "opened = jnp.sum(next_state.grid[:, :, 0] == DOOR_OPEN) - jnp.sum(state.grid[:, :, 0] == DOOR_OPEN)\n"
            "t_open_door = opened.astype(jnp.float32)",
            0.5,
        ),
        *_placement_terms(0.5, 3.0),
        _STEP_COST,
    ]
    return Catalog(
        prelude,
        tuple(feats),
        tuple(terms),
        required_terms=("goal",),
        dense_terms=("approach_target", "approach_route"),
        seed_features=(2, 3),
    )
