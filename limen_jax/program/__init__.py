"""Interface programs: from untrusted source text (an LLM reply or a .py file) to a checked Interface.

A program defines ``get_observation(state) -> float32[D]`` (1 <= D <= 512) and
``compute_reward(state, action, next_state) -> float32[]`` over the task's simulator
state; ``compute_reward`` may instead return a dict of 1-8 named float32[] terms, whose
sum is the reward (the Interface's ``reward_terms`` and ``terms``).
Every checked Interface carries its ``fingerprint`` (fingerprint.py): what φ and R
return on the check sample, quantised and hashed, so that a program repeated under
other names, comments or statement order is recognised before it trains
(:func:`~limen_jax.program.fingerprint.similarity` measures near repeats).
:func:`compile_interface` hands the text to a sandboxed worker process (pool.py,
isolation.py), which extracts the code, vets it (AST policy), runs it in a restricted
namespace, traces each function once, exports it with ``jax.export`` and checks the
exported artifact on real transitions, with time and size limits. Only data comes back:
a JSON verdict and serialised StableHLO, which the engine wraps as an Interface; no line
of the program's Python runs in the engine. Any failure is a :class:`ProgramError` whose
``stage`` says where and whose ``message`` says what to change::

    from limen_jax.program import compile_interface, check_source, ProgramError

    iface = compile_interface(llm_reply, task)          # raises ProgramError
    report = check_source(llm_reply, task)              # never raises for bad programs
    if not report.ok:
        prompt += report.error.feedback()
    results = compile_many(replies, task)               # K workers in parallel

Modes: "full" needs both functions; "obs_only" needs ``get_observation`` (the reward is
the task's sparse reward; a ``compute_reward`` in the program is ignored);
"reward_only" needs ``compute_reward`` (the observation is the task default).
A worker that cannot start raises :class:`SandboxError` (an engine fault, not the program's).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from limen_jax.interface import MAX_REWARD_TERMS, Interface, default_interface, mix
from limen_jax.program import artifact
from limen_jax.program.checks import TERM_NAME, Limits, check_sample, sample_for
from limen_jax.program.errors import STAGES, ProgramError
from limen_jax.program.extract import extract_code
from limen_jax.program.fingerprint import Fingerprint, similarity
from limen_jax.program.pool import SandboxError, Verdict, check_many
from limen_jax.task import Task, Transition

__all__ = [
    "MODES",
    "STAGES",
    "CheckReport",
    "Fingerprint",
    "Limits",
    "ProgramError",
    "SandboxError",
    "check_sample",
    "check_source",
    "compile_interface",
    "compile_many",
    "extract_code",
    "interface_from_artifacts",
    "sample_for",
    "similarity",
]

MODES = ("full", "obs_only", "reward_only")


def default_workers() -> int:
    """Workers checking side by side: one per CPU core, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


def compile_many(
    sources: Sequence[str],
    task: Task,
    mode: str = "full",
    names: Sequence[str] | None = None,
    *,
    sample: Transition | None = None,
    limits: Limits | None = None,
    workers: int | None = None,
) -> list[Interface | ProgramError]:
    """Check ``sources`` in parallel sandboxed workers; an Interface or a ProgramError each.

    names: labels for the interfaces (default "candidate-i"). workers: processes side by
    side (default :func:`default_workers`). Raises SandboxError when the sandbox fails.
    """
    return [result for result, _ in _compile(sources, task, mode, names, sample, limits, workers)]


def _compile(
    sources: Sequence[str],
    task: Task,
    mode: str,
    names: Sequence[str] | None,
    sample: Transition | None,
    limits: Limits | None,
    workers: int | None,
) -> list[tuple[Interface | ProgramError, int | None]]:
    """Each program's result and its reward AST size as the worker measured it (None if unparsable)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    limits = limits or Limits()
    names = list(names) if names is not None else [f"candidate-{i}" for i in range(len(sources))]
    if len(names) != len(sources):
        raise ValueError("one name per source")
    if sample is None:
        sample = check_sample(task, limits)
    verdicts = check_many([(s, mode) for s in sources], task, sample, limits, workers or default_workers())
    out: list[tuple[Interface | ProgramError, int | None]] = []
    for verdict, name in zip(verdicts, names):
        if isinstance(verdict, ProgramError):
            out.append((verdict, None))
            continue
        size = verdict.reply.get("reward_ast_size")
        size = size if isinstance(size, int) else None
        if not verdict.reply.get("ok"):
            out.append((_error(verdict.reply), size))
            continue
        try:
            out.append((_interface(verdict, task, mode, name, sample), size))
        except ProgramError as err:
            out.append((err, size))
    return out


def compile_interface(
    source: str,
    task: Task,
    mode: str = "full",
    name: str = "candidate",
    *,
    sample: Transition | None = None,
    limits: Limits | None = None,
) -> Interface:
    """Check the program in ``source`` in a sandboxed worker; return its Interface.

    source: an LLM reply (fenced or bare code) or the text of a .py file.
    task: the task whose simulator state the program reads.
    mode: "full", "obs_only" or "reward_only" (see the module docstring).
    sample: transitions to check on (default :func:`check_sample`: random rollouts,
        short and full-length, cached per task class and parameters).

    The returned ``observe(sim) -> float32[obs_dim]`` and ``reward(sim, action, next_sim)
    -> float32[]`` call the exported artifact: pure, jit- and vmap-able, and they do not
    raise for states of the task; NaN becomes 0 and +-inf becomes +-1e6 on states
    outside the sample. Raises ProgramError (stage in :data:`STAGES`) when the program is
    rejected, SandboxError when the sandbox itself fails.
    """
    (result,) = compile_many([source], task, mode, [name], sample=sample, limits=limits, workers=1)
    if isinstance(result, ProgramError):
        raise result
    return result


def interface_from_artifacts(
    task: Task,
    sample: Transition,
    *,
    obs: bytes | None,
    reward: bytes | None,
    obs_dim: int | None,
    reward_ast_size: int,
    source: str,
    name: str,
    mode: str = "full",
    reward_terms: Sequence[str] = (),
    fingerprint: Fingerprint | None = None,
) -> Interface:
    """An Interface from stored artifacts (e.g. a run directory or a cluster worker).

    sample: any batch of the task's transitions (only its structure is used).
    reward_terms: the term names of a dict reward (sorted, as the checker reports them in
    ``Interface.reward_terms``); its artifact returns float32[b, len(reward_terms)].
    fingerprint: the program's behaviour as the checker measured it in this ``mode``
    (None when unknown).
    Raises ProgramError("compile") when an artifact is malformed or does not fit the task.
    """
    reward_terms = tuple(reward_terms)
    if len(reward_terms) > MAX_REWARD_TERMS or list(reward_terms) != sorted(set(reward_terms)) or not all(
        isinstance(t, str) and TERM_NAME.fullmatch(t) for t in reward_terms
    ):
        raise ProgramError("compile", "the reward's term names are malformed.")
    sim_specs = artifact.leaf_specs(sample.sim)
    reward_specs = artifact.leaf_specs((sample.sim, sample.action, sample.next_sim))
    base = default_interface(task) if mode != "full" else None
    if obs is not None and obs_dim is not None:
        observe = artifact.unbatched(artifact.batched_call(artifact.load(obs, sim_specs, (obs_dim,))))
    elif base is not None:
        observe, obs_dim = base.observe, base.obs_dim
    else:
        raise ProgramError("compile", "the observation artifact is missing.")
    terms_fn = None
    if reward is not None and reward_terms:
        exported = artifact.load(reward, reward_specs, (len(reward_terms),))
        terms_fn = artifact.unbatched(artifact.batched_call(exported))
        reward_fn = _summed(terms_fn)
    elif reward is not None:
        reward_fn = artifact.unbatched(artifact.batched_call(artifact.load(reward, reward_specs, ())))
    elif base is not None:
        reward_fn = base.reward
    else:
        raise ProgramError("compile", "the reward artifact is missing.")
    candidate = Interface(
        observe=observe,
        reward=reward_fn,
        obs_dim=int(obs_dim),
        reward_ast_size=reward_ast_size,
        source=source,
        name=name,
        obs_artifact=obs or b"",
        reward_artifact=reward or b"",
        reward_terms=reward_terms if terms_fn is not None else (),
        terms=terms_fn,
    )
    return dataclasses.replace(mix(task, candidate, mode), fingerprint=fingerprint)


def _summed(terms: Callable[..., Any]) -> Callable[..., Any]:
    """The reward of a dict program: the sum of its (guarded) terms."""

    def reward(*args: Any) -> Any:
        return terms(*args).sum()

    return reward


def _interface(verdict: Verdict, task: Task, mode: str, name: str, sample: Transition) -> Interface:
    reply = verdict.reply
    obs_dim = reply.get("obs_dim")
    code = reply.get("code")
    size = reply.get("reward_ast_size")
    terms = reply.get("reward_terms", [])
    malformed = ProgramError("exec", "the checker's worker returned a malformed answer for this program.")
    if (
        not isinstance(code, str)
        or not isinstance(size, int)
        or not (obs_dim is None or isinstance(obs_dim, int))
        or not isinstance(terms, list)
    ):
        raise malformed
    try:
        fingerprint = Fingerprint.from_json(reply.get("fingerprint"))
    except ValueError:
        raise malformed from None
    if fingerprint.mode != mode:
        raise malformed
    return interface_from_artifacts(
        task,
        sample,
        obs=verdict.artifacts.get("obs"),
        reward=verdict.artifacts.get("reward"),
        obs_dim=obs_dim,
        reward_ast_size=size,
        source=code,
        name=name,
        mode=mode,
        reward_terms=terms if mode != "obs_only" else (),
        fingerprint=fingerprint,
    )


def _error(reply: dict[str, Any]) -> ProgramError:
    error = reply.get("error")
    if not isinstance(error, dict) or error.get("stage") not in STAGES:
        return ProgramError("exec", "the checker's worker returned a malformed answer for this program.")
    return ProgramError(error["stage"], str(error.get("message", "")), str(error.get("trace", "")))


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
    SandboxError (an engine fault) still propagates.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    start = time.perf_counter()
    name = kwargs.pop("name", "candidate")
    ((result, size),) = _compile(
        [source], task, mode, [name], kwargs.pop("sample", None), kwargs.pop("limits", None), 1
    )
    if kwargs:
        raise TypeError(f"unexpected arguments {sorted(kwargs)}")
    if isinstance(result, ProgramError):
        return CheckReport(False, None, result, None, size, time.perf_counter() - start)
    return CheckReport(True, result, None, result.obs_dim, result.reward_ast_size, time.perf_counter() - start)
