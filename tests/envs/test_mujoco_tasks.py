"""MuJoCo tasks (go1_push, panda_track, Brax classics): offline loading, jit/vmap rollouts,
success on constructed states, parameter perturbations, LLM context, reference interfaces.

MJX compiles are slow on a CPU, so each task compiles one batched rollout (2 envs,
a few steps) in a module fixture that every test of that task reuses; the other checks
run eagerly or trace without compiling.
"""

from __future__ import annotations

import socket
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mujoco_extra import require_mujoco

require_mujoco()

from limen_envs import interfaces  # noqa: E402
from limen_envs.mujoco_common import menagerie_path  # noqa: E402
from mujoco_rollout import N_ENVS, N_STEPS, Rollout  # noqa: E402

import limen_jax as lj  # noqa: E402
from limen_jax.adapters.brax_env import BraxEnvTask  # noqa: E402
from limen_jax.task import TaskState  # noqa: E402

BRAX_TASKS = ["ant", "humanoid", "hopper", "walker2d", "halfcheetah"]


def _row(tree, i: int):
    return jax.tree.map(lambda x: x[i], tree)


def _set_info(states: TaskState, **values) -> TaskState:
    """Batched states with some info entries replaced (dtypes kept, so no recompile)."""
    info = dict(states.sim.info)
    for k, v in values.items():
        info[k] = jnp.asarray(v, info[k].dtype).reshape(info[k].shape)
    return states.replace(sim=states.sim.replace(info=info))


def _avals(tree):
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    return [(jax.tree_util.keystr(k), v.shape, v.dtype, v.weak_type) for k, v in leaves]


# --- loading ------------------------------------------------------------------------------


def test_mujoco_tasks_load_offline(monkeypatch):
    """Building every task touches no network and no git (Playground would clone the menagerie)."""

    def refuse(*args, **kwargs):
        raise AssertionError("network or subprocess use while loading a task")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    for name in ["go1_push", "panda_track", *BRAX_TASKS]:
        task = lj.make(name)
        assert task.name == name and task.episode_length in (500, 1000)
    from mujoco_playground._src import mjx_env

    assert str(mjx_env.MENAGERIE_PATH) == str(menagerie_path())
    assert not mjx_env.EXTERNAL_DEPS_PATH.exists()


@pytest.mark.parametrize("name", ["go1_push", "panda_track", *BRAX_TASKS])
def test_step_keeps_the_state_types(name):
    """reset and step give identical pytrees (shapes, dtypes, weak types): scan carries and
    auto-reset selects need it, and a mismatch recompiles every jitted rollout."""
    task = lj.make(name)
    first = jax.eval_shape(task.reset, jax.random.key(0))
    nxt = jax.eval_shape(task.step, first, jnp.zeros(task.action_space.shape))
    assert jax.tree.structure(first) == jax.tree.structure(nxt)
    assert _avals(first) == _avals(nxt)
    obs = jax.eval_shape(task.default_observation, first.sim)
    rew = jax.eval_shape(task.sparse_reward, first.sim, jnp.zeros(task.action_space.shape), nxt.sim)
    assert obs.ndim == 1 and obs.dtype == jnp.float32 and rew.shape == () and rew.dtype == jnp.float32


# --- go1_push -----------------------------------------------------------------------------

GO1_INFO = {
    "gyro": (3,), "gravity": (3,), "local_linvel": (3,), "upvector": (3,), "pos_xy": (2,),
    "height": (), "heading": (), "push_force": (3,), "last_act": (12,), "step_count": (),
    "cum_pos_error": (), "push_count": (), "rng": None,
}  # fmt: skip


def test_go1_state_layout_and_rollout(go1):
    states, seen = go1.run(jax.random.key(1))
    sim = states.sim
    assert sim.data.qpos.shape == (N_ENVS, 19) and sim.data.qvel.shape == (N_ENVS, 18)
    assert sim.data.actuator_force.shape == (N_ENVS, 12) and sim.data.ctrl.shape == (N_ENVS, 12)
    assert set(sim.info) == set(GO1_INFO)
    for key, shape in GO1_INFO.items():
        if shape is not None:
            assert sim.info[key].shape == (N_ENVS, *shape), key
    assert sim.info["step_count"].tolist() == [N_STEPS] * N_ENVS
    # standing at home: upright, level, near the origin, no push before step 75
    assert np.all(np.asarray(sim.info["upvector"][:, 2]) > 0.9)
    np.testing.assert_allclose(sim.info["gravity"], [[0, 0, -1]] * N_ENVS, atol=0.1)
    assert np.all(np.abs(np.asarray(sim.info["pos_xy"])) < 0.05)
    assert not np.asarray(states.done).any() and not np.asarray(states.success).any()
    np.testing.assert_array_equal(sim.info["push_force"], 0.0)
    obs = jax.vmap(go1.task.default_observation)(seen.sim)
    assert obs.shape == (N_ENVS * N_STEPS, 52) and np.isfinite(np.asarray(obs)).all()
    # Playground's State fields beside data and info, as the reference's contexts document
    np.testing.assert_array_equal(seen.next_sim.obs, jax.vmap(go1.task.default_observation)(seen.next_sim))
    assert sim.reward.dtype == jnp.float32 and sim.reward.tolist() == [0.0] * N_ENVS
    assert sim.done.tolist() == [0.0] * N_ENVS and set(sim.metrics) == {"pos_error", "upright"}
    np.testing.assert_allclose(sim.metrics["upright"], sim.info["upvector"][:, 2])


def test_go1_success_only_at_the_end_upright_and_near_origin(go1):
    # env 0: one step before the end, mean displacement 2 cm; env 1: the same but rolled
    # 90 degrees onto its side.
    states = _set_info(go1.states, step_count=[499, 499], cum_pos_error=[10.0, 10.0])
    qpos = states.sim.data.qpos.at[1, 3:7].set(jnp.array([np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0]))
    states = states.replace(sim=states.sim.replace(data=states.sim.data.replace(qpos=qpos)))
    nxt = go1.step(states, jnp.zeros((N_ENVS, 12)))
    assert nxt.sim.info["step_count"].tolist() == [500, 500]
    assert nxt.done.tolist() == [False, True]
    assert nxt.success.tolist() == [True, False]
    rewards = jax.vmap(go1.task.sparse_reward)(states.sim, jnp.zeros((N_ENVS, 12)), nxt.sim)
    assert rewards.tolist() == [1.0, 0.0]
    # too far on average (mean 0.12 m), or not yet at the end: no success
    far = go1.step(_set_info(states, cum_pos_error=[60.0, 60.0]), jnp.zeros((N_ENVS, 12)))
    early = go1.step(_set_info(states, step_count=[400, 400]), jnp.zeros((N_ENVS, 12)))
    assert far.success.tolist() == [False, False] and early.success.tolist() == [False, False]


def test_go1_push_schedule_and_force_parameter():
    base, strong = lj.make("go1_push"), lj.make("go1_push", push_force=2.0)
    frequent = base.with_params(push_interval=30)
    rng, zero = jax.random.key(3), jnp.zeros(3)
    force, applied, start = base.push(rng, jnp.asarray(75), zero)
    assert bool(start) and 150.0 <= float(jnp.linalg.norm(force[:2])) <= 400.0
    np.testing.assert_allclose(force[2], 0.1 * jnp.linalg.norm(force[:2]), rtol=1e-5)
    np.testing.assert_allclose(applied, force)
    # the same draw, twice the magnitude
    np.testing.assert_allclose(strong.push(rng, jnp.asarray(75), zero)[0], 2.0 * force, rtol=1e-5)
    # applied for steps 75..79, remembered but not applied afterwards
    for t, on in [(76, True), (79, True), (80, False), (149, False)]:
        kept, applied_t, start_t = base.push(rng, jnp.asarray(t), force)
        np.testing.assert_allclose(kept, force)
        assert not bool(start_t) and bool(jnp.any(applied_t != 0)) == on
    assert bool(frequent.push(rng, jnp.asarray(30), zero)[2]) and not bool(base.push(rng, jnp.asarray(30), zero)[2])
    assert "every 30 control steps" in frequent.context and "U(300, 800) N" in strong.context
    with pytest.raises(ValueError):
        lj.make("go1_push", push_strength=2.0)


def test_go1_context_names_every_field(go1):
    ctx = go1.task.context
    for key in GO1_INFO:
        assert f'state.info["{key}"]' in ctx, key
    for field in ("state.data.qpos", "state.data.qvel", "state.data.actuator_force"):
        assert field in ctx
    assert "0.10 m" in ctx and "500" in ctx and "upvector" in ctx
    for field in ("state.obs`: float32 (52,)", "state.reward`", "state.done`", 'state.metrics["pos_error"]'):
        assert field in ctx, field


# --- panda_track --------------------------------------------------------------------------

PANDA_INFO = {
    "target_pos": (3,), "target_vel": (3,), "gripper_pos": (3,), "gripper_target_dist": (),
    "traj_params": None, "prev_ctrl": (8,), "step_count": (), "cumulative_tracking_error": (),
    "tracking_steps": (), "rng": None,
}  # fmt: skip


def test_panda_state_layout_and_rollout(panda):
    states, seen = panda.run(jax.random.key(1))
    sim = states.sim
    assert sim.data.qpos.shape == (N_ENVS, 9) and sim.data.ctrl.shape == (N_ENVS, 8)
    assert set(sim.info) == set(PANDA_INFO)
    assert set(sim.info["traj_params"]) == {"freq_x", "freq_y", "freq_z", "phase_x", "phase_y"}
    for key, shape in PANDA_INFO.items():
        if shape is not None:
            assert sim.info[key].shape == (N_ENVS, *shape), key
    # the target follows the Lissajous curve and shows in the mocap body
    t = sim.info["step_count"] * 0.02
    tp = sim.info["traj_params"]
    x = 0.45 + 0.1 * jnp.sin(0.35 * tp["freq_x"] * t + tp["phase_x"])
    z = 0.18 + 0.07 * jnp.sin(0.35 * tp["freq_z"] * t)
    np.testing.assert_allclose(sim.info["target_pos"][:, 0], x, atol=1e-6)
    np.testing.assert_allclose(sim.info["target_pos"][:, 2], z, atol=1e-6)
    np.testing.assert_allclose(sim.data.mocap_pos[:, 0], sim.info["target_pos"], atol=1e-6)
    dist = jnp.linalg.norm(sim.info["target_pos"] - sim.info["gripper_pos"], axis=-1)
    np.testing.assert_allclose(sim.info["gripper_target_dist"], dist, rtol=1e-5)
    # episodes differ: frequencies are drawn per episode
    assert len(set(np.asarray(tp["freq_x"]).round(5).tolist())) == N_ENVS
    # controls move by at most 0.04 per step and stay within the actuator ranges
    step_change = np.abs(np.asarray(seen.next_sim.data.ctrl - seen.sim.data.ctrl))
    assert step_change.max() <= 0.04 + 1e-6
    np.testing.assert_allclose(seen.next_sim.info["prev_ctrl"], seen.sim.data.ctrl)
    assert jax.vmap(panda.task.default_observation)(sim).shape == (N_ENVS, 20)


def test_panda_success_from_the_mean_error(panda):
    near = _set_info(panda.states, step_count=[499, 499], cumulative_tracking_error=[0.0, 9.9])
    nxt = panda.step(near, jnp.zeros((N_ENVS, 8)))
    # env 0: mean error = (0 + this step's ~0.3 m) / 500 < 0.02; env 1: (9.9 + 0.3) / 500 > 0.02
    assert nxt.success.tolist() == [True, False] and not np.asarray(nxt.done).any()
    rewards = jax.vmap(panda.task.sparse_reward)(near.sim, jnp.zeros((N_ENVS, 8)), nxt.sim)
    assert rewards.tolist() == [1.0, 0.0]
    early = panda.step(_set_info(near, step_count=[10, 10]), jnp.zeros((N_ENVS, 8)))
    assert early.success.tolist() == [False, False]


def test_panda_speed_and_radius_parameters():
    base = lj.make("panda_track")
    fast, wide = base.with_params(traj_speed=0.7), base.with_params(radius=0.2)
    tp = {"freq_x": 2.0, "freq_y": 1.5, "freq_z": 1.0, "phase_x": 0.3, "phase_y": 1.1}
    centre = jnp.array([0.45, 0.0, 0.18])
    for t in (0.0, 0.7, 3.1):
        np.testing.assert_allclose(fast.target_pos(t, tp), base.target_pos(2 * t, tp), atol=1e-6)
        np.testing.assert_allclose(wide.target_pos(t, tp) - centre, 2 * (base.target_pos(t, tp) - centre), atol=1e-6)
        np.testing.assert_allclose(fast.target_vel(t, tp), 2 * base.target_vel(2 * t, tp), atol=1e-6)
    assert "0.2 * sin(0.35" in wide.context and "0.1 * sin(0.7" in fast.context


def test_panda_context_names_every_field(panda):
    ctx = panda.task.context
    for key in PANDA_INFO:
        assert f'state.info["{key}"]' in ctx, key
    for key in ("freq_x", "freq_y", "freq_z", "phase_x", "phase_y"):
        assert key in ctx
    assert "state.data.qpos" in ctx and "0.02 m" in ctx
    for field in ("state.obs`: float32 (20,)", "state.reward`", "state.done`", 'state.metrics["tracking_error"]'):
        assert field in ctx, field
    # the scene differs from the reference's (no cube): the LLM is told exactly how
    assert "qpos (16,)" in ctx and "`state.data.qpos` is (9,) here" in ctx


# --- Brax classics ------------------------------------------------------------------------


def test_ant_rollout_native_reward_and_success(ant):
    states, seen = ant.run(jax.random.key(1))
    ps = states.sim.pipeline_state
    assert ps.q.shape == (N_ENVS, 15) and ps.qd.shape == (N_ENVS, 14) and ps.x.pos.shape[-1] == 3
    assert states.sim.info["step_count"].tolist() == [N_STEPS] * N_ENVS
    native = jax.vmap(ant.task.native_reward)(seen.sim, seen.action, seen.next_sim)
    np.testing.assert_allclose(native, seen.next_sim.reward)
    # the engine's Brax adapter steps it: it sums the native reward; start_x lasts the episode
    assert isinstance(ant.task, BraxEnvTask)
    np.testing.assert_allclose(states.sim.info["episode_return"], native.reshape(N_STEPS, N_ENVS).sum(0), rtol=1e-5)
    np.testing.assert_array_equal(states.sim.info["start_x"], ant.states.sim.pipeline_state.x.pos[:, 0, 0])
    # brax's in-place metrics update must not leak into the pre-step state
    assert not np.allclose(seen.sim.metrics["x_position"], seen.next_sim.metrics["x_position"])
    obs = jax.vmap(ant.task.default_observation)(seen.sim)
    np.testing.assert_allclose(obs, seen.sim.obs)
    # success: survived 1000 steps and ran >= 1 m/s x 50 s = 50 m
    assert ant.task.success_distance == pytest.approx(50.0, rel=1e-5)
    end = _set_info(ant.states, step_count=[999, 999], start_x=[-60.0, -10.0])
    nxt = ant.step(end, jnp.zeros((N_ENVS, 8)))
    assert nxt.success.tolist() == [True, False]
    rewards = jax.vmap(ant.task.sparse_reward)(end.sim, jnp.zeros((N_ENVS, 8)), nxt.sim)
    assert rewards.tolist() == [1.0, 0.0]


@pytest.mark.parametrize("name", BRAX_TASKS)
def test_brax_context_and_success_threshold(name):
    task = lj.make(name)
    ctx = task.context
    for field in ("state.pipeline_state.q", "state.pipeline_state.x.pos", "state.obs", "state.metrics"):
        assert field in ctx
    for key in ("step_count", "episode_return", "start_x"):
        assert f'state.info["{key}"]' in ctx
    shapes = jax.eval_shape(task.reset, jax.random.key(0)).sim
    for metric in shapes.metrics:
        assert f"`{metric}`" in ctx
    velocity = task.params["success_velocity"]
    assert task.success_distance == pytest.approx(velocity * 1000 * task.dt, rel=1e-5)
    assert task.with_params(success_velocity=2 * velocity).success_distance == pytest.approx(2 * task.success_distance)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["humanoid", "hopper", "walker2d", "halfcheetah"])
def test_brax_rollout_jit_vmap(name):
    roll = Rollout(name)
    states, seen = roll.run(jax.random.key(1))
    assert states.sim.info["step_count"].tolist() == [N_STEPS] * N_ENVS
    assert np.isfinite(np.asarray(jax.vmap(roll.task.default_observation)(seen.sim))).all()


# --- reference interfaces -----------------------------------------------------------------


@pytest.mark.parametrize(("name", "obs_dim"), [("go1_push", 78), ("panda_track", 67), ("ant", 32)])
def test_reference_interfaces_compile(name, obs_dim, request):
    from limen_jax.program import compile_interface

    roll = request.getfixturevalue({"go1_push": "go1", "panda_track": "panda", "ant": "ant"}[name])
    _, sample = roll.run(jax.random.key(2), steps=4)
    iface = compile_interface(interfaces.path(name).read_text(), roll.task, name=name, sample=sample)
    assert iface.obs_dim == obs_dim
    obs = jax.vmap(iface.observe)(sample.sim)
    rewards = jax.vmap(iface.reward)(sample.sim, sample.action, sample.next_sim)
    assert obs.shape == (len(sample.action), obs_dim) and np.isfinite(np.asarray(obs)).all()
    assert np.isfinite(np.asarray(rewards)).all() and float(jnp.std(rewards)) > 0


@pytest.mark.slow
def test_batched_trainer_runs_on_go1_push(go1):
    from limen_jax.program import compile_interface
    from limen_jax.rl import PPOConfig, train_batch

    task = go1.task
    _, sample = go1.run(jax.random.key(2), steps=4)
    iface = compile_interface(interfaces.path("go1_push").read_text(), task, name="go1_push", sample=sample)
    config = PPOConfig.preset("go1_push", "cpu").replace(
        num_envs=4, rollout_len=4, minibatches=2, epochs=1, eval_episodes=2
    )
    result = train_batch(task, [iface, lj.default_interface(task)], seeds=1, total_steps=32, config=config)
    assert np.asarray(result.success).shape == (2, 1)
    assert np.all((np.asarray(result.success) >= 0) & (np.asarray(result.success) <= 1))
