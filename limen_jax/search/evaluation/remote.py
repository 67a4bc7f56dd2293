"""A job as it travels to another process, and the worker that runs it there.

An :class:`~limen_jax.search.evaluation.jobs.EvalJob` holds live objects (a task, interfaces whose
functions call compiled programs). What travels instead is plain data
(:func:`job_to_wire`): the task by its spec (``limen_jax.program.pool.task_spec``: its
class as "module:qualname", or its registered name, and its parameters), each interface
as its exported StableHLO artifacts with its width and reward-term names (never its
source, never a pickled function), the PPO config as a dict, a kind's own inputs as arrays
(``job.data``: demonstrations, kept policies; never the driver's file paths, which a
worker on another node cannot read), and the evaluation kind by name (plus
"module:qualname" of its class, so a kind registered by object in the driver is found in
the worker too). :class:`EvalWorker` rebuilds the job (:func:`job_from_wire`)
and runs it with :func:`~limen_jax.search.evaluation.kind_registry.run_job`, as the in-process evaluator
does. It knows nothing of Ray: a cluster evaluator wraps it in whatever actor it uses.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import os
import pickle
import sys
import threading
from collections.abc import Sequence
from typing import Any

from limen_jax.search.evaluation.jobs import Budget, EvalBatch, EvalJob

# Interfaces a worker keeps rebuilt, by content: a batch compiled ahead and then run is
# the same objects both times, so the programs' kernel is compiled once (its memo is by
# identity).
_KEEP_INTERFACES = 256


def interface_to_wire(iface: Any, task: Any) -> dict[str, Any]:
    """One interface as plain data: its artifacts ("obs", "reward": bytes or None), width,
    reward-AST size, name and term names; the task default and a compile-ahead placeholder
    (no artifacts) by what they are. ValueError for an interface with neither artifacts nor
    a known stand-in: a Python function cannot travel."""
    from limen_jax.interface import default_interface

    obs, reward = bytes(iface.obs_artifact or b""), bytes(iface.reward_artifact or b"")
    out: dict[str, Any] = {"name": str(iface.name), "obs_dim": int(iface.obs_dim),
                           "reward_ast_size": int(iface.reward_ast_size)}  # fmt: skip
    if obs or reward:
        return {**out, "what": "artifacts", "obs": obs or None, "reward": reward or None,
                "reward_terms": list(iface.reward_terms)}  # fmt: skip
    if iface.name == "placeholder":
        return {**out, "what": "placeholder"}
    if iface.name == default_interface(task).name:
        return {**out, "what": "default"}
    raise ValueError(f"interface {iface.name!r} has no exported artifacts: only checked programs, the task "
                     "default and placeholders can be evaluated in another process")


def job_to_wire(job: EvalJob) -> dict[str, Any]:
    """``job`` as plain data (bytes, numbers, strings, lists, dicts)."""
    from limen_jax.program.pool import _class_ref, task_spec
    from limen_jax.search.evaluation.kind_registry import evaluation_kind

    kind = evaluation_kind(job.kind)
    return {
        "task": task_spec(job.task),
        "interfaces": [interface_to_wire(i, job.task) for i in job.interfaces],
        "seeds": [int(s) for s in job.seeds],
        "budget": dataclasses.asdict(job.budget),
        "config": job.config.to_dict(),
        "pad_to": job.pad_to,
        "watchdog_s": float(job.watchdog_s),
        "watchdog_factor": float(job.watchdog_factor),
        "kind": job.kind,
        "kind_ref": _class_ref(type(kind)),
        "return_policies": bool(job.return_policies),
        "options": job.options,
        # a kind's own inputs (the demos kind's demonstrations, the episodes kind's kept
        # policies: numpy arrays in pytrees), never a path on the driver's disk
        "data": job.data,
    }


class EvalWorker:
    """Runs jobs sent as :func:`job_to_wire` data, in a process of its own.

    sys_path: the driver's import path, added behind this process's own (so a task or an
    evaluation kind the driver imports from a directory of its own is found here too).
    Tasks and rebuilt interfaces are kept, so the compiled trainers stay warm across jobs.
    """

    def __init__(self, sys_path: Sequence[str] = ()) -> None:
        for p in sys_path:
            if p and p not in sys.path:
                sys.path.append(p)
        self._tasks: dict[str, Any] = {}
        self._interfaces: collections.OrderedDict[bytes, Any] = collections.OrderedDict()
        self._lock = threading.Lock()

    def pid(self) -> int:
        return os.getpid()

    def run(self, wire: dict[str, Any], budget_s: float | None) -> EvalBatch:
        """The job's :class:`EvalBatch`, as :func:`run_job` gives it in this process."""
        from limen_jax.search.evaluation.kind_registry import run_job

        batch = run_job(self.job(wire), budget_s)
        batch.results = [portable(r) if isinstance(r, BaseException) else r for r in batch.results]
        return batch

    def compile(self, wire: dict[str, Any]) -> float:
        """Compile the job's trainers ahead, training nothing; the seconds it took."""
        from limen_jax.search.evaluation.train_job import compile_job

        return compile_job(self.job(wire))

    def job(self, wire: dict[str, Any]) -> EvalJob:
        """The :class:`EvalJob` that ``wire`` describes (see :func:`job_from_wire`)."""
        with self._lock:
            return job_from_wire(wire, self._task(wire["task"]), self._interfaces)

    def _task(self, spec: dict[str, Any]) -> Any:
        from limen_jax.task import make

        key = repr(sorted(spec.items()))
        if key not in self._tasks:
            self._tasks[key] = make(spec["factory"], **spec["params"])
        return self._tasks[key]


def job_from_wire(wire: dict[str, Any], task: Any, cache: collections.OrderedDict[bytes, Any] | None = None) -> EvalJob:
    """Rebuild a job: ``task`` built from ``wire["task"]``; interfaces from their artifacts
    (verified on load: a malformed one raises ProgramError), reused from ``cache`` when the
    same bytes were rebuilt before; the kind registered from ``kind_ref`` if unknown here."""
    from limen_jax.rl import PPOConfig
    from limen_jax.search.evaluation.kind_registry import _KINDS, register_evaluation

    if wire["kind"] not in _KINDS and wire.get("kind_ref"):
        from limen_jax.registry import _resolve

        kind = _resolve(wire["kind_ref"])
        register_evaluation(kind() if isinstance(kind, type) else kind)
    cache = collections.OrderedDict() if cache is None else cache
    interfaces = [_interface(spec, task, cache) for spec in wire["interfaces"]]
    return EvalJob(task, interfaces, list(wire["seeds"]), Budget(**wire["budget"]),
                   PPOConfig.from_dict(wire["config"]), pad_to=wire["pad_to"], watchdog_s=wire["watchdog_s"],
                   watchdog_factor=wire["watchdog_factor"], kind=wire["kind"],
                   return_policies=wire["return_policies"], options=wire.get("options", {}),
                   data=wire.get("data"))  # fmt: skip


def _interface(spec: dict[str, Any], task: Any, cache: collections.OrderedDict[bytes, Any]) -> Any:
    from limen_jax.interface import default_interface, placeholder_interface
    from limen_jax.program import interface_from_artifacts

    what = spec["what"]
    if what == "placeholder":
        return placeholder_interface(spec["obs_dim"])
    key = hashlib.sha256(repr((task.name, sorted(task.params.items()), sorted(spec.items()))).encode()).digest()
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    if what == "default":
        iface = default_interface(task)
    else:
        obs, reward = spec["obs"], spec["reward"]
        # one artifact alone is an ablation: the other half is the task default's
        mode = "full" if obs and reward else "obs_only" if obs else "reward_only"
        iface = interface_from_artifacts(task, _sample(task), obs=obs, reward=reward,
                                         obs_dim=spec["obs_dim"] if obs else None,
                                         reward_ast_size=spec["reward_ast_size"], source="", name=spec["name"],
                                         mode=mode, reward_terms=spec["reward_terms"])  # fmt: skip
    cache[key] = iface
    while len(cache) > _KEEP_INTERFACES:
        cache.popitem(last=False)
    return iface


_SAMPLES: dict[Any, Any] = {}


def _sample(task: Any) -> Any:
    """A stand-in batch of one transition: only its leaves' shapes and dtypes are read (the
    artifacts' signature), so it is built from shapes, running nothing of the task."""
    import jax
    import jax.numpy as jnp

    key = (type(task), tuple(sorted(task.params.items())))
    if key not in _SAMPLES:
        shapes = jax.eval_shape(lambda k: task.sample_transitions(k, num=1), jax.random.key(0))

        def zeros(x: Any) -> Any:
            if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
                data = jax.eval_shape(jax.random.key_data, x)
                return jax.random.wrap_key_data(jnp.zeros(data.shape, data.dtype), impl=x.dtype._impl)
            return jnp.zeros(x.shape, x.dtype)

        _SAMPLES[key] = jax.tree.map(zeros, shapes)
    return _SAMPLES[key]


def portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling (the trip back to the driver), else a stand-in of the
    same blame: an :class:`EngineFault` for an engine error, a RuntimeError otherwise."""
    from limen_jax.search.faults import EngineFault, describe, is_engine_error

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return EngineFault(describe(exc)) if is_engine_error(exc) else RuntimeError(describe(exc))
