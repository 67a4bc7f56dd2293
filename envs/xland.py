"""XLand-MiniGrid tasks: xland_easy, xland_medium, xland_hard (paper §5, DESIGN.md §4).

Rulesets are built in code (xminigrid's benchmark loader downloads at run time). The
simulator state that programs see is xminigrid's own ``State`` (``state.grid``,
``state.agent.position``, ``state.agent.direction``, ``state.agent.pocket``,
``state.step_num``), so programs written in the style of the paper's Appendix D run
unchanged. Stepping calls xminigrid's core functions directly with the task's goal and
rules decoded once, which skips the egocentric view (computed only by the default
observation) and the per-step ``lax.switch`` over every goal and rule type.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from limen_envs import xland_catalog, xland_expert
from limen_envs.presets import XLAND_CPU, cpu_budget, paper_budget, xland_paper
from xminigrid.core.actions import take_action
from xminigrid.core.constants import DIRECTIONS, NUM_COLORS, NUM_TILES, TILES_REGISTRY, Colors, Tiles
from xminigrid.core.goals import AgentHoldGoal, BaseGoal, TileNearGoal
from xminigrid.core.observation import transparent_field_of_view
from xminigrid.core.rules import AgentHoldRule, BaseRule, EmptyRule, TileNearRule
from xminigrid.environment import Environment
from xminigrid.types import RuleSet

from limen_jax.catalog import Catalog
from limen_jax.task import Budget, Discrete, Task, TaskState


def xland_environment() -> type[Environment[Any, Any]]:
    """xminigrid's ``XLandMiniGrid`` environment class, the one ``xminigrid.make`` builds
    for every "XLand-MiniGrid-*" id, loaded from its module file without running the
    ``xminigrid.envs`` package's ``__init__``: that imports every MiniGrid environment and
    builds their constants eagerly, which every sandboxed check worker would pay for
    nothing. Registered under its own name, so a later ``import xminigrid.envs`` reuses it.
    The module's location is the one thing used beyond xminigrid's public API
    (tests/envs/test_xland.py pins it against ``xminigrid.make``)."""
    name = "xminigrid.envs.xland"
    if name not in sys.modules:
        import xminigrid

        path = pathlib.Path(xminigrid.__file__).parent / "envs" / "xland.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].XLandMiniGrid  # type: ignore[no-any-return]


VIEW_SIZE = 7  # the paper's default observation is the 7x7 egocentric view

_CONTEXT = """\
## Environment: XLand-MiniGrid ({grid_desc})

{goal_desc}

The episode ends with success as soon as the goal is achieved; success counts only
within {horizon} steps (evaluation cuts episodes there; training may run them longer). Object
positions and the agent's start pose are randomised every episode.

### State (argument `state`, an xminigrid `State`)
- `state.grid`: uint8 array of shape ({h}, {w}, 2); `grid[y, x, 0]` is the tile type,
  `grid[y, x, 1]` its colour. The outer border is walls.
- `state.agent.position`: int32 array (2,), the agent's (y, x).
- `state.agent.direction`: int32 scalar, 0=up, 1=right, 2=down, 3=left.
- `state.agent.pocket`: uint8 array (2,), (tile, colour) of the held object;
  (0, 0) when empty-handed.
- `state.step_num`: int32 scalar, steps taken in this episode.

Tile ids: EMPTY=0, FLOOR=1, WALL=2, BALL=3, SQUARE=4, PYRAMID=5, GOAL=6, KEY=7,
DOOR_LOCKED=8, DOOR_CLOSED=9, DOOR_OPEN=10, HEX=11, STAR=12.
Colour ids: EMPTY=0, RED=1, GREEN=2, BLUE=3, PURPLE=4, YELLOW=5, GREY=6, BLACK=7,
ORANGE=8, WHITE=9, BROWN=10, PINK=11. Floor cells are (1, 7) (black floor).
Direction vectors (dy, dx): up (-1, 0), right (0, 1), down (1, 0), left (0, -1).
The cell in front of the agent is `position` plus the vector of `direction`: a program
builds that table itself, e.g. `jnp.array([[-1, 0], [0, 1], [1, 0], [0, -1]])[direction]`.

### Actions (`action`, int32 scalar)
0 FORWARD (move into the front cell if walkable), 1 TURN_RIGHT, 2 TURN_LEFT,
3 PICKUP (take the object in the front cell into the empty pocket),
4 PUTDOWN (place the held object on the empty front floor cell), 5 TOGGLE (open doors).
{rules_desc}"""


_SCENERY = (Tiles.EMPTY, Tiles.FLOOR, Tiles.WALL)
_TILE_NAMES = {Tiles.BALL: "ball", Tiles.SQUARE: "square", Tiles.PYRAMID: "pyramid", Tiles.GOAL: "goal",
               Tiles.KEY: "key", Tiles.DOOR_LOCKED: "locked door", Tiles.DOOR_CLOSED: "closed door",
               Tiles.DOOR_OPEN: "open door", Tiles.HEX: "hex", Tiles.STAR: "star"}
_COLOUR_NAMES = ("", "red", "green", "blue", "purple", "yellow", "grey", "black", "orange", "white", "brown", "pink")
ACTION_NAMES = ("FORWARD", "TURN_RIGHT", "TURN_LEFT", "PICKUP", "PUTDOWN", "TOGGLE")


def _name(tile: int, colour: int) -> str:
    return f"{_COLOUR_NAMES[colour]} {_TILE_NAMES.get(tile, f'tile {tile}')}".strip()


def _tile(tile: int, color: int) -> jax.Array:
    return TILES_REGISTRY[tile, color]  # type: ignore[call-overload]  # a jnp array at run time


class XLandTask(Task):
    """An XLand-MiniGrid single-task environment with a fixed ruleset."""

    grid_type = "R1"
    size = 9
    goal: BaseGoal
    rules: tuple[BaseRule, ...] = ()
    init_tiles: tuple[tuple[int, int], ...] = ()
    action_space = Discrete(6)
    action_names = ACTION_NAMES
    ppo_presets = {"cpu": XLAND_CPU, "paper": xland_paper(9)}
    goal_desc = ""
    rules_desc = ""

    def __init__(self, **params: float) -> None:
        super().__init__(**params)
        rules = self.rules or (EmptyRule(),)
        self.ruleset = RuleSet(
            goal=self.goal.encode(),
            rules=jnp.stack([r.encode() for r in rules]),
            init_tiles=jnp.stack([_tile(t, c) for t, c in self.init_tiles]),
        )
        self._env = xland_environment()()
        self._env_params = self._env.default_params(
            height=self.size,
            width=self.size,
            grid_type=self.grid_type,
            view_size=VIEW_SIZE,
            max_steps=self.episode_length,
            ruleset=self.ruleset,
        )

    def reset(self, key: jax.Array) -> TaskState:
        # the timestep's egocentric view is left unused: jit drops it
        sim = self._env.reset(self._env_params, key).state.replace(step_num=jnp.asarray(0, jnp.int32))
        false = jnp.asarray(False)
        return TaskState(sim=sim, done=false, success=false)

    def step(self, state: TaskState, action: jax.Array) -> TaskState:
        sim = state.sim
        grid, agent, position = take_action(sim.grid, sim.agent, action)
        for rule in self.rules:
            grid, agent = rule(grid, agent, action, position)
        new_sim = sim.replace(grid=grid, agent=agent, step_num=sim.step_num + 1)
        reached = self._goal_reached(new_sim, action)
        return TaskState(sim=new_sim, done=reached, success=state.success | reached)

    def _goal_reached(self, next_sim: Any, action: jax.Array) -> jax.Array:
        # take_action's changed position is always the cell in front of the agent, and
        # no action both moves and changes a tile, so it is recomputable from next_sim.
        front = next_sim.agent.position + DIRECTIONS[next_sim.agent.direction]
        return jnp.asarray(self.goal(next_sim.grid, next_sim.agent, action, front), bool)

    def default_observation(self, sim: Any) -> jax.Array:
        """One-hot 7x7 egocentric view (tile 13 + colour 12 per cell), direction, pocket.

        float32[7 * 7 * 25 + 4 + 25] = float32[1254].
        """
        view = transparent_field_of_view(sim.grid, sim.agent, VIEW_SIZE, VIEW_SIZE)
        parts = [
            jax.nn.one_hot(view[..., 0], NUM_TILES).reshape(-1),
            jax.nn.one_hot(view[..., 1], NUM_COLORS).reshape(-1),
            jax.nn.one_hot(sim.agent.direction, 4),
            jax.nn.one_hot(sim.agent.pocket[0], NUM_TILES),
            jax.nn.one_hot(sim.agent.pocket[1], NUM_COLORS),
        ]
        return jnp.concatenate(parts).astype(jnp.float32)

    # the scripted expert's subgoals: pick up ``expert_pick`` (tile, colour), then put it
    # down next to ``expert_near`` (None: holding it is the goal)
    expert_pick: tuple[int, int] = (0, 0)
    expert_near: tuple[int, int] | None = None
    expert_product: tuple[int, int] | None = None  # what the picked object turns into (a rule)

    def expert_action(self, sim: Any, key: jax.Array) -> jax.Array:
        """The scripted expert's action: BFS to each subgoal (envs/xland_expert.py)."""
        near = None if self.expert_near is None else jnp.asarray(self.expert_near, jnp.uint8)
        product = None if self.expert_product is None else jnp.asarray(self.expert_product, jnp.uint8)
        return xland_expert.expert_action(sim, jnp.asarray(self.expert_pick, jnp.uint8), near, product)

    def describe_state(self, sim: Any) -> str:
        """Agent cell and heading, pocket, and every object's cell, e.g. "agent (3, 4)
        facing up, holding nothing; blue pyramid (2, 6), red ball (7, 1)"."""
        grid = np.asarray(sim.grid)
        y, x = (int(v) for v in np.asarray(sim.agent.position))
        pocket = np.asarray(sim.agent.pocket)
        held = "nothing" if int(pocket[0]) == Tiles.EMPTY else _name(int(pocket[0]), int(pocket[1]))
        heading = ("up", "right", "down", "left")[int(sim.agent.direction)]
        cells = zip(*np.nonzero(~np.isin(grid[..., 0], _SCENERY)))
        objects = [f"{_name(int(grid[r, q, 0]), int(grid[r, q, 1]))} ({r}, {q})" for r, q in cells]
        return f"agent ({y}, {x}) facing {heading}, holding {held}; " + ", ".join(objects)

    def render(self, sim: Any) -> Any:
        """The whole grid and the agent, xminigrid's RGB renderer (32 px tiles)."""
        from xminigrid.rendering.rgb_render import render

        return render(np.asarray(sim.grid), jax.tree.map(np.asarray, sim.agent), VIEW_SIZE, 32)

    def sparse_reward(self, sim: Any, action: jax.Array, next_sim: Any) -> jax.Array:
        return self._goal_reached(next_sim, action).astype(jnp.float32)

    def offline_catalog(self) -> Catalog:
        return getattr(xland_catalog, self.name.removeprefix("xland_"))()

    @property
    def context(self) -> str:
        grid_desc = "one room" if self.grid_type == "R1" else "four rooms joined by doors"
        return _CONTEXT.format(
            grid_desc=f"{self.size}x{self.size}, {grid_desc}",
            goal_desc=self.goal_desc,
            horizon=self.episode_length,
            h=self.size,
            w=self.size,
            rules_desc=self.rules_desc,
        )


class XLandEasy(XLandTask):
    """Pick up the blue pyramid in a 9x9 room within 80 steps."""

    name = "xland_easy"
    description = "XLand-MiniGrid 9x9 room: pick up the blue pyramid (a red ball distracts); 80 steps"
    episode_length = 80
    # paper cascade (DESIGN.md §4); what the cpu preset's search takes and finds: docs/results.md
    budgets = {"paper": paper_budget(500_000, 1_000_000, 0.05), "cpu": cpu_budget(150_000, 3, 3, 0.05)}
    goal = AgentHoldGoal(tile=_tile(Tiles.PYRAMID, Colors.BLUE))
    init_tiles = ((Tiles.PYRAMID, Colors.BLUE), (Tiles.BALL, Colors.RED))
    expert_pick = (Tiles.PYRAMID, Colors.BLUE)
    goal_desc = (
        "**Goal:** pick up the BLUE PYRAMID (tile 5, colour 3). The room also holds a RED BALL\n"
        "(tile 3, colour 1), a distractor. Success fires on the PICKUP that puts the blue pyramid\n"
        "in the agent's pocket."
    )


class XLandMedium(XLandTask):
    """Put the yellow pyramid next to the green square in a 9x9 room within 80 steps."""

    name = "xland_medium"
    description = "XLand-MiniGrid 9x9 room: place the yellow pyramid next to the green square; 80 steps"
    episode_length = 80
    budgets = {"paper": paper_budget(1_000_000, 2_000_000, 0.02), "cpu": cpu_budget(250_000, 3, 3, 0.02)}
    # its reference reward (interfaces/xland_medium.py) has 875 nodes: bins of 60 put it
    # in bin 14 of 0-19 (at 25 it sat in the open-ended last bin with every larger program)
    reward_ast_bin_width = 60
    goal = TileNearGoal(tile_a=_tile(Tiles.PYRAMID, Colors.YELLOW), tile_b=_tile(Tiles.SQUARE, Colors.GREEN))
    init_tiles = ((Tiles.PYRAMID, Colors.YELLOW), (Tiles.SQUARE, Colors.GREEN))
    expert_pick, expert_near = (Tiles.PYRAMID, Colors.YELLOW), (Tiles.SQUARE, Colors.GREEN)
    goal_desc = (
        "**Goal:** place the YELLOW PYRAMID (tile 5, colour 5) on a cell next to (4-neighbourhood)\n"
        "the GREEN SQUARE (tile 4, colour 2). Pick the pyramid up, carry it, and PUTDOWN onto an\n"
        "empty floor cell adjacent to the square; success fires on that PUTDOWN."
    )


class XLandHard(XLandTask):
    """Four rooms: pick the blue pyramid (it becomes a green ball), put it by the yellow hex."""

    name = "xland_hard"
    description = (
        "XLand-MiniGrid 13x13 four rooms: pick up the blue pyramid (becomes a green ball), "
        "place it next to the yellow hex; 400 steps"
    )
    grid_type = "R4"
    size = 13
    episode_length = 400
    ppo_presets = {"cpu": XLAND_CPU, "paper": xland_paper(13)}
    # cpu preset: 18 programs of 1M steps x 2 seeds (what it takes and finds: docs/results.md);
    # quick: 4 programs of 300k steps x 1 seed, where the sparse baseline learns nothing (README)
    budgets = {"paper": paper_budget(3_000_000, 5_000_000, 0.01), "cpu": cpu_budget(1_000_000, 5, 3, 0.01),
               "quick": Budget(full_steps=300_000, iterations=1, candidates=2, seeds=1)}
    reward_ast_bin_width = 60  # its reference reward has 956 nodes: bin 15 (see XLandMedium)
    goal = TileNearGoal(tile_a=_tile(Tiles.BALL, Colors.GREEN), tile_b=_tile(Tiles.HEX, Colors.YELLOW))
    rules = (
        AgentHoldRule(tile=_tile(Tiles.PYRAMID, Colors.BLUE), prod_tile=_tile(Tiles.BALL, Colors.GREEN)),
        TileNearRule(
            tile_a=_tile(Tiles.BALL, Colors.PURPLE),
            tile_b=_tile(Tiles.SQUARE, Colors.ORANGE),
            prod_tile=_tile(Tiles.STAR, Colors.GREY),
        ),
    )
    init_tiles = (
        (Tiles.PYRAMID, Colors.BLUE),
        (Tiles.HEX, Colors.YELLOW),
        (Tiles.BALL, Colors.PURPLE),
        (Tiles.SQUARE, Colors.ORANGE),
    )
    expert_pick, expert_near = (Tiles.PYRAMID, Colors.BLUE), (Tiles.HEX, Colors.YELLOW)
    expert_product = (Tiles.BALL, Colors.GREEN)
    goal_desc = (
        "**Goal:** place a GREEN BALL (tile 3, colour 2) next to the YELLOW HEX (tile 11, colour 5).\n"
        "There is no green ball at the start: picking up the BLUE PYRAMID (tile 5, colour 3)\n"
        "turns it into a green ball in the pocket. Carry it to the hex and PUTDOWN onto an empty\n"
        "floor cell adjacent to the hex; success fires on that PUTDOWN. Closed doors (tile 9)\n"
        "between the rooms open with TOGGLE."
    )
    rules_desc = (
        "\n### Rules\n"
        "- Holding the blue pyramid (after PICKUP) turns it into a green ball.\n"
        "- Distractor: putting the purple ball next to the orange square (or the square next to\n"
        "  the ball) replaces them with a grey star. It does not help with the goal.\n"
    )
