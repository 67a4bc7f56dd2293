"""The engine's side of checking: start sandboxed workers, hand them data, read back data.

One worker process per program, never reused, so nothing a program does can reach the
next one: a fork server's child (forkserver.py: the imports are paid once per server),
or a fresh interpreter when no server is at hand; :func:`check_many` runs up to
``workers`` of them side by side.
The engine sends the program text and the sample transitions as raw arrays, and reads
back only a JSON verdict and StableHLO bytes; it never unpickles or executes anything
from a worker. A worker that does not answer in time is killed.

Failures are classified: a program that crashes or outlives its worker is the program's
fault (:class:`ProgramError`); a worker that cannot start at all is the engine's
(:class:`SandboxError`), raised so that the run stops instead of blaming programs.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax

from limen_jax.program import artifact, forkserver, isolation, pipes, wire
from limen_jax.program.checks import Limits
from limen_jax.program.cost import step_work
from limen_jax.program.errors import ProgramError
from limen_jax.task import Task, Transition

# Most bytes a worker may answer with (two artifacts and a JSON verdict).
MAX_REPLY_BYTES = 64 << 20


class SandboxError(RuntimeError):
    """The sandbox itself failed (a worker could not start or broke the protocol before it
    ran any program code): an engine fault, never a program's."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A worker's answer: the reply JSON and the artifacts by name ("obs", "reward")."""

    reply: dict[str, Any]
    artifacts: dict[str, bytes]


def task_spec(task: Task) -> dict[str, Any]:
    """How a worker rebuilds ``task``: its class as "module:qualname" when that names it,
    else its task name (adapter families make their classes at run time), and its parameters."""
    cls = type(task)
    return {"factory": _class_ref(cls) or task.name, "params": dict(task.params)}


def _class_ref(cls: type) -> str | None:
    """"module:qualname" if importing it gives back ``cls``, else None."""
    try:
        found: Any = importlib.import_module(cls.__module__)
        for part in cls.__qualname__.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return f"{cls.__module__}:{cls.__qualname__}" if found is cls else None


def request(
    source: str, task: Task, mode: str, sample: Transition, limits: Limits
) -> tuple[dict[str, Any], list[bytes]]:
    """The request frame's header and buffers (the sample as raw arrays)."""
    arrays = artifact.as_numpy((sample.sim, sample.action, sample.next_sim))
    specs = artifact.leaf_specs((sample.sim, sample.action, sample.next_sim))
    for spec, array in zip(specs, arrays):
        spec.update(wire.array_spec(array))
    header = {
        "source": source,
        "mode": mode,
        "task": task_spec(task),
        "limits": dataclasses.asdict(limits),
        "platforms": export_platforms(),
        "sys_path": [p for p in sys.path if p],
        "sample": specs,
        # the unit of the relative work budget, traced here from the trusted task's step
        "step_work": step_work(task) if limits.max_work_vs_step > 0 else 0.0,
    }
    return header, [a.tobytes() for a in arrays]


def export_platforms() -> list[str]:
    """Platforms the artifacts are exported for: the CPU and the engine's accelerator."""
    platforms = ["cpu"]
    backend = jax.default_backend()
    if backend not in platforms:
        platforms.append("cuda" if backend == "gpu" else backend)
    return platforms


def run_worker(header: dict[str, Any], buffers: list[bytes], limits: Limits, seconds: float | None = None) -> Verdict:
    """Check one program in a sandboxed worker: a fork server's child (forkserver.py), or
    a fresh worker when no server is at hand or the server failed. Its verdict
    (ProgramError on a crash or a timeout, SandboxError when the worker could not start).
    seconds: the worker's wall-clock deadline (default ``limits.worker_seconds``)."""
    seconds = limits.worker_seconds if seconds is None else float(seconds)
    name = isolation.mechanism()
    frame = wire.encode(header, buffers)
    forked = _forked(name, frame, limits.worker_memory_mb, int(seconds) + 1, seconds)
    # A child that fails before it runs the program is retried fresh: only a fresh
    # worker's failure to start is taken as the sandbox's (SandboxError)
    if forked is not None and forked[0].startswith(b"R"):
        out, err, code, timed_out = forked
        return _verdict(out, err, code, timed_out, seconds, name)
    cmd = [
        *isolation.worker_command(name),
        str(limits.worker_memory_mb),
        str(int(seconds) + 1),
    ]
    scratch = tempfile.mkdtemp(prefix="limen-worker-")
    os.chmod(scratch, 0o500)  # empty, and stays empty
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=scratch,
            env=dict(isolation.WORKER_ENV),
            start_new_session=True,
        )
    except OSError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise SandboxError(f"could not start a checker worker ({name}): {exc}") from exc
    try:
        out, err, timed_out = _exchange(proc, frame, seconds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _verdict(out, err, proc.returncode, timed_out, seconds, name)


# --- fork servers -----------------------------------------------------------------------

# Idle fork servers, oldest first, with their command lines (the mechanism and the
# directories the sandbox binds, which grow when the engine imports a task from a new
# place); at most a core's worth kept, the oldest closed first.
_IDLE: list[tuple[tuple[str, ...], forkserver.ForkServer]] = []
_IDLE_LOCK = threading.Lock()
_IDLE_KEPT = max(1, min(8, os.cpu_count() or 1))
ENV_FORKSERVER = "LIMEN_JAX_FORKSERVER"  # "0": every check in a fresh worker


def _forked(name: str, frame: bytes, memory_mb: int, cpu_seconds: int, seconds: float) -> tuple[Any, ...] | None:
    """(stdout, stderr tail, exit status, timed out) of a fork server's child for this
    request, or None when fork servers are off or the server failed (it is closed)."""
    if os.environ.get(ENV_FORKSERVER, "1") == "0":
        return None
    argv = isolation.worker_command(name, forkserver.SERVER_MODULE)
    key = tuple(argv)
    with _IDLE_LOCK:
        mine = [i for i, (k, _) in enumerate(_IDLE) if k == key]
        server = _IDLE.pop(mine[-1])[1] if mine else None
    try:
        if server is None or not server.alive():
            if server is not None:
                server.close()
            server = forkserver.ForkServer(argv, dict(isolation.WORKER_ENV), _server_scratch())
        got = server.run(frame, memory_mb, cpu_seconds, seconds, 1 + MAX_REPLY_BYTES + 1)
    except forkserver.ForkServerError:
        if server is not None:
            server.close()
        return None
    with _IDLE_LOCK:
        _IDLE.append((key, server))
        evicted = [_IDLE.pop(0)[1] for _ in range(len(_IDLE) - _IDLE_KEPT)]
    for old in evicted:
        old.close()
    return got


def idle_servers() -> list[forkserver.ForkServer]:
    """The idle fork servers, oldest first."""
    with _IDLE_LOCK:
        return [server for _, server in _IDLE]


def close_servers() -> None:
    """Stop every idle fork server (they also stop with this process)."""
    with _IDLE_LOCK:
        servers = [server for _, server in _IDLE]
        _IDLE.clear()
    for server in servers:
        server.close()


@functools.cache
def _server_scratch() -> str:
    """The fork servers' working directory (bubblewrap gives them an empty tmpfs anyway):
    empty, unwritable, removed at exit."""
    scratch = tempfile.mkdtemp(prefix="limen-forkserver-")
    os.chmod(scratch, 0o500)
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return scratch


def _exchange(proc: subprocess.Popen[bytes], request: bytes, seconds: float) -> tuple[bytes, bytes, bool]:
    """Send ``request``; read the answer (at most MAX_REPLY_BYTES + 1: a worker that sends
    more is killed) and the tail of stderr; kill the worker at ``seconds``."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin = proc.stdin

    def send() -> None:
        with contextlib.suppress(OSError):  # the worker may die before reading it all
            stdin.write(request)
            stdin.close()

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    deadline = time.monotonic() + seconds
    # b"R" + the frame, or too much
    out, err, timed_out = pipes.collect(proc.stdout.fileno(), proc.stderr.fileno(), deadline, 1 + MAX_REPLY_BYTES,
                                        lambda: _kill(proc))  # fmt: skip
    try:  # a worker that closed its pipes may still run
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(proc)
        proc.wait()
    sender.join(timeout=10)
    return out, err, timed_out


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the worker's process group (our own child's; bubblewrap takes its sandbox along)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _verdict(out: bytes, err: bytes, code: int, timed_out: bool, seconds: float, name: str) -> Verdict:
    if not out.startswith(b"R"):
        tail = err.decode(errors="replace")[-pipes.STDERR_TAIL :]
        raise SandboxError(f"the checker worker ({name}) failed before running the program (exit {code}): {tail}")
    body = out[1:]
    if timed_out:
        raise ProgramError(
            "timeout",
            f"checking the program took longer than {seconds:g} s in all; the worker was "
            "stopped. Simplify the program (fewer loops, smaller arrays).",
        )
    if not body:
        raise ProgramError("exec", _crash_message(code))
    if len(body) > MAX_REPLY_BYTES:
        raise ProgramError("exec", "the checker's worker answered with too much data for this program.")
    try:
        reply, blobs = wire.decode(body, MAX_REPLY_BYTES)
    except wire.WireError:
        raise ProgramError("exec", "the checker's worker returned a malformed answer for this program.") from None
    names = reply.get("artifacts", []) if reply.get("ok") else []
    if not isinstance(names, list) or len(names) != len(blobs) or not set(names) <= {"obs", "reward"}:
        raise ProgramError("exec", "the checker's worker returned a malformed answer for this program.")
    return Verdict(reply, dict(zip(names, blobs)))


def _crash_message(code: int) -> str:
    if code < 0:
        sig = -code
        what = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
        if sig == signal.SIGXCPU:
            return "the program used more CPU time than allowed and was stopped; simplify it."
        return (
            f"the program crashed the checker's worker (signal {what}); it must only compute "
            "with jnp operations on the state."
        )
    return f"the program stopped the checker's worker (exit status {code}); it must only compute with jnp operations."


def check_many(
    jobs: Sequence[tuple[str, str]], task: Task, sample: Transition, limits: Limits, workers: int
) -> list[Verdict | ProgramError]:
    """Check ``(source, mode)`` pairs, ``workers`` at a time; each a Verdict or ProgramError.

    SandboxError (an engine fault) propagates.
    """

    base, buffers = request("", task, "full", sample, limits)  # the sample is encoded once

    def one(job: tuple[str, str]) -> Verdict | ProgramError:
        header = {**base, "source": job[0], "mode": job[1]}
        try:
            return run_worker(header, buffers, limits)
        except ProgramError as err:
            return err

    if len(jobs) == 1 or workers <= 1:
        return [one(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="limen-check") as pool:
        return list(pool.map(one, jobs))
