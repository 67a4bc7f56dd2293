"""The family adapters on environments the suite does not bundle: ``playground:<EnvName>``
(a DM Control env, a locomotion env, a manipulation env) and ``brax:<env>`` (three envs).

On each: the context documents the state pytree, a hand-written interface passes the
checker, and ``evolve`` runs end to end with the offline mutator on the generated
catalog. MJX compiles are slow on a CPU, so CI runs one environment per family (and the
evolve run on one); the others are ``slow``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from mujoco_extra import TINY_EVOLVE, evolve_cli, require_mujoco

require_mujoco()

import limen_jax as lj  # noqa: E402
from limen_jax.adapters import brax_env, playground_env  # noqa: E402
from limen_jax.config import EvolveConfig  # noqa: E402
from limen_jax.llm.offline import render  # noqa: E402
from limen_jax.program import check_source  # noqa: E402
from limen_jax.rl import PPOConfig  # noqa: E402

_HEAD = "import jax\nimport jax.numpy as jnp\n\n\n"
_NATIVE_REWARD = """

def compute_reward(state, action, next_state):
    return jnp.asarray(next_state.reward - 0.01 * jnp.sum(action ** 2), jnp.float32)
"""
# (hand-written observation, its dimension) per environment; the reward adds a control
# cost to the native reward, except where a metric is used.
INTERFACES = {
    "playground:CartpoleBalance": (
        "def get_observation(state):\n    return jnp.concatenate([state.obs, state.data.qvel]).astype(jnp.float32)\n"
        "\n\ndef compute_reward(state, action, next_state):\n"
        '    return jnp.asarray(next_state.reward + 0.5 * next_state.metrics["reward/upright"], jnp.float32)\n', 7),
    "playground:Go1JoystickFlatTerrain": (
        'def get_observation(state):\n    return jnp.concatenate([state.info["command"], state.data.qpos[7:],'
        ' state.data.qvel[6:], state.info["last_act"]]).astype(jnp.float32)\n' + _NATIVE_REWARD, 39),
    "playground:PandaPickCube": (
        'def get_observation(state):\n    return jnp.concatenate([state.obs, state.info["target_pos"]])\n'
        + _NATIVE_REWARD, 69),
    "brax:inverted_pendulum": (
        "def get_observation(state):\n    return jnp.concatenate([state.pipeline_state.q, state.pipeline_state.qd])\n"
        + _NATIVE_REWARD, 4),
    "brax:reacher": ("def get_observation(state):\n    return state.obs\n" + _NATIVE_REWARD, 11),
    "brax:pusher": ("def get_observation(state):\n    return state.obs\n" + _NATIVE_REWARD, 23),
}  # fmt: skip
IN_CI = ("playground:CartpoleBalance", "brax:inverted_pendulum")
ALL = [n if n in IN_CI else pytest.param(n, marks=pytest.mark.slow) for n in INTERFACES]


@pytest.fixture(scope="module")
def cartpole():
    return lj.make("playground:CartpoleBalance")


def test_playground_context_documents_the_state_pytree(cartpole):
    ctx = cartpole.context
    assert cartpole.episode_length == 1000 and cartpole.action_space.dim == 1
    for line in ("- `state.obs`: float32 (5,)", "- `state.data.qpos`: float32 (2,)", "- `state.reward`: float32 ()",
                 "- `state.metrics['reward/upright']`: float32 ()", "- `state.info['step_count']`: int32 ()",
                 "- `state.info['rng']`: random key () (the environment's own; do not use)"):  # fmt: skip
        assert line in ctx, line
    assert "._impl" not in ctx  # private MJX fields are not documented
    assert "mean native reward per step, `info[\"episode_return\"] / 1000`, is at least 0.5" in ctx


def test_adapter_facts_come_from_the_adapter_task():
    assert PPOConfig.preset("playground:CartpoleBalance", "cpu").num_envs == 64
    assert PPOConfig.preset("brax:reacher", "paper").num_envs == 4096
    cpu = EvolveConfig.preset_for("brax:reacher", "cpu")
    assert (cpu.cascade.full_steps, cpu.search.iterations, cpu.search.candidates) == (25_600, 1, 2)
    assert playground_env.task_class("CartpoleBalance") is playground_env.task_class("CartpoleBalance")
    with pytest.raises(KeyError, match="unknown task 'brax:nope'; brax environments: ant, "):
        lj.make("brax:nope")


class _Sim(dict):
    """A stand-in state: ``succeeded`` reads only ``info``, ``done`` and what a predicate reads."""

    __getattr__ = dict.__getitem__


def _sim(step_count, episode_return, done=0.0, obs=(0.0,)):
    info = {"step_count": jnp.int32(step_count), "episode_return": jnp.float32(episode_return)}
    return _Sim(info=info, done=jnp.float32(done), obs=jnp.asarray(obs, jnp.float32))


def test_default_and_supplied_success_rules(cartpole):
    # default: the horizon reached without terminating and mean native reward >= 0.5
    assert bool(cartpole.succeeded(_sim(1000, 600.0)))
    assert not bool(cartpole.succeeded(_sim(1000, 400.0)))
    assert not bool(cartpole.succeeded(_sim(999, 999.0)))  # not the last state yet
    assert not bool(cartpole.succeeded(_sim(1000, 900.0, done=1.0)))  # terminated
    strict = playground_env.task_class("CartpoleBalance", name="cartpole_strict", success_reward=0.95)()
    assert not bool(strict.succeeded(_sim(1000, 900.0)))
    # a supplied predicate, evaluated on the last state (horizon or termination)
    custom = playground_env.task_class("CartpoleBalance", name="cartpole_custom", horizon=50,
                                       success=lambda s: s.obs[0] > 0.5, success_doc="cart right of 0.5")  # fmt: skip
    task = custom()
    assert task.episode_length == 50 and "cart right of 0.5" in task.context
    assert bool(task.succeeded(_sim(50, 0.0, obs=(0.9,)))) and bool(task.succeeded(_sim(7, 0.0, 1.0, (0.9,))))
    assert not bool(task.succeeded(_sim(49, 0.0, obs=(0.9,)))) and not bool(task.succeeded(_sim(50, 0.0, obs=(0.1,))))
    assert "t_success" not in {t.name for t in task.offline_catalog().terms}  # a predicate is not code


def test_brax_adapter_steps_and_counts(tmp_path):
    task = brax_env.task_class("inverted_pendulum", name="pendulum_short", horizon=5)()
    state = jax.jit(task.reset)(jax.random.key(0))
    step = jax.jit(task.step)
    for _ in range(5):
        state = step(state, jnp.zeros(1, jnp.float32))
    info = state.sim.info
    assert int(info["step_count"]) == 5
    # the pendulum pays 1 per step while upright; held still from the start it stays up
    assert float(info["episode_return"]) == pytest.approx(5.0) and bool(state.success)


@pytest.mark.parametrize("name", ALL)
def test_a_hand_written_interface_passes_the_checker(name):
    source, obs_dim = INTERFACES[name]
    report = check_source(_HEAD + source, lj.make(name), "full", name="hand_written")
    assert report.ok, report.error
    assert report.obs_dim == obs_dim


@pytest.mark.parametrize("name", ALL)
def test_every_generated_catalog_block_passes_the_checker(name):
    """All features and all terms of the generated catalog in one program."""
    task = lj.make(name)
    catalog = task.offline_catalog()
    genome = {"features": [f.name for f in catalog.features], "terms": {t.name: t.weight for t in catalog.terms}}
    report = check_source(render(catalog, genome), task, "full", name="whole_catalog")
    assert report.ok, report.error
    assert {"native", "time"} <= set(genome["features"]) and {"native", "alive", "control"} <= set(genome["terms"])


@pytest.mark.parametrize("name", [n if n == IN_CI[0] else pytest.param(n, marks=pytest.mark.slow) for n in INTERFACES])
def test_offline_evolve_end_to_end(name, tmp_path):
    """The generated catalog feeds the offline mutator; a first generation is checked,
    trained and scored with nothing rejected (mutation itself: tests/evolve)."""
    events, _, run_dir = evolve_cli(name, tmp_path, TINY_EVOLVE)
    assert len([e for e in events if e["event"] == "score"]) == 2
    assert not [e for e in events if e["event"] == "reject"]
    assert "f_native" in (run_dir / "best_interface.py").read_text()
