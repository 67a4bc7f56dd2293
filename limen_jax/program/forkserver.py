"""Fork servers: sandboxed processes that import the worker's code once and fork one child
per program.

A fresh worker spends CPU time starting Python and importing JAX, flax and limen_jax
before it sees its program, a large share of a check on a small machine.
A fork server is started like a worker (the same isolation mechanism, command line
and environment), imports all that once, and then, for each request, forks a child
that runs exactly what a fresh worker runs (:func:`limen_jax.program.worker.serve`):
its own rlimits, the task made from scratch, the seccomp filter, the program. Each
child is a copy of the same clean server, so nothing one program does reaches the next;
the filter stops a child from starting processes or signalling its siblings and the
server; the server kills a child at its wall-clock deadline and relays its output, the
tail of its stderr and its exit status to the engine, which judges them exactly as a
fresh worker's (pool.py).

The server never initialises a JAX backend (no computation before the fork: XLA's
thread pools do not survive one) and refuses to fork with any thread running. Any
failure of the server itself (it cannot start, dies, breaks the protocol, or its
answer is late) is not a program's: pool.py closes it and checks that program in a
fresh worker instead.

Protocol, over the server's stdin and stdout: u64 length + one wire frame each way.
Request: ``{"memory_mb", "cpu_seconds", "seconds", "max_out"}`` + [the worker's request
frame] (``max_out``: the most stdout bytes kept; past it the child is killed).
Answer: ``{"returncode", "timed_out"}`` + [child's stdout, the tail of its stderr].
"""

from __future__ import annotations

import contextlib
import importlib
import os
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from limen_jax.program import isolation, pipes, wire

_U64 = struct.Struct("<Q")
SERVER_MODULE = "limen_jax.program.forkserver"
# What the server imports before its first fork: what every check needs, no backend.
PRELOAD = (
    "jax", "jax.numpy", "jax.export", "numpy", "flax", "limen_jax.task", "limen_jax.xla_options",
    "limen_jax.program.artifact", "limen_jax.program.checks", "limen_jax.program.descriptors",
    "limen_jax.program.errors", "limen_jax.program.extract", "limen_jax.program.fingerprint",
    "limen_jax.program.policy",
    "limen_jax.program.sandbox", "limen_jax.program.timing", "limen_jax.program.worker",
)  # fmt: skip


class ForkServerError(RuntimeError):
    """The fork server failed (an infrastructure fault, never a program's)."""


# --- the engine's side ----------------------------------------------------------------

# bubblewrap's --die-with-parent follows the *thread* that started it, so servers are
# started from one thread that lives as long as the process.
_STARTER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="limen-forkserver")


class ForkServer:
    """One running server. ``argv``: its command (isolation.worker_command's prefix with
    this module's boot); ``env`` and ``cwd`` as a worker's. Not thread-safe: one request
    at a time (pool.py keeps idle servers and hands each to one caller)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    cwd=cwd, env=env, start_new_session=True)  # fmt: skip

        try:
            self.proc = _STARTER.submit(start).result()
        except OSError as exc:
            raise ForkServerError(f"could not start a fork server: {exc}") from exc
        self._err = b""
        assert self.proc.stderr is not None
        threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True).start()

    def _drain(self, stream: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(stream.fileno(), 1 << 16):
                self._err = (self._err + chunk)[-pipes.STDERR_TAIL :]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(
        self, frame: bytes, memory_mb: int, cpu_seconds: int, seconds: float, max_out: int
    ) -> tuple[bytes, bytes, int, bool]:
        """One request (a worker's request frame) -> (the child's stdout, the tail of its
        stderr, its exit status as subprocess gives it, whether it was killed at ``seconds``).
        ForkServerError if the server does not answer within ``seconds`` + 30 s."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        control = {"memory_mb": int(memory_mb), "cpu_seconds": int(cpu_seconds), "seconds": float(seconds),
                   "max_out": int(max_out)}  # fmt: skip
        message = wire.encode(control, [frame])
        try:
            self.proc.stdin.write(_U64.pack(len(message)) + message)
            self.proc.stdin.flush()
            size = _U64.unpack(_read_exactly(self.proc.stdout.fileno(), 8, time.monotonic() + seconds + 30))[0]
            if size > max_out + (1 << 20):
                raise ForkServerError(f"the fork server answered {size} bytes")
            answer, (out, err) = wire.decode(_read_exactly(self.proc.stdout.fileno(), size, time.monotonic() + 30))
            return out, err, int(answer["returncode"]), bool(answer["timed_out"])
        except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
            stderr = self._err.decode(errors="replace")
            raise ForkServerError(f"the fork server failed: {exc}; its stderr: {stderr}") from exc

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


def _read_exactly(fd: int, n: int, deadline: float) -> bytes:
    """``n`` bytes from ``fd`` by ``deadline`` (``time.monotonic()``), else ForkServerError."""
    parts, got = [], 0
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while got < n:
            if not sel.select(max(0.0, deadline - time.monotonic())):
                raise ForkServerError("the fork server did not answer in time")
            chunk = os.read(fd, min(n - got, 1 << 20))
            if not chunk:
                raise ForkServerError("the fork server closed its output")
            parts.append(chunk)
            got += len(chunk)
    return b"".join(parts)


# --- inside the sandbox ---------------------------------------------------------------


def main(argv: list[str]) -> None:
    """The server: preload, then answer requests until stdin closes. argv: [mechanism,
    optionally the children's "module:function" (default the worker's ``serve``; tests
    give others), imported in each child after the request's ``sys_path``]."""
    name = argv[0]
    target = argv[1] if len(argv) > 1 else "limen_jax.program.worker:serve"
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints go to stderr, never into the answers
    for preload in PRELOAD:
        importlib.import_module(preload)
    stdin = 0
    while True:
        head = pipes.read_all(stdin, 8)
        if len(head) < 8:
            os._exit(0)
        control, (frame,) = wire.decode(pipes.read_all(stdin, _U64.unpack(head)[0]))
        answer = _fork_one(name, target, control, frame, (stdin, answer_fd))
        pipes.write_all(answer_fd, _U64.pack(len(answer)) + answer)


def _fork_one(name: str, target: str, control: dict[str, Any], frame: bytes, private: tuple[int, int]) -> bytes:
    if _threads() > 1:
        raise RuntimeError("a thread is running in the fork server; forking is unsafe")
    header, buffers = wire.decode(frame)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a fresh worker's life from its limits on
        try:
            for fd in (*private, out_r, err_r):
                os.close(fd)  # never the server's channels to the engine
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(err_w, 2)
            os.dup2(err_w, 1)
            isolation.limit(int(control["memory_mb"]) << 20, int(control["cpu_seconds"]))
            module, _, function = target.partition(":")
            sys.path.extend(p for p in header.get("sys_path", []) if p not in sys.path)
            getattr(importlib.import_module(module), function)(name, header, buffers, out_w)
        except BaseException:
            import traceback

            traceback.print_exc()
        os._exit(1)
    os.close(out_w)
    os.close(err_w)
    deadline = time.monotonic() + float(control["seconds"])
    out, err, timed_out = pipes.collect(out_r, err_r, deadline, int(control["max_out"]), lambda: _kill(pid))
    os.close(out_r)
    os.close(err_r)
    status, late = _reap(pid, deadline)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return wire.encode({"returncode": code, "timed_out": timed_out or late}, [out, err])


def _reap(pid: int, deadline: float) -> tuple[int, bool]:
    """The child's wait status once it exits, killing it at ``deadline`` (a child that
    closed its pipes may still run); and whether it had to be killed."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        if time.monotonic() >= deadline:
            _kill(pid)
            return os.waitpid(pid, 0)[1], True
        time.sleep(0.005)


def _threads() -> int:
    """Threads in this process: the kernel's count where /proc has it (threads started by
    native code too), else Python's."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
