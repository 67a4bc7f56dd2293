"""The work budget: element operations counted on jaxprs, relative to the task's own step."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from limen_envs import interfaces
from program_corpus import HEAD, REW

import limen_jax as lj
from limen_jax.program import Limits, ProgramError, check_source
from limen_jax.program.cost import _walk, check_total, step_work, work_budget
from limen_jax.program.sandbox import exec_program, program_function
from limen_jax.task import Task, Transition

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evolve"))
from toy_task import ToyCorridor  # noqa: E402


def work(fn, *args) -> float:  # type: ignore[no-untyped-def]
    return _walk(jax.make_jaxpr(fn)(*args).jaxpr, 1, "f", 2**30)


def test_work_of_tiny_jaxprs_is_exact() -> None:
    x = jnp.zeros(3, jnp.float32)
    assert work(lambda x: x * x + x, x) == 12  # mul, add: 6 elements in each
    assert work(lambda a, b: a @ b, jnp.zeros((2, 3)), jnp.zeros((3, 4))) == 2 * 4 * 3
    # the scan itself (4) + 5 trips of a mul reading 8 elements
    assert work(lambda x: jax.lax.scan(lambda c, _: (c * c, None), x, None, length=5)[0], jnp.zeros(4)) == 44
    # 75 outputs, each over 2 input features x a 3x3 window
    conv = work(lambda i, k: jax.lax.conv_general_dilated(i, k, (1, 1), "SAME"),
                jnp.zeros((1, 2, 5, 5)), jnp.zeros((3, 2, 3, 3)))  # fmt: skip
    assert conv == 75 * 18


def test_step_work_counts_the_tasks_step_once_per_task() -> None:
    # add 2, sub 2, clip 3 + its body 6, eq 2, add 2, or 2 (ToyCorridor.step)
    assert step_work(ToyCorridor()) == 19
    assert step_work(ToyCorridor()) == 19  # cached


def test_budget_is_relative_within_floor_and_ceiling() -> None:
    assert work_budget(1e4, 100, 1e6, 1e8) == 1e6  # tiny step: the floor
    assert work_budget(1e5, 100, 1e6, 1e8) == 1e7
    assert work_budget(1e7, 100, 1e6, 1e8) == 1e8  # the ceiling
    assert work_budget(0.0, 100, 1e6, 1e8) == 1e8  # unknown step


def test_the_message_states_the_cost_in_env_steps() -> None:
    check_total(1e6, 1e4, 1e6)  # at the budget: accepted
    with pytest.raises(ProgramError) as err:
        check_total(3e6, 1e4, 1e6)
    assert err.value.stage == "allocation"
    assert "about 300 x the work of one environment step (limit 100 x) per transition" in err.value.message
    assert "/" not in err.value.message.split("transition")[0]  # no host paths


def test_a_program_a_few_times_over_the_budget_is_refused(easy_task: Task, easy_sample: Transition) -> None:
    limits = Limits()
    step = step_work(easy_task)
    budget = work_budget(step, limits.max_work_vs_step, limits.min_work_elements, limits.max_work_elements)
    # ~3x the budget: a static loop of a mul reading 2000 elements a trip
    trips = int(3 * budget / 2000)
    body = (
        "def get_observation(state):\n"
        "    v = jnp.ones(1000) * state.agent.position[0]\n"
        f"    v = jax.lax.fori_loop(0, {trips}, lambda i, c: c * c, v)\n"
        "    return jnp.stack([v.mean(), state.agent.position[1].astype(jnp.float32)])\n\n"
    )
    report = check_source(HEAD + body + REW, easy_task, sample=easy_sample)
    assert not report.ok and report.error is not None and report.error.stage == "allocation"
    limit_x = round(budget / step)
    assert f"x the work of one environment step (limit {limit_x:,} x)" in report.error.message
    told = float(report.error.message.split("about ")[1].split(" x")[0].replace(",", ""))
    assert 2.5 * limit_x < told < 3.5 * limit_x


def _reference_work(name: str) -> tuple[float, float]:
    task = lj.make(name)
    ns = exec_program(interfaces.path(name).read_text())  # trusted, bundled code
    obs = program_function(ns, "get_observation", 1, "state")
    rew = program_function(ns, "compute_reward", 3, "state, action, next_state")
    sim = jax.eval_shape(task.reset, jax.random.key(0)).sim
    action = jax.eval_shape(task.action_space.sample, jax.random.key(0))
    return work(obs, sim) + work(rew, sim, action, sim), step_work(task)


@pytest.mark.parametrize(
    "name",
    ["xland_easy", "xland_medium", "xland_hard",
     pytest.param("go1_push", marks=pytest.mark.slow), pytest.param("panda_track", marks=pytest.mark.slow),
     pytest.param("ant", marks=pytest.mark.slow)],
)  # fmt: skip
def test_reference_interfaces_fit_the_default_budget_with_margin(name: str) -> None:
    limits = Limits()
    total, step = _reference_work(name)
    budget = work_budget(step, limits.max_work_vs_step, limits.min_work_elements, limits.max_work_elements)
    assert 0 < total * 4 < budget


def test_the_budget_and_sample_limits_come_from_the_config_file() -> None:
    from limen_jax.config import EvolveConfig

    cfg = EvolveConfig.from_dict({"checker": {"max_work_vs_step": 50.0, "min_work_elements": 1000,
                                              "scripted_sample_size": 0}})  # fmt: skip
    limits = Limits(**cfg.checker)
    assert (limits.max_work_vs_step, limits.min_work_elements, limits.scripted_sample_size) == (50.0, 1000, 0)
    with pytest.raises(ValueError, match="max_work_vs_stp"):
        EvolveConfig.from_dict({"checker": {"max_work_vs_stp": 50.0}})
