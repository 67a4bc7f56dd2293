"""Children for fork-server tests: each is called as worker.serve would be, in a fork
server's child, and answers b"R" plus a wire frame (or misbehaves)."""

from __future__ import annotations

import os
import time
from typing import Any

from limen_jax.program import isolation, wire

CALLS = 0  # a module global: in a fresh fork it is 0 again whatever the last child did


def _answer(fd: int, reply: dict[str, Any]) -> None:
    os.write(fd, b"R" + wire.encode(reply, []))
    os._exit(0)


def report(name: str, header: dict[str, Any], buffers: list[bytes], fd: int) -> None:
    global CALLS
    CALLS += 1
    _answer(fd, {"calls": CALLS, "server": os.getppid(), "child": os.getpid(), "echo": header.get("echo")})


def hang(name: str, header: dict[str, Any], buffers: list[bytes], fd: int) -> None:
    os.write(fd, b"R")
    time.sleep(600)


def flood(name: str, header: dict[str, Any], buffers: list[bytes], fd: int) -> None:
    os.write(fd, b"R")
    while True:
        os.write(fd, bytes(1 << 20))


def attack_server(name: str, header: dict[str, Any], buffers: list[bytes], fd: int) -> None:
    isolation.seal(name)  # as serve does before any program code runs
    tried = {}
    for what, fn in (("kill", lambda: os.kill(os.getppid(), 9)), ("fork", os.fork)):
        try:
            pid = fn()
            if pid == 0:
                os._exit(0)
            tried[what] = "done"
        except OSError as exc:
            tried[what] = type(exc).__name__
    _answer(fd, tried)


def close_and_run(name: str, header: dict[str, Any], buffers: list[bytes], fd: int) -> None:
    os.write(fd, b"R")
    for f in (fd, 1, 2):  # its pipes close, yet it goes on
        os.close(f)
    while True:
        pass
