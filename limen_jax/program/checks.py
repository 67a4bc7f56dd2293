"""Checks of a program's functions on real transitions, under jit and vmap, with limits.

For each function (``get_observation(state)``, ``compute_reward(state, action,
next_state)``), in order, each failure a :class:`ProgramError`:

1. trace one transition with ``jax.make_jaxpr`` under a deadline (stage "trace" or
   "timeout");
2. walk the jaxpr before anything is compiled: no intermediate with more than
   ``max_intermediate_elements`` elements, no ``while`` loops, and φ + R together at
   most ``max_work_vs_step`` times the work of one environment step (within
   [``min_work_elements``, ``max_work_elements``]) per transition ("allocation", "policy");
3. output shape and dtype: observation float32[D], 1 <= D <= ``max_obs_dim``; reward
   float32[], or a dict of 1 to :data:`~limen_jax.interface.MAX_REWARD_TERMS` named
   float32[] terms whose names are identifiers of at most 32 characters ("shape", "dtype");
4. the traced jaxprs are exported with ``jax.export`` (artifact.py); the serialised
   artifact, not the Python, is deserialised, compiled and run over the sample in
   threads with their own time limits ("compile", "timeout"), and its XLA cost
   analysis is held to a budget per transition ("allocation");
5. values: finite, each term of a dict reward named in the message ("nonfinite"); the
   reward (the terms' sum) not constant over the sample ("constant").

The sample (:func:`check_sample`) holds transitions from short and full-length random
rollouts and from scripted ones (scripted.py), which reach states random play does not.

All of this runs inside a sandboxed worker process (worker.py), never in the engine.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from limen_jax.interface import MAX_REWARD_TERMS
from limen_jax.program.cost import check_cost, check_total, work_budget
from limen_jax.program.deadline import Deadline, MemoryLimit, deadline
from limen_jax.program.errors import ProgramError, exception_summary, program_trace
from limen_jax.program.scripted import scripted_transitions
from limen_jax.task import Task, Transition
from limen_jax.xla_cache import enable_compilation_cache
from limen_jax.xla_options import run_once


@dataclasses.dataclass(frozen=True)
class Limits:
    """Limits applied when checking a program.

    max_obs_dim: most observation features.
    exec_seconds: running the module body.
    trace_seconds: tracing one function (per-state, then batched under jit/vmap).
    compile_seconds: the XLA compile of the batched functions.
    run_seconds: running the compiled functions on the sample.
    max_intermediate_elements: largest array (elements) any operation may create, per state.
    max_work_elements: element operations per state summed over the program (loops
        multiplied out; a matmul counts out x contraction): the absolute ceiling.
    max_work_vs_step: φ + R may cost this many times the work of one ``task.step``
        (counted the same way) per transition; 0 for the ceiling alone.
    min_work_elements: the floor of that relative budget (a task with a tiny step must
        not refuse ordinary programs).
    max_memory_mb: how much the host process may grow while the module body runs or a
        function is traced (Python-level memory bombs; checked every 0.1 s, Linux).
    sample_size: transitions (s, a, s') sampled from random rollouts to check on.
    sample_seed: seed of that sample (fixed, so checks are reproducible).
    long_sample_size: extra transitions from full-length episodes (late states of long
        random rollouts), 0 for none.
    scripted_sample_size: extra transitions from scripted rollouts of the same length
        (environment i follows ``task.scripted_action`` policy i), 0 for none.
    max_flops_per_transition: XLA's cost analysis of the compiled artifact (obs and
        reward together), per transition.
    worker_memory_mb: address-space limit of the sandboxed worker (JAX included).
    startup_seconds: allowance for starting a worker (imports, the task's structure),
        added to the other limits to give its wall-clock deadline.
    """

    max_obs_dim: int = 512
    exec_seconds: float = 5.0
    trace_seconds: float = 20.0
    compile_seconds: float = 60.0
    run_seconds: float = 30.0
    max_intermediate_elements: int = 2**24
    max_work_elements: int = 2**28
    max_work_vs_step: float = 100.0
    min_work_elements: int = 2**22
    max_memory_mb: int = 2048
    sample_size: int = 64
    sample_seed: int = 0
    long_sample_size: int = 32
    scripted_sample_size: int = 16
    max_flops_per_transition: float = 2e8
    worker_memory_mb: int = 8192
    startup_seconds: float = 60.0

    @property
    def max_memory_bytes(self) -> int:
        return self.max_memory_mb << 20

    @property
    def worker_seconds(self) -> float:
        """Wall-clock deadline of one worker: every stage's limit plus start-up."""
        return (
            self.startup_seconds + self.exec_seconds + 3 * self.trace_seconds + self.compile_seconds + self.run_seconds
        )


# Sampling compiles the task's rollout (tens of seconds on a CPU), so samples are kept per
# (task class, task parameters, size, seed): a task is a pure function of those.
_SAMPLES: dict[tuple[Any, ...], Transition] = {}
_SAMPLES_LOCK = threading.Lock()


def sample_for(task: Task, size: int = 64, seed: int = 0, horizon: int | None = None) -> Transition:
    """``size`` real transitions of ``task`` (random-action rollouts of ``horizon`` steps), cached."""
    key = (type(task), tuple(sorted(task.params.items())), size, seed, horizon)
    with _SAMPLES_LOCK:
        if key not in _SAMPLES:
            enable_compilation_cache()  # an MJX task's sampler compiles for a minute on a CPU
            roll = jax.jit(functools.partial(task.sample_transitions, num=size, horizon=horizon))
            _SAMPLES[key] = _run_sampler(roll, jax.random.key(seed))
        return _SAMPLES[key]


# Late states: long random rollouts reach states (far positions, high step counts, piled
# up objects) that the first 64 steps do not.
_LONG_HORIZON_CAP = 512


def scripted_for(task: Task, size: int, seed: int, horizon: int) -> Transition:
    """``size`` transitions from scripted rollouts of ``horizon`` steps (scripted.py), cached."""
    key = ("scripted", type(task), tuple(sorted(task.params.items())), size, seed, horizon)
    with _SAMPLES_LOCK:
        if key not in _SAMPLES:
            enable_compilation_cache()
            roll = jax.jit(functools.partial(scripted_transitions, task, num=size, horizon=horizon))
            _SAMPLES[key] = _run_sampler(roll, jax.random.key(seed))
        return _SAMPLES[key]


def _run_sampler(roll: Any, key: jax.Array) -> Transition:
    """A sampler run: it runs once, so LLVM's optimisations would not pay for their compile
    (xla_options.py)."""
    return jax.block_until_ready(roll.lower(key).compile(run_once())(key))


def check_sample(task: Task, limits: Limits) -> Transition:
    """The transitions programs are checked on: ``limits.sample_size`` from random rollouts
    of up to 64 steps, plus ``limits.long_sample_size`` from full-length episodes (capped
    at 512 steps) when the episode is longer than 64 steps, plus
    ``limits.scripted_sample_size`` from scripted rollouts of full-length episodes (capped
    likewise), in that order. Built once per task and machine: kept on disk
    (:mod:`limen_jax.program.sample_cache`) and in this process."""
    from limen_jax.program import sample_cache

    memo = ("check", type(task), tuple(sorted(task.params.items())), limits.sample_size, limits.long_sample_size,
            limits.scripted_sample_size, limits.sample_seed)
    with _CHECK_LOCK:  # taken before _SAMPLES_LOCK, never inside it
        if memo not in _SAMPLES:
            key = sample_cache.cache_key(task, limits)
            parts = _sample_parts(task, limits)
            # the leaves a stored file must hold: the samplers traced, not run
            sample = sample_cache.load(key, lambda: jax.eval_shape(
                lambda k: _joined([sampler(k) for sampler, _ in parts]), jax.random.key(0)))
            if sample is None:
                sample = _joined([build() for _, build in parts])
                sample_cache.save(key, sample)
            _SAMPLES[memo] = sample
        return _SAMPLES[memo]


_CHECK_LOCK = threading.Lock()
Part = tuple[Callable[[jax.Array], Transition], Callable[[], Transition]]


def _sample_parts(task: Task, limits: Limits) -> list[Part]:
    """Each part of the check sample: its sampler of a key (for its shapes) and how it is
    built (cached in this process)."""
    horizon = min(task.episode_length, _LONG_HORIZON_CAP)
    n, seed = limits.sample_size, limits.sample_seed
    parts: list[Part] = [(lambda k: task.sample_transitions(k, num=n), lambda: sample_for(task, n, seed))]
    if limits.long_sample_size > 0 and horizon > 64:
        m = limits.long_sample_size
        parts.append((lambda k: task.sample_transitions(k, num=m, horizon=horizon),
                      lambda: sample_for(task, m, seed + 1, horizon)))
    if limits.scripted_sample_size > 0:
        q, h = limits.scripted_sample_size, max(horizon, 2)
        parts.append((lambda k: scripted_transitions(task, k, num=q, horizon=h),
                      lambda: scripted_for(task, q, seed + 2, h)))
    return parts


def _joined(parts: list[Transition]) -> Transition:
    return parts[0] if len(parts) == 1 else jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)


@dataclasses.dataclass(frozen=True)
class Traced:
    """The program's functions, each traced exactly once on one transition.

    observe / reward: closed jaxprs over the flattened arguments (``(sim,)`` and
    ``(sim, action, next_sim)``), None when not part of the mode. obs_dim: the
    observation length (None when only the reward was traced). Everything after this
    point (export, checks, training) works from these jaxprs: the program's Python never
    runs again, so what is checked is what trains. reward_terms: the names of a dict
    reward's terms, sorted, the order of the reward jaxpr's outputs (jax flattens a dict
    by sorted key); () for a scalar reward.
    """

    observe: Any
    reward: Any
    obs_dim: int | None
    reward_terms: tuple[str, ...] = ()


def trace_functions(
    source: str,
    sample: Transition,
    limits: Limits,
    observe: Callable[[Any], Any] | None = None,
    reward: Callable[[Any, Any, Any], Any] | None = None,
    *,
    step_work: float = 0.0,
) -> Traced:
    """Checks 1-3 on whichever of ``observe`` / ``reward`` is given; raise ProgramError.

    step_work: element operations of one environment step (cost.step_work), the unit of
    the relative work budget; 0 when unknown (the absolute ceiling alone applies).
    """
    # one transition's shapes: tracing needs no values (slicing each leaf eagerly compiled
    # a program per leaf, a noticeable share of every check)
    one = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), sample)
    obs_jaxpr = reward_jaxpr = obs_dim = None
    terms: tuple[str, ...] = ()
    work = 0.0
    if observe is not None:
        obs_jaxpr, out, cost = _trace_checked(source, "get_observation", observe, (one.sim,), limits)
        obs_dim = _check_observation_aval(out, limits)
        work += cost
    if reward is not None:
        reward_jaxpr, out, cost = _trace_checked(
            source, "compute_reward", reward, (one.sim, one.action, one.next_sim), limits
        )
        terms = _check_reward_terms(out) if isinstance(out, dict) else _check_reward_aval(out)
        work += cost
    budget = work_budget(step_work, limits.max_work_vs_step, limits.min_work_elements, limits.max_work_elements)
    check_total(work, step_work, budget)
    return Traced(obs_jaxpr, reward_jaxpr, obs_dim, terms)


def check_values(values: dict[str, np.ndarray], reward_terms: tuple[str, ...] = ()) -> None:
    """Check 5 on the artifact's outputs over the sample ("obs" [N, D], "reward" [N], or
    [N, M] for the M ``reward_terms``)."""
    if "obs" in values:
        _check_finite(values["obs"], "get_observation", "sampled states")
        _check_range(values["obs"], "get_observation")
    if "reward" in values:
        rewards = values["reward"]
        if reward_terms:
            for j, term in enumerate(reward_terms):
                _check_finite(rewards[:, j], f"compute_reward` term `{term}", "sampled transitions")
                _check_range(rewards[:, j], f"compute_reward` term `{term}")
            rewards = rewards.sum(axis=1)
        _check_finite(rewards, "compute_reward", "sampled transitions")
        _check_range(rewards, "compute_reward")
        _check_not_constant(rewards)


# --- 1. tracing -----------------------------------------------------------------------


def _trace_checked(
    source: str, name: str, fn: Callable[..., Any], args: tuple[Any, ...], limits: Limits
) -> tuple[Any, Any, float]:
    """Trace ``fn(*args)`` to a jaxpr within the deadline; check its cost; return it, its
    output aval (for ``compute_reward`` possibly a dict of them) and its work (element
    operations per state)."""
    try:
        with deadline(limits.trace_seconds, limits.max_memory_bytes):
            closed, out = jax.make_jaxpr(fn, return_shape=True)(*args)
    except BaseException as exc:  # every failure is the program's, mapped to a stage
        raise trace_error(exc, source, name, limits.trace_seconds) from None
    work = check_cost(closed, name, limits.max_intermediate_elements, limits.max_work_elements)
    if not isinstance(out, jax.ShapeDtypeStruct) and not (name == "compute_reward" and isinstance(out, dict)):
        kind = "None (missing `return`?)" if out is None else f"a {type(out).__name__}"
        fix = "jnp.concatenate([...])" if name == "get_observation" else "a single jnp scalar or a dict of them"
        raise ProgramError("shape", f"`{name}` must return one jnp array, but returned {kind}; combine with {fix}.")
    return closed, out, work


_CONTROL_FLOW_HINT = (
    "Python control flow (`if`, `while`, `and`/`or`, `int()`, `float()`, `bool()`) cannot "
    "depend on traced array values; use jnp.where(cond, a, b), jax.lax.select or "
    "jax.lax.cond, and jnp.logical_and/or."
)


def trace_error(exc: BaseException, source: str, name: str, seconds: float) -> ProgramError:
    """Map an exception raised while tracing ``name`` to a ProgramError (re-raises interrupts)."""
    if isinstance(exc, Deadline):
        return ProgramError(
            "timeout",
            f"tracing `{name}` took longer than {seconds:g} s: an endless Python loop, or a Python "
            "loop over many items (vectorise it with jnp operations).",
            program_trace(exc, source, summary=f"(stopped here after {seconds:g} s)"),
        )
    if isinstance(exc, ProgramError):
        return ProgramError(exc.stage, exc.message, exc.trace or program_trace(exc, source, summary=""))
    if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
        raise exc
    trace = program_trace(exc, source)
    if isinstance(exc, MemoryError | MemoryLimit):
        return ProgramError("allocation", f"`{name}` used too much memory while being traced.", trace)
    errors = jax.errors
    if isinstance(
        exc,
        errors.TracerBoolConversionError
        | errors.ConcretizationTypeError
        | errors.TracerIntegerConversionError
        | errors.TracerArrayConversionError,
    ):
        return ProgramError("trace", f"`{name}` failed under jit: {_CONTROL_FLOW_HINT}", trace)
    hint = ""
    if isinstance(exc, NameError):
        hint = (
            " Only jax, jnp (jax.numpy), math, your own definitions and basic builtins (abs, min, "
            "max, range, len, sum, zip, enumerate, float, int, ...) are available."
        )
    elif isinstance(exc, RecursionError):
        hint = " Recursion too deep: avoid recursive calls."
    elif isinstance(exc, AttributeError):
        hint = " Check the state's field names in the task description."
    return ProgramError("trace", f"`{name}` raised {exception_summary(exc).rstrip('.')}.{hint}", trace)


# --- 3. output shapes -----------------------------------------------------------------


def _check_observation_aval(out: jax.ShapeDtypeStruct, limits: Limits) -> int:
    shape = tuple(out.shape)
    if len(shape) == 0:
        raise ProgramError(
            "shape", "`get_observation` returned a scalar; return a 1-D array of features, e.g. jnp.array([x])."
        )
    if len(shape) != 1:
        raise ProgramError(
            "shape",
            f"`get_observation` returned shape {shape}; it must be 1-D (num_features,): flatten "
            "multi-dimensional parts with .reshape(-1) and join them with jnp.concatenate.",
        )
    dim = shape[0]
    if not 1 <= dim <= limits.max_obs_dim:
        raise ProgramError(
            "shape",
            f"`get_observation` returned {dim} features; it must return between 1 and "
            f"{limits.max_obs_dim}: keep the informative features (positions, relative offsets, "
            "a small local view) instead of the whole state.",
        )
    if out.dtype != jnp.float32:
        raise ProgramError(
            "dtype",
            f"`get_observation` returned dtype {out.dtype}; it must be float32: end with .astype(jnp.float32).",
        )
    return int(dim)


def _check_reward_aval(out: jax.ShapeDtypeStruct, what: str = "`compute_reward` returned") -> tuple[str, ...]:
    shape = tuple(out.shape)
    if shape != ():
        fix = "index it with r[0]" if math.prod(shape) == 1 else "reduce it with jnp.sum(...)"
        raise ProgramError("shape", f"{what} shape {shape}; it must be a scalar (shape ()): {fix}.")
    if out.dtype != jnp.float32:
        raise ProgramError(
            "dtype",
            f"{what} dtype {out.dtype}; it must be float32: wrap it as "
            "jnp.asarray(r, jnp.float32) or use .astype(jnp.float32).",
        )
    return ()


# Term names become curve names ("reward/<name>") and prompt text: short identifiers only.
TERM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")


def _check_reward_terms(out: dict[Any, Any]) -> tuple[str, ...]:
    """A dict reward: 1..MAX_REWARD_TERMS terms, identifier names, float32 scalars.
    Returns the names sorted (the order jax flattens a dict in)."""
    if type(out) is not dict:  # an OrderedDict flattens in insertion order, not sorted
        raise ProgramError("shape", f"`compute_reward` returned a {type(out).__name__}; return a plain dict of terms.")
    if not 1 <= len(out) <= MAX_REWARD_TERMS:
        raise ProgramError(
            "shape",
            f"`compute_reward` returned a dict of {len(out)} terms; return between 1 and "
            f"{MAX_REWARD_TERMS} named terms (merge small ones), or a single scalar.",
        )
    for name in out:
        if not isinstance(name, str) or not TERM_NAME.fullmatch(name):
            shown = ascii(name)[:40]  # untrusted text: escaped and cut
            raise ProgramError(
                "shape",
                f"`compute_reward` returned a term named {shown}; term names must be identifiers "
                "(letters, digits, _; not starting with a digit) of at most 32 characters.",
            )
    for name in sorted(out):
        value = out[name]
        if not isinstance(value, jax.ShapeDtypeStruct):
            raise ProgramError(
                "shape",
                f"`compute_reward` term `{name}` is a {type(value).__name__}; each term must be one jnp scalar.",
            )
        _check_reward_aval(value, f"`compute_reward` term `{name}` has")
    return tuple(sorted(out))


# --- 4. compile and run ---------------------------------------------------------------


def run_with_timeout(fn: Callable[[], Any], seconds: float, what: str) -> Any:
    """``fn()`` in a daemon thread; ProgramError "timeout" if it is not done in ``seconds``.

    XLA compiles and runs in C++, where no signal can interrupt it; a worker that times
    out is abandoned (it finishes in the background) and the host goes on.
    """
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            result["error"] = exc

    worker = threading.Thread(target=target, name=f"limen-{what}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise ProgramError("timeout", f"{what} took longer than {seconds:g} s; simplify the program.")
    if "error" in result:
        exc = result["error"]
        if isinstance(exc, ProgramError):
            raise exc
        raise ProgramError("compile", f"{what} failed: {exception_summary(exc)}")
    return result["value"]


# --- 5. values ------------------------------------------------------------------------


def _check_finite(values: np.ndarray, name: str, what: str) -> None:
    bad = ~np.isfinite(values)
    if not bad.any():
        return
    rows = bad.reshape(len(bad), -1).any(axis=1)
    detail = ""
    if values.ndim == 2:
        features = np.flatnonzero(bad.any(axis=0))[:8].tolist()
        detail = f" (feature indices {features})"
    kinds = " and ".join(k for k, m in (("NaN", np.isnan(values)), ("inf", np.isinf(values))) if m.any())
    raise ProgramError(
        "nonfinite",
        f"`{name}` returned {kinds} on {int(rows.sum())} of {len(rows)} {what}{detail}: guard "
        "divisions (x / jnp.maximum(d, 1e-6)), logs and square roots of values that can be 0 "
        "or negative (e.g. distances to objects that are absent).",
    )


# Larger values are clipped in training (artifact.POSINF): a program must not rely on them.
MAX_ABS_VALUE = 1e6


def _check_range(values: np.ndarray, name: str) -> None:
    biggest = float(np.abs(values).max()) if values.size else 0.0
    if biggest <= MAX_ABS_VALUE:
        return
    raise ProgramError(
        "nonfinite",
        f"`{name}` returned values as large as {biggest:.3g} on sampled states; keep every value "
        f"within +-{MAX_ABS_VALUE:g} (normalise features, scale rewards down).",
    )


def _check_not_constant(rewards: np.ndarray) -> None:
    if np.ptp(rewards) > 0:
        return
    raise ProgramError(
        "constant",
        f"`compute_reward` returned the same value ({float(rewards[0]):g}) on all {len(rewards)} "
        "sampled transitions (random-action rollouts): a reward that never varies gives no "
        "learning signal. Add dense terms that change from step to step, e.g. potential-based "
        "shaping on the distance to the next subgoal.",
    )
