"""Good programs: the reference interfaces, the modes, and what compile_interface returns."""

from __future__ import annotations

import json
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from limen_envs import interfaces
from program_corpus import GOOD, HEAD, OBS, REW

import limen_jax
import limen_jax.program as program
from limen_jax.program import CheckReport, Limits, ProgramError, check_source, compile_interface, sample_for
from limen_jax.task import Task, Transition

EXPECTED_OBS_DIM = {"xland_easy": 30, "xland_medium": 32, "xland_hard": 35}


@pytest.mark.parametrize("task_name", sorted(EXPECTED_OBS_DIM))
def test_reference_interface_is_accepted(task_name: str, easy_task: Task, easy_sample: Transition) -> None:
    # xland_easy reuses the session's task; the others pay for their own sample here.
    task = easy_task if task_name == "xland_easy" else limen_jax.make(task_name)
    report = check_source(interfaces.path(task_name).read_text(), task, name=task_name)
    assert report.ok, report.error and report.error.feedback()
    assert report.obs_dim == EXPECTED_OBS_DIM[task_name]
    assert report.reward_ast_size is not None and report.reward_ast_size > 20
    iface = report.interface
    assert iface is not None and iface.name == task_name and iface.source.startswith('"""Reference')
    assert iface.descriptors == (report.obs_dim, report.reward_ast_size)
    # The goal bonus (10) is paid exactly on the task's own success transitions.
    s = sample_for(task)
    reward = np.asarray(jax.jit(jax.vmap(iface.reward))(s.sim, s.action, s.next_sim))
    success = np.asarray(jax.jit(jax.vmap(task.sparse_reward))(s.sim, s.action, s.next_sim)) == 1.0
    np.testing.assert_array_equal(reward > 5.0, success)


def test_check_of_a_good_program_is_fast(easy_task: Task, easy_sample: Transition) -> None:
    report = check_source(interfaces.path("xland_easy").read_text(), easy_task)  # the cached sample
    assert report.ok and report.seconds < 20.0


def test_easy_reference_reward_pays_ten_on_the_goal_transition(easy_task: Task, easy_sample: Transition) -> None:
    iface = compile_interface(interfaces.path("xland_easy").read_text(), easy_task, sample=easy_sample)
    s = easy_sample
    reward = np.asarray(jax.jit(jax.vmap(iface.reward))(s.sim, s.action, s.next_sim))
    goal = np.asarray(jax.jit(jax.vmap(easy_task.sparse_reward))(s.sim, s.action, s.next_sim)) == 1.0
    assert goal.any() and not goal.all()  # the sampler keeps some goal transitions
    # The goal bonus is 10; potential-based shaping (|Φ| <= 1.5) and the step cost add little.
    assert np.all(reward[goal] > 10.0 - 2.0) and np.all(reward[~goal] < 2.0)
    obs = jax.jit(jax.vmap(iface.observe))(s.sim)
    assert obs.shape == (len(s.action), 30) and obs.dtype == jnp.float32
    one = jax.tree.map(lambda x: x[3], s)
    np.testing.assert_allclose(iface.observe(one.sim), obs[3], rtol=1e-6)  # eager == jit(vmap)


def test_returned_functions_never_emit_nonfinite(easy_task: Task, easy_sample: Transition) -> None:
    """Finite on the sample, infinite on a state outside it: the wrapper replaces inf and NaN."""
    source = (
        HEAD
        + (
            "def get_observation(state):\n"
            "    return jnp.stack([1.0 / (state.step_num - 1000.0), jnp.log(1000.0 - state.step_num)])\n\n"
        )
        + REW
    )
    iface = compile_interface(source, easy_task, sample=easy_sample)
    far = jax.tree.map(lambda x: x[0], easy_sample.sim).replace(step_num=jnp.asarray(1000, jnp.int32))
    out = np.asarray(jax.jit(iface.observe)(far))
    assert np.isfinite(out).all() and out[0] == 1e6 and out[1] == -1e6


def test_obs_only_mode(easy_task: Task, easy_sample: Transition) -> None:
    broken_reward = "def compute_reward(state, action, next_state):\n    return jnp.float32(0.0)\n"
    report = check_source(HEAD + OBS + broken_reward, easy_task, "obs_only", sample=easy_sample)
    assert report.ok, report.error
    assert report.obs_dim == 2 and report.reward_ast_size == 0
    iface = report.interface
    assert iface is not None and iface.reward_ast_size == 0
    s = easy_sample
    sparse = jax.vmap(easy_task.sparse_reward)(s.sim, s.action, s.next_sim)
    np.testing.assert_array_equal(jax.vmap(iface.reward)(s.sim, s.action, s.next_sim), sparse)
    # Only get_observation is required.
    assert check_source(HEAD + OBS, easy_task, "obs_only", sample=easy_sample).ok


def test_reward_only_mode(easy_task: Task, easy_sample: Transition) -> None:
    report = check_source(HEAD + REW, easy_task, "reward_only", sample=easy_sample)
    assert report.ok, report.error
    iface = report.interface
    assert iface is not None
    default_dim = limen_jax.default_interface(easy_task).obs_dim
    assert iface.obs_dim == report.obs_dim == default_dim
    assert iface.reward_ast_size == report.reward_ast_size and report.reward_ast_size > 0
    bad_obs_ignored = HEAD + "def get_observation(state):\n    return state.grid\n\n" + REW
    assert check_source(bad_obs_ignored, easy_task, "reward_only", sample=easy_sample).ok


def test_compile_interface_raises_and_check_source_reports(easy_task: Task, easy_sample: Transition) -> None:
    bad = GOOD.replace("return state.agent.position.astype(jnp.float32)", "return state.agent.position")
    with pytest.raises(ProgramError) as info:
        compile_interface(bad, easy_task, sample=easy_sample)
    assert info.value.stage == "dtype"
    report = check_source(bad, easy_task, sample=easy_sample)
    assert isinstance(report, CheckReport) and not report.ok and report.error is not None
    summary = json.loads(json.dumps(report.to_dict()))
    assert summary["ok"] is False and summary["error"]["stage"] == "dtype"
    assert summary["reward_ast_size"] == report.reward_ast_size > 0
    with pytest.raises(ValueError, match="mode"):
        compile_interface(GOOD, easy_task, "sparse")


def test_an_llm_reply_is_accepted_as_is(easy_task: Task, easy_sample: Transition) -> None:
    reply = "Here is an interface.\n\n```python\n" + GOOD + "```\n\nIt observes the agent's position."
    iface = compile_interface(reply, easy_task, name="reply", sample=easy_sample)
    assert iface.source == GOOD.strip("\n") + "\n" and iface.name == "reply"


def test_checks_off_the_main_thread(easy_task: Task, easy_sample: Transition) -> None:
    """Worker threads get the settrace deadline: an endless trace is still stopped."""
    endless = HEAD + "def get_observation(state):\n    while True:\n        pass\n\n" + REW
    reports: list[CheckReport] = []
    limits = Limits(trace_seconds=1.0)

    def worker() -> None:
        reports.append(check_source(endless, easy_task, sample=easy_sample, limits=limits))
        reports.append(check_source(GOOD, easy_task, sample=easy_sample))

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    thread.join(120.0)
    assert not thread.is_alive()
    assert reports[0].error is not None and reports[0].error.stage == "timeout"
    assert reports[1].ok


def test_sampler_handles_zero_size_state_leaves() -> None:
    """MJX data carries empty arrays (no contacts); flattening the rollout must keep them."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "rl"))
    from toy_tasks import Corridor

    class WithEmpty(Corridor):
        def reset(self, key):
            state = super().reset(key)
            return state.replace(sim={"inner": state.sim, "contacts": jnp.zeros((0, 3))})

        def step(self, state, action):
            nxt = super().step(state.replace(sim=state.sim["inner"]), action)
            return nxt.replace(sim={"inner": nxt.sim, "contacts": state.sim["contacts"]})

    sample = WithEmpty().sample_transitions(jax.random.key(0), 8, horizon=4)
    assert sample.sim["contacts"].shape == (8, 0, 3) and sample.action.shape[0] == 8


def test_evolved_style_programs_pass(easy_task: Task, easy_sample: Transition) -> None:
    """Ordinary Python of evolved interfaces (`features.extend([...])`) is never refused."""
    from evolved_style import PROGRAMS

    results = program.compile_many(list(PROGRAMS.values()), easy_task, names=list(PROGRAMS), sample=easy_sample)
    for name, result in zip(PROGRAMS, results):
        assert not isinstance(result, ProgramError), f"{name}: {result.feedback()}"
    assert [r.obs_dim for r in results] == [18, 19]  # type: ignore[union-attr]
