"""The bad-program corpus: each program is rejected at the right stage, and the process survives."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from program_corpus import BAD, GOOD

from limen_jax.program import STAGES, Limits, ProgramError, check_source, compile_interface, compile_many, extract_code
from limen_jax.program.policy import check_policy
from limen_jax.task import Task, Transition

CHEAP_STAGES = ("extract", "syntax", "policy")
# Policy violations that only running the program reveals.
FOUND_AT_RUN_TIME = {"while_via_fori", "sum_of_lists"}


def test_corpus_is_large_and_covers_every_stage() -> None:
    assert len(BAD) >= 40
    assert len({name for name, _, _ in BAD}) == len(BAD), "duplicate ids"
    assert {stage for _, stage, _ in BAD} == set(STAGES) - {"compile"}


def test_the_template_program_is_accepted(easy_task: Task, easy_sample: Transition) -> None:
    iface = compile_interface(GOOD, easy_task, sample=easy_sample)
    assert iface.obs_dim == 2


@pytest.mark.parametrize(
    ("source", "stage"),
    [pytest.param(s, st, id=n) for n, st, s in BAD if st in CHEAP_STAGES and n not in FOUND_AT_RUN_TIME],
)
def test_policy_rejects_without_running_anything(source: str, stage: str) -> None:
    """Pure AST: extraction, parsing and the policy catch these before any exec or JAX."""
    with pytest.raises(ProgramError) as info:
        check_policy(extract_code(source))
    assert info.value.stage == stage, info.value.feedback()


TIMEOUT_LIMITS = Limits(exec_seconds=1.0, trace_seconds=1.0)
# Programs the pure-AST test above already covers go through a worker only a few at a
# time (each worker costs a Python and JAX start-up): enough to show the end-to-end path.
_AST_ONLY = [n for n, st, _ in BAD if st in CHEAP_STAGES and n not in FOUND_AT_RUN_TIME]
THROUGH_WORKERS = [(n, st, s) for n, st, s in BAD if n not in _AST_ONLY[3:] or n == "import_numpy"]


@pytest.fixture(scope="module")
def rejected(easy_task: Task, easy_sample: Transition, quick_limits: Limits) -> dict[str, Any]:
    """The BAD programs checked in two parallel batches (the timeouts with 1 s limits)."""
    out: dict[str, Any] = {}
    for is_timeout, limits in ((False, quick_limits), (True, TIMEOUT_LIMITS)):
        names = [n for n, st, _ in THROUGH_WORKERS if (st == "timeout") == is_timeout]
        sources = [s for n, st, s in THROUGH_WORKERS if (st == "timeout") == is_timeout]
        start = time.monotonic()
        out.update(zip(names, compile_many(sources, easy_task, names=names, sample=easy_sample, limits=limits)))
        out["seconds_timeouts" if is_timeout else "seconds_rest"] = time.monotonic() - start
    return out


@pytest.mark.parametrize(("name", "stage"), [pytest.param(n, st, id=n) for n, st, _ in THROUGH_WORKERS])
def test_bad_program_is_rejected_at_its_stage(name: str, stage: str, rejected: dict[str, Any]) -> None:
    err = rejected[name]
    assert isinstance(err, ProgramError), f"{name} was accepted"
    assert err.stage == stage, err.feedback()
    assert err.message and len(err.trace.splitlines()) <= 15
    assert "/site-packages/" not in err.feedback() and os.getcwd() not in err.feedback()


def test_timeouts_are_quick(rejected: dict[str, Any]) -> None:
    # Three 1 s timeouts, two workers: worker start-up (seconds on a loaded CPU) plus the limits.
    assert rejected["seconds_timeouts"] < 40.0, rejected["seconds_timeouts"]


def test_messages_say_what_to_change(rejected: dict[str, Any]) -> None:
    def error(name: str) -> ProgramError:
        err = rejected[name]
        assert isinstance(err, ProgramError)
        return err

    control_flow = error("python_if_on_tracer")
    assert "jnp.where" in control_flow.message
    assert "line 5" in control_flow.trace and "if state.step_num > 3" in control_flow.trace
    assert ".astype(jnp.float32)" in error("obs_int32").message
    assert "512" in error("obs_10000_features").message
    assert "r[0]" in error("reward_shape_1").message
    assert "(100000, 100000)" in error("huge_zeros").message and "line 5" in error("huge_zeros").message
    assert "jax.numpy" in error("import_numpy").message
    assert "constant" in error("reward_constant").stage
    assert "compute_reward" in error("missing_reward").message
    recursion = error("recursion")
    assert "repeated" in recursion.trace and len(recursion.trace.splitlines()) <= 15


def test_memory_bomb_in_module_body_is_stopped(easy_task: Task, easy_sample: Transition) -> None:
    source = GOOD + "\nX = [[j] * 100000 for i in range(10**6) for j in range(10**6)]\n"
    limits = Limits(exec_seconds=60.0, max_memory_mb=300)
    start = time.monotonic()
    report = check_source(source, easy_task, sample=easy_sample, limits=limits)
    assert report.error is not None and report.error.stage == "allocation", report.error
    assert time.monotonic() - start < 30.0
