"""A checker worker's pipes, read the same way whoever started it (pool.py for a fresh
worker, a fork server for its child): stdout up to a limit, the tail of stderr, a
wall-clock deadline. No threads: a fork server must not have any when it forks."""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Callable

STDERR_TAIL = 2000  # bytes of a worker's stderr kept (for the engine's own error messages)
_GRACE_S = 5.0  # after the kill, how long pipes may stay open before they are abandoned


def collect(
    out_fd: int, err_fd: int, deadline: float, max_out: int, kill: Callable[[], None]
) -> tuple[bytes, bytes, bool]:
    """Read ``out_fd`` (calling ``kill`` once more than ``max_out`` bytes came) and the
    tail of ``err_fd`` until both close, both drained so the worker never blocks on them;
    ``kill`` at ``deadline`` (``time.monotonic()``). The caller closes them. Returns
    (stdout, the stderr tail, whether the deadline passed)."""
    out, err, timed_out = bytearray(), b"", False
    with selectors.DefaultSelector() as sel:
        sel.register(out_fd, selectors.EVENT_READ, "out")
        sel.register(err_fd, selectors.EVENT_READ, "err")
        while sel.get_map():
            ready = sel.select(max(0.0, deadline - time.monotonic()))
            if not ready:
                if timed_out:  # killed, yet its pipes stay open: something else holds them
                    break
                timed_out = True
                kill()
                deadline = time.monotonic() + _GRACE_S
            for key, _ in ready:
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                elif key.data == "err":
                    err = (err + chunk)[-STDERR_TAIL:]
                elif len(out) <= max_out:
                    out += chunk
                    if len(out) > max_out:
                        kill()
    return bytes(out), err, timed_out


def read_all(fd: int, n: int) -> bytes:
    """``n`` bytes from ``fd``, or fewer where it closes first."""
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
