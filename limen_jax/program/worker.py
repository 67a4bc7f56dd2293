"""The sandboxed checker worker: ``python -m limen_jax.program.worker MECHANISM MEMORY_MB CPU_SECONDS``.

Started by pool.py, one process per program (or per trained program to time:
``"kind": "time"``, program/timing.py), inside the isolation mechanism
(isolation.py); or forked per program by a fork server (forkserver.py), whose child
runs :func:`serve` the same way. It locks itself down (rlimits, seccomp) before reading anything, reads
one request frame (wire.py) from stdin: the program text, the mode, the task's factory
and parameters, the limits, the export platforms and the sample transitions as raw
arrays; writes ``b"R"`` (set up, about to run untrusted code) and then one reply frame:
JSON (verdict, descriptors, the extracted code and the behavioural fingerprint
(fingerprint.py), or the error) and the exported φ / R artifacts as bytes. Everything
the program does happens here: extraction, policy, module execution, the one trace of
each function, export, and the checks on the exported artifact.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, NoReturn


def main(argv: list[str]) -> None:
    from limen_jax.program import isolation

    name, memory_mb, cpu_seconds = argv[0], int(argv[1]), int(argv[2])
    # The reply goes to a private copy of stdout; fd 1 becomes stderr, so stray prints
    # (JAX warnings, or a program's) cannot corrupt the frame.
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    isolation.limit(memory_mb << 20, cpu_seconds)

    from limen_jax.program import wire

    header, buffers = wire.decode(sys.stdin.buffer.read())
    serve(name, header, buffers, reply_fd)


def serve(name: str, header: dict[str, Any], buffers: list[bytes], reply_fd: int) -> NoReturn:
    """Answer one request on ``reply_fd``: b"R" once set up, then the reply frame; exit.
    Called with this process's limits set (a fresh worker, or a fork server's child)."""
    from limen_jax.program import isolation, pipes, wire

    sys.path.extend(p for p in header["sys_path"] if p not in sys.path)
    extra = buffers[len(header["sample"]) :]  # a timing request's artifacts
    sample = _sample(header, buffers[: len(header["sample"])])  # trusted: the task's own code
    isolation.seal(name)
    os.write(reply_fd, b"R")  # from here on, program code (or its artifact) runs
    if header.get("kind") == "time":
        reply, blobs = time_request(header, sample, extra)
    else:
        reply, blobs = check_request(header, sample)
    pipes.write_all(reply_fd, wire.encode(reply, blobs))
    # No interpreter shutdown: a compile or run abandoned at its time limit may still be
    # going in a daemon thread, and finalising around it can abort.
    os._exit(0)


def _sample(header: dict[str, Any], buffers: list[bytes]) -> Any:
    """The engine's sample transitions, rebuilt into the task's own pytree structure."""
    import jax

    from limen_jax.program import artifact, wire
    from limen_jax.task import Transition, make

    task = make(header["task"]["factory"], **header["task"]["params"])
    sim_def = jax.tree.structure(jax.eval_shape(task.reset, jax.random.key(0)).sim)
    specs = header["sample"]
    n = int(sim_def.num_leaves)  # type: ignore[attr-defined]
    if len(specs) != 2 * n + 1 or len(buffers) != len(specs):
        raise ValueError("the sample does not match the task's state structure")
    leaves = [jax.numpy.asarray(wire.array_from(s, b)) for s, b in zip(specs, buffers)]
    leaves = artifact.from_data(leaves, specs)
    return Transition(
        sim=jax.tree.unflatten(sim_def, leaves[:n]),
        action=leaves[n],
        next_sim=jax.tree.unflatten(sim_def, leaves[n + 1 :]),
    )


def time_request(header: dict[str, Any], sample: Any, buffers: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
    """Time a trained program's artifacts (program/timing.py); no program Python runs."""
    from limen_jax.program.errors import ProgramError, exception_summary
    from limen_jax.program.timing import time_artifacts

    try:
        return time_artifacts(header, sample, buffers), []
    except ProgramError as err:
        return {"ok": False, "error": err.to_dict()}, []
    except Exception as exc:  # a malformed artifact: reported, the engine decides
        return {"ok": False, "error": ProgramError("compile", exception_summary(exc)).to_dict()}, []


def check_request(header: dict[str, Any], sample: Any) -> tuple[dict[str, Any], list[bytes]]:
    """Run every stage on the request's program; the reply header and artifact buffers."""
    from limen_jax.program.checks import Limits
    from limen_jax.program.errors import ProgramError, exception_summary

    start = time.perf_counter()
    limits = Limits(**header["limits"])
    try:
        reply, blobs = _check(
            header["source"], header["mode"], sample, limits, header["platforms"], float(header.get("step_work", 0.0))
        )
    except ProgramError as err:
        reply, blobs = {"ok": False, "error": err.to_dict()}, []
    except MemoryError:
        reply, blobs = (
            {"ok": False, "error": ProgramError("allocation", "the program used too much memory.").to_dict()},
            [],
        )
    except Exception as exc:  # a checker bug, reported as such (never blamed on the host)
        bug = ProgramError(
            "compile",
            f"the checker failed unexpectedly on this program ({exception_summary(exc)}); "
            "simplify the program. (This is a limen_jax bug: please report it.)",
        )
        reply, blobs = {"ok": False, "error": bug.to_dict(), "bug": True}, []
    if "reward_ast_size" not in reply:
        reply["reward_ast_size"] = _reward_size_or_none(header["source"], header["mode"])
    reply["seconds"] = time.perf_counter() - start
    return reply, blobs


def _check(
    source: str, mode: str, sample: Any, limits: Any, platforms: list[str], step_work: float
) -> tuple[dict[str, Any], list[bytes]]:
    import jax
    import numpy as np

    from limen_jax.program import artifact
    from limen_jax.program.checks import check_values, run_with_timeout, trace_functions
    from limen_jax.program.descriptors import reward_ast_size
    from limen_jax.program.errors import ProgramError
    from limen_jax.program.extract import extract_code
    from limen_jax.program.fingerprint import fingerprint
    from limen_jax.program.policy import check_policy
    from limen_jax.program.sandbox import exec_program, program_function
    from limen_jax.xla_options import run_once

    wants_obs, wants_reward = mode in ("full", "obs_only"), mode in ("full", "reward_only")
    required = [n for n, w in (("get_observation", wants_obs), ("compute_reward", wants_reward)) if w]
    code = extract_code(source, required)
    namespace = exec_program(code, limits.exec_seconds, limits.max_memory_bytes)
    user_obs = program_function(namespace, "get_observation", 1, "state") if wants_obs else None
    user_reward = (
        program_function(namespace, "compute_reward", 3, "state, action, next_state") if wants_reward else None
    )
    traced = trace_functions(code, sample, limits, observe=user_obs, reward=user_reward, step_work=step_work)
    size = reward_ast_size(check_policy(code)) if wants_reward else 0

    sim_specs = artifact.leaf_specs(sample.sim)
    reward_specs = artifact.leaf_specs((sample.sim, sample.action, sample.next_sim))
    blobs: dict[str, bytes] = {}

    obs_dim = traced.obs_dim or 0

    def export_all() -> None:
        if traced.observe is not None:
            post = artifact.observation_post(obs_dim)
            blobs["obs"] = artifact.export_jaxpr(traced.observe, sim_specs, post, platforms)
        if traced.reward is not None:
            post = artifact.terms_post if traced.reward_terms else artifact.reward_post
            blobs["reward"] = artifact.export_jaxpr(traced.reward, reward_specs, post, platforms)

    run_with_timeout(export_all, limits.compile_seconds, "exporting the program")

    # From here on only the serialised artifact is used, exactly as the engine will.
    calls: dict[str, tuple[Any, tuple[Any, ...]]] = {}
    if "obs" in blobs:
        calls["obs"] = (artifact.load(blobs["obs"], sim_specs, (obs_dim,)), (sample.sim,))
    if "reward" in blobs:
        calls["reward"] = (
            artifact.load(blobs["reward"], reward_specs, (len(traced.reward_terms),) if traced.reward_terms else ()),
            (sample.sim, sample.action, sample.next_sim),
        )

    def run_all() -> dict[str, Any]:
        # one run on the sample: no LLVM optimisation (xla_options.py; workers run on
        # the CPU); XLA's cost estimate is made on the HLO, before it
        compiled = {
            k: jax.jit(exp.call).lower(*artifact.to_data(jax.tree.leaves(args))).compile(run_once())
            for k, (exp, args) in calls.items()
        }
        flops = sum(_flops(c) for c in compiled.values())
        data = {k: artifact.to_data(jax.tree.leaves(args)) for k, (_, args) in calls.items()}
        t0 = time.perf_counter()
        values = {k: np.asarray(jax.device_get(c(*data[k]))) for k, c in compiled.items()}
        return {"values": values, "flops": flops, "run_seconds": time.perf_counter() - t0}

    result = run_with_timeout(run_all, limits.compile_seconds + limits.run_seconds, "compiling and running the program")
    n = int(jax.tree.leaves(sample)[0].shape[0])
    per_transition = result["flops"] / max(n, 1)
    if per_transition > limits.max_flops_per_transition:
        raise ProgramError(
            "allocation",
            f"the compiled program costs about {per_transition:.3g} floating-point operations per "
            f"transition (XLA's estimate); the budget is {limits.max_flops_per_transition:.3g}. "
            "Compute fewer, cheaper features: avoid large convolutions, matmuls and loops over the grid.",
        )
    values = result["values"]
    check_values(values, traced.reward_terms)
    reply = {
        "ok": True,
        "code": code,
        "obs_dim": traced.obs_dim,
        "reward_ast_size": size,
        "reward_terms": list(traced.reward_terms),
        "flops_per_transition": per_transition,
        "run_seconds": result["run_seconds"],
        "fingerprint": fingerprint(mode, values.get("obs"), values.get("reward")).to_json(),
        "artifacts": list(blobs),
    }
    return reply, list(blobs.values())


def _flops(compiled: Any) -> float:
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):  # older jaxlibs: one dict per device
        analysis = analysis[0] if analysis else {}
    return float((analysis or {}).get("flops", 0.0))


def _reward_size_or_none(source: str, mode: str) -> int | None:
    from limen_jax.program.descriptors import reward_ast_size
    from limen_jax.program.errors import ProgramError
    from limen_jax.program.extract import extract_code
    from limen_jax.program.policy import check_policy

    if mode == "obs_only":
        return None
    try:
        return reward_ast_size(check_policy(extract_code(source, ["compute_reward"])))
    except ProgramError:
        return None


if __name__ == "__main__":
    main(sys.argv[1:])
