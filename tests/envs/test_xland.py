"""XLand tasks: jit/vmap, and success fires exactly when the goal is met."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from xminigrid.core.constants import TILES_REGISTRY, Colors, Tiles

import limen_jax as lj

FLOOR = TILES_REGISTRY[Tiles.FLOOR, Colors.BLACK]
EMPTY_POCKET = TILES_REGISTRY[Tiles.EMPTY, Colors.EMPTY]
PICKUP, PUTDOWN, FORWARD = 3, 4, 0


def tile(t, c):
    return TILES_REGISTRY[t, c]


def staged(task, pocket, front, around_front=()):
    """A reset state with the agent at (3, 3) facing right (front cell (3, 4)), the room
    emptied of objects, ``front`` placed in front, and ``around_front`` tiles placed at
    the given (y, x) cells."""
    state = task.reset(jax.random.key(0))
    sim = state.sim
    grid = sim.grid
    interior = (grid[..., 0] != Tiles.WALL) & (grid[..., 0] != Tiles.DOOR_CLOSED)
    grid = jnp.where(interior[..., None], FLOOR, grid)
    grid = grid.at[3, 4].set(front)
    for (y, x), t in around_front:
        grid = grid.at[y, x].set(t)
    agent = sim.agent.replace(position=jnp.array([3, 3]), direction=jnp.asarray(1), pocket=pocket)
    return state.replace(sim=sim.replace(grid=grid, agent=agent))


@pytest.mark.parametrize("name", ["xland_easy", "xland_medium", "xland_hard"])
def test_reset_step_jit_vmap(name):
    task = lj.make(name)
    keys = jax.random.split(jax.random.key(1), 4)
    states = jax.jit(jax.vmap(task.reset))(keys)
    size = task.size
    assert states.sim.grid.shape == (4, size, size, 2)
    assert states.sim.step_num.tolist() == [0, 0, 0, 0]
    step = jax.jit(jax.vmap(task.step))
    for _ in range(3):
        states = step(states, jnp.array([0, 1, 2, 5], jnp.int32))
    assert states.sim.step_num.tolist() == [3, 3, 3, 3]
    # positions are randomised per episode
    assert len({tuple(p) for p in np.asarray(states.sim.agent.position)}) > 1
    obs = jax.vmap(task.default_observation)(states.sim)
    assert obs.shape == (4, 1254) and obs.dtype == jnp.float32
    # one-hot blocks: each of the 49 view cells has exactly one tile and one colour
    assert np.allclose(np.asarray(obs[:, : 49 * 13]).reshape(4, 49, 13).sum(-1), 1.0)
    assert task.episode_length == {"xland_easy": 80, "xland_medium": 80, "xland_hard": 400}[name]


def test_easy_success_only_on_blue_pyramid_pickup():
    task = lj.make("xland_easy")
    blue_pyr, red_ball = tile(Tiles.PYRAMID, Colors.BLUE), tile(Tiles.BALL, Colors.RED)
    s = staged(task, EMPTY_POCKET, blue_pyr)
    nxt = jax.jit(task.step)(s, jnp.int32(PICKUP))
    assert bool(nxt.done) and bool(nxt.success)
    assert float(task.sparse_reward(s.sim, jnp.int32(PICKUP), nxt.sim)) == 1.0
    for action in (FORWARD, 1, 2, PUTDOWN, 5):
        other = task.step(s, jnp.int32(action))
        assert not bool(other.done) and not bool(other.success)
        assert float(task.sparse_reward(s.sim, jnp.int32(action), other.sim)) == 0.0
    wrong = staged(task, EMPTY_POCKET, red_ball)
    after = task.step(wrong, jnp.int32(PICKUP))
    assert np.array_equal(np.asarray(after.sim.agent.pocket), np.asarray(red_ball))
    assert not bool(after.done) and not bool(after.success)


def test_medium_success_only_when_placed_next_to_square():
    task = lj.make("xland_medium")
    pyr, square = tile(Tiles.PYRAMID, Colors.YELLOW), tile(Tiles.SQUARE, Colors.GREEN)
    near = staged(task, pyr, FLOOR, [((2, 4), square)])  # square above the front cell
    nxt = task.step(near, jnp.int32(PUTDOWN))
    assert bool(nxt.done) and bool(nxt.success)
    assert float(task.sparse_reward(near.sim, jnp.int32(PUTDOWN), nxt.sim)) == 1.0
    far = staged(task, pyr, FLOOR, [((6, 6), square)])
    nxt = task.step(far, jnp.int32(PUTDOWN))
    assert not bool(nxt.done) and not bool(nxt.success)
    assert int(nxt.sim.grid[3, 4, 0]) == Tiles.PYRAMID  # the putdown itself happened


def test_hard_pyramid_becomes_ball_then_ball_near_hex_succeeds():
    task = lj.make("xland_hard")
    blue_pyr, green_ball = tile(Tiles.PYRAMID, Colors.BLUE), tile(Tiles.BALL, Colors.GREEN)
    hexagon = tile(Tiles.HEX, Colors.YELLOW)
    s = staged(task, EMPTY_POCKET, blue_pyr)
    held = task.step(s, jnp.int32(PICKUP))
    assert np.array_equal(np.asarray(held.sim.agent.pocket), np.asarray(green_ball))
    assert not bool(held.done)
    place = staged(task, green_ball, FLOOR, [((3, 5), hexagon)])
    nxt = task.step(place, jnp.int32(PUTDOWN))
    assert bool(nxt.done) and bool(nxt.success)
    # the distractor rule fires but is not success
    purple, orange = tile(Tiles.BALL, Colors.PURPLE), tile(Tiles.SQUARE, Colors.ORANGE)
    d = staged(task, purple, FLOOR, [((3, 5), orange)])
    nxt = task.step(d, jnp.int32(PUTDOWN))
    assert not bool(nxt.done)
    assert int(nxt.sim.grid[3, 5, 0]) == Tiles.STAR


def test_success_is_sticky_and_sampler_covers_time():
    task = lj.make("xland_easy")
    tr = jax.jit(lambda k: task.sample_transitions(k, 128))(jax.random.key(3))
    steps = np.asarray(tr.sim.step_num)
    assert steps.min() <= 5 and steps.max() >= 40
    assert np.all(np.asarray(tr.next_sim.step_num) == steps + 1)
    # every transition is a real step: the agent's pose changes only as actions allow
    moved = np.any(np.asarray(tr.sim.agent.position) != np.asarray(tr.next_sim.agent.position), axis=1)
    assert not np.any(moved & (np.asarray(tr.action) != FORWARD))
    # random play succeeds now and then; the sampler keeps those goal transitions
    goal = jax.vmap(task.sparse_reward)(tr.sim, tr.action, tr.next_sim)
    assert 1 <= int(goal.sum()) <= 32


def test_registry_and_perturbation_errors():
    assert {"xland_easy", "xland_medium", "xland_hard"} <= set(lj.registered_tasks())
    with pytest.raises(KeyError, match="unknown task"):
        lj.make("nope")
    with pytest.raises(ValueError, match="unknown task parameters"):
        lj.make("xland_easy", push_force=2.0)
    task = lj.make("limen_envs.xland:XLandMedium")
    assert task.name == "xland_medium"
    assert "state.agent.pocket" in task.context and "80 steps" in task.context


def test_making_a_task_skips_the_minigrid_environments():
    # every sandboxed check worker makes the task: xminigrid.envs' __init__ would import
    # and eagerly build all MiniGrid environments (~0.4 s each time) for nothing
    code = (
        "import sys, limen_jax as lj\n"
        "t = lj.make('xland_easy'); t.reset(__import__('jax').random.key(0))\n"
        "print(sorted(m for m in sys.modules if m.startswith('xminigrid.envs')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "['xminigrid.envs.xland']"


def test_xland_builds_on_the_environment_xminigrid_makes():
    """The class loaded from xminigrid's module file is the one ``xminigrid.make`` builds
    for the tasks' grids, with the public ``reset(params, key)``; a task's reset is that
    reset's state, the same draws as the environment xminigrid makes with its ruleset."""
    import inspect

    import xminigrid
    from limen_envs.xland import xland_environment

    environment = xland_environment()
    assert list(inspect.signature(environment.reset).parameters) == ["self", "params", "key"]
    for name, env_id in (("xland_easy", "XLand-MiniGrid-R1-9x9"), ("xland_hard", "XLand-MiniGrid-R4-13x13")):
        task = lj.make(name)
        env, params = xminigrid.make(env_id, ruleset=task.ruleset, view_size=7, max_steps=task.episode_length)
        assert type(env) is environment
        for seed in (0, 5):
            ours = task.reset(jax.random.key(seed)).sim
            theirs = env.reset(params, jax.random.key(seed)).state
            assert ours.grid.shape == (task.size, task.size, 2) and ours.step_num.dtype == jnp.int32
            for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
                if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
                    a, b = jax.random.key_data(a), jax.random.key_data(b)
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
