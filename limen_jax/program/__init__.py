"""Interface programs: from untrusted source text (an LLM reply or a .py file) to a checked Interface.

A program defines ``get_observation(state) -> float32[D]`` (1 <= D <= 512) and
``compute_reward(state, action, next_state) -> float32[]`` over the task's simulator
state. :func:`compile_interface` extracts the code, vets it (AST policy), runs it in a
restricted namespace, and checks both functions under ``jit`` and ``vmap`` on real
transitions, with time and size limits; any failure is a :class:`ProgramError` whose
``stage`` says where and whose ``message`` says what to change::

    from limen_jax.program import compile_interface, check_source, ProgramError

    iface = compile_interface(llm_reply, task)          # raises ProgramError
    report = check_source(llm_reply, task)              # never raises for bad programs
    if not report.ok:
        prompt += report.error.feedback()

Modes: "full" needs both functions; "obs_only" needs ``get_observation`` (the reward is
the task's sparse reward; a ``compute_reward`` in the program is ignored);
"reward_only" needs ``compute_reward`` (the observation is the task default).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from limen_jax.interface import Interface, default_interface, mix
from limen_jax.program.checks import Limits, check_functions, sample_for
from limen_jax.program.descriptors import reward_ast_size
from limen_jax.program.errors import STAGES, ProgramError, exception_summary
from limen_jax.program.extract import extract_code
from limen_jax.program.policy import check_policy
from limen_jax.program.sandbox import exec_program, program_function
from limen_jax.task import Task, Transition

__all__ = [
    "MODES",
    "STAGES",
    "CheckReport",
    "Limits",
    "ProgramError",
    "check_source",
    "compile_interface",
    "extract_code",
    "sample_for",
]

MODES = ("full", "obs_only", "reward_only")
OBSERVATION = ("get_observation", 1, "state")
REWARD = ("compute_reward", 3, "state, action, next_state")
# Values a trained policy never sees: non-finite outputs on states outside the checked
# sample are replaced so that one bad state cannot turn a whole training run into NaN.
_POSINF = 1e6


def compile_interface(
    source: str,
    task: Task,
    mode: str = "full",
    name: str = "candidate",
    *,
    sample: Transition | None = None,
    limits: Limits | None = None,
) -> Interface:
    """Extract, vet, run and check the program in ``source``; return its Interface.

    source: an LLM reply (fenced or bare code) or the text of a .py file.
    task: the task whose simulator state the program reads.
    mode: "full", "obs_only" or "reward_only" (see the module docstring).
    sample: transitions to check on (default: ``limits.sample_size`` random-rollout
        transitions of ``task``, cached per task class and parameters).

    The returned ``observe(sim) -> float32[obs_dim]`` and ``reward(sim, action, next_sim)
    -> float32[]`` are pure, jit- and vmap-able, and do not raise for states of the task;
    NaN becomes 0 and +-inf becomes +-1e6 on states outside the sample.
    Raises ProgramError (stage in :data:`STAGES`) when the program is rejected.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    limits = limits or Limits()
    wants_obs, wants_reward = mode in ("full", "obs_only"), mode in ("full", "reward_only")
    required = [spec[0] for spec, wanted in ((OBSERVATION, wants_obs), (REWARD, wants_reward)) if wanted]
    code = extract_code(source, required)
    namespace = exec_program(code, limits.exec_seconds, limits.max_memory_bytes)
    user_obs = program_function(namespace, *OBSERVATION) if wants_obs else None
    user_reward = program_function(namespace, *REWARD) if wants_reward else None
    if sample is None:
        sample = sample_for(task, limits.sample_size, limits.sample_seed)
    checked = check_functions(code, sample, limits, observe=user_obs, reward=user_reward)

    size = reward_ast_size(check_policy(code)) if wants_reward else 0
    if mode == "full":
        assert user_obs is not None and user_reward is not None and checked.obs_dim is not None
        observe, reward = _safe_observe(user_obs, checked.obs_dim), _safe_reward(user_reward)
        return Interface(observe, reward, checked.obs_dim, size, code, name)
    # obs_only / reward_only: mix() takes the other half from the task default.
    base = default_interface(task)
    candidate = Interface(
        observe=_safe_observe(user_obs, checked.obs_dim) if user_obs and checked.obs_dim else base.observe,
        reward=_safe_reward(user_reward) if user_reward else base.reward,
        obs_dim=checked.obs_dim or base.obs_dim,
        reward_ast_size=size,
        source=code,
        name=name,
    )
    return mix(task, candidate, mode)


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """The verdict on one program.

    ok: trainable. interface: the compiled Interface when ok. error: the rejection
    otherwise. obs_dim / reward_ast_size: the descriptors, as ``interface.descriptors``
    when ok (so the task default's in the ablation modes: reward AST size 0 in
    "obs_only", the default observation's size in "reward_only"); when rejected, the
    reward AST size if the program parses, else None. seconds: wall-clock time.
    """

    ok: bool
    interface: Interface | None
    error: ProgramError | None
    obs_dim: int | None
    reward_ast_size: int | None
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the compiled functions)."""
        return {
            "ok": self.ok,
            "obs_dim": self.obs_dim,
            "reward_ast_size": self.reward_ast_size,
            "seconds": round(self.seconds, 3),
            "error": self.error.to_dict() if self.error else None,
        }


def check_source(source: str, task: Task, mode: str = "full", **kwargs: Any) -> CheckReport:
    """:func:`compile_interface` that reports instead of raising for rejected programs.

    kwargs: ``name``, ``sample``, ``limits`` as for :func:`compile_interface`.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    start = time.perf_counter()
    try:
        iface = compile_interface(source, task, mode, **kwargs)
    except ProgramError as err:
        return CheckReport(False, None, err, None, _reward_size_or_none(source, mode), time.perf_counter() - start)
    except Exception as exc:  # a checker bug must not take the search down with it
        bug = ProgramError(
            "compile",
            f"the checker failed unexpectedly on this program ({exception_summary(exc)}); "
            "simplify the program. (This is a limen_jax bug: please report it.)",
        )
        return CheckReport(False, None, bug, None, None, time.perf_counter() - start)
    return CheckReport(True, iface, None, iface.obs_dim, iface.reward_ast_size, time.perf_counter() - start)


def _reward_size_or_none(source: str, mode: str) -> int | None:
    if mode == "obs_only":
        return None
    try:
        return reward_ast_size(check_policy(extract_code(source, ["compute_reward"])))
    except ProgramError:
        return None


def _safe_observe(fn: Callable[[Any], Any], obs_dim: int) -> Callable[[Any], jax.Array]:
    """The program's observation, as float32[obs_dim] with non-finite values replaced."""

    def observe(sim: Any) -> jax.Array:
        out = jnp.asarray(fn(sim), jnp.float32).reshape(obs_dim)
        return jnp.nan_to_num(out, nan=0.0, posinf=_POSINF, neginf=-_POSINF)

    return observe


def _safe_reward(fn: Callable[[Any, Any, Any], Any]) -> Callable[[Any, jax.Array, Any], jax.Array]:
    """The program's reward, as float32[] with non-finite values replaced."""

    def reward(sim: Any, action: jax.Array, next_sim: Any) -> jax.Array:
        out = jnp.asarray(fn(sim, action, next_sim), jnp.float32).reshape(())
        return jnp.nan_to_num(out, nan=0.0, posinf=_POSINF, neginf=-_POSINF)

    return reward
