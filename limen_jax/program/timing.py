"""How fast each trained program's kernel runs, measured safely: the batch watchdog's witness.

When a training batch passes its deadline, the evaluator asks which program is to
blame. Each program's exported φ / R artifacts (bytes, never Python) are compiled and
run over the check sample inside a fresh sandboxed worker (pool.py) with a wall-clock
deadline, so a kernel that hangs is killed together with its worker and costs only that
measurement. :func:`slow_programs` then names the outliers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from limen_jax.program.checks import Limits
from limen_jax.program.errors import ProgramError
from limen_jax.program.pool import request, run_worker
from limen_jax.task import Task, Transition

# Timed calls of each artifact over the whole sample, after one warm-up call.
REPEATS = 5
# A program is an outlier when it is this many times slower than the median program ...
SLOW_FACTOR = 4.0
# ... and slower by at least this much per transition (noise on tiny kernels is not blame).
MIN_GAP_S = 1e-6


def time_programs(
    interfaces: Sequence[Any], task: Task, sample: Transition, limits: Limits, workers: int = 1
) -> list[float | None]:
    """Seconds per transition of each interface's φ + R artifacts over ``sample``.

    ``math.inf`` when the worker was stopped at its deadline (compile and run limits
    plus start-up) or ran out of CPU time; 0.0 for an interface without artifacts (the
    task's own default functions); None when the measurement failed otherwise.
    SandboxError (a worker that cannot start: the engine's fault) propagates.
    """
    base, buffers = request("", task, "full", sample, limits)
    seconds = limits.startup_seconds + limits.compile_seconds + limits.run_seconds

    def one(iface: Any) -> float | None:
        blobs = [(k, b) for k, b in (("obs", getattr(iface, "obs_artifact", b"")),
                                     ("reward", getattr(iface, "reward_artifact", b""))) if b]  # fmt: skip
        if not blobs:
            return 0.0
        header = {**base, "kind": "time", "artifacts": [k for k, _ in blobs], "obs_dim": int(iface.obs_dim),
                  "num_terms": len(getattr(iface, "reward_terms", ())), "repeats": REPEATS}  # fmt: skip
        try:
            verdict = run_worker(header, [*buffers, *(b for _, b in blobs)], limits, seconds)
        except ProgramError as err:
            return math.inf if err.stage == "timeout" or "CPU time" in err.message else None
        reply = verdict.reply
        if not reply.get("ok"):
            stage = (reply.get("error") or {}).get("stage")
            return math.inf if stage == "timeout" else None
        value = reply.get("seconds_per_transition")
        return float(value) if isinstance(value, int | float) else None

    if workers <= 1 or len(interfaces) <= 1:
        return [one(i) for i in interfaces]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="limen-time") as pool:
        return list(pool.map(one, interfaces))


def slow_programs(times: Sequence[float | None], factor: float = SLOW_FACTOR) -> list[int]:
    """Indices of the outliers among ``times`` (seconds per transition, as from
    :func:`time_programs`): timed out, or over ``factor`` x the lower median of the
    measured programs (and slower by at least MIN_GAP_S). With a single measured program
    only a timeout can make it an outlier."""
    measured = sorted(t for t in times if t is not None and math.isfinite(t))
    out = [k for k, t in enumerate(times) if t is not None and math.isinf(t)]
    if len(measured) < 2:
        return out
    median = measured[(len(measured) - 1) // 2]
    out += [k for k, t in enumerate(times)
            if t is not None and math.isfinite(t) and t > factor * median and t - median > MIN_GAP_S]  # fmt: skip
    return sorted(out)


def reference_time(times: Sequence[float | None]) -> float:
    """The lower median of the measured times (what an outlier is compared with)."""
    measured = sorted(t for t in times if t is not None and math.isfinite(t))
    return measured[(len(measured) - 1) // 2] if measured else math.nan


# --- inside the worker ------------------------------------------------------------------


def time_artifacts(header: dict[str, Any], sample: Any, buffers: Sequence[bytes]) -> dict[str, Any]:
    """The worker's side: compile the request's artifacts, run them ``repeats`` times over
    ``sample``; the reply (``seconds_per_transition``: φ + R, the fastest repeat)."""
    import jax

    from limen_jax.program import artifact
    from limen_jax.program.checks import run_with_timeout

    limits = Limits(**header["limits"])
    blobs = dict(zip(header["artifacts"], buffers, strict=True))
    sim_specs = artifact.leaf_specs(sample.sim)
    reward_specs = artifact.leaf_specs((sample.sim, sample.action, sample.next_sim))
    calls: list[tuple[Any, list[Any]]] = []
    if "obs" in blobs:
        exp = artifact.load(blobs["obs"], sim_specs, (int(header["obs_dim"]),))
        calls.append((exp, artifact.to_data(jax.tree.leaves(sample.sim))))
    if "reward" in blobs:
        terms = int(header.get("num_terms", 0))  # a dict reward's artifact returns its M terms
        exp = artifact.load(blobs["reward"], reward_specs, (terms,) if terms else ())
        calls.append((exp, artifact.to_data(jax.tree.leaves((sample.sim, sample.action, sample.next_sim)))))
    repeats = max(1, int(header.get("repeats", REPEATS)))

    def run() -> float:
        compiled = [(jax.jit(exp.call).lower(*data).compile(), data) for exp, data in calls]
        for fn, data in compiled:  # warm-up
            jax.block_until_ready(fn(*data))
        best = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            for fn, data in compiled:
                jax.block_until_ready(fn(*data))
            best = min(best, time.perf_counter() - t0)
        return best

    seconds = run_with_timeout(run, limits.compile_seconds + limits.run_seconds, "timing the program")
    n = int(jax.tree.leaves(sample)[0].shape[0])
    return {"ok": True, "seconds_per_transition": seconds / max(n, 1), "artifacts": []}
