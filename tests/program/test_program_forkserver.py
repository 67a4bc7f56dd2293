"""Fork servers: one sandboxed process imports the worker's code once and forks a child
per program; children start clean, are killed at their deadline, cannot reach their
server, and a failed server costs a fresh worker, never a verdict."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time

import pytest
from program_corpus import GOOD

import limen_jax.program.pool as pool
from limen_jax.program import check_source, isolation, wire
from limen_jax.program.forkserver import SERVER_MODULE, ForkServer
from limen_jax.task import Task, Transition


def _server(child: str) -> ForkServer:
    name = isolation.mechanism()
    argv = [*isolation.worker_command(name, SERVER_MODULE), f"fork_children:{child}"]
    return ForkServer(argv, dict(isolation.WORKER_ENV), tempfile.mkdtemp())


def _request(server: ForkServer, seconds: float = 60.0, **header: object) -> tuple[dict, bytes, int, bool]:
    frame = wire.encode({"sys_path": [p for p in sys.path if p], **header}, [])
    out, err, code, timed_out = server.run(frame, 2048, 60, seconds, 1 << 20)
    reply = wire.decode(out[1:])[0] if out.startswith(b"R") and code == 0 else {}
    return reply, err, code, timed_out


def test_every_child_starts_from_the_same_clean_server() -> None:
    server = _server("report")
    try:
        first, _, code, _ = _request(server, echo=1)
        second, _, _, _ = _request(server, echo=2)
        assert code == 0 and (first["echo"], second["echo"]) == (1, 2)
        # one server, two children; the first child's module state did not reach the second
        assert first["server"] == second["server"] and first["child"] != second["child"]
        assert first["calls"] == second["calls"] == 1
    finally:
        server.close()


def test_a_hung_child_is_killed_at_its_deadline_and_the_server_goes_on() -> None:
    server = _server("hang")
    try:
        _, _, code, timed_out = _request(server, seconds=1.0)
        assert timed_out and code == -signal.SIGKILL
        _, _, code, timed_out = _request(server, seconds=1.0)
        assert timed_out and server.alive()
    finally:
        server.close()


def test_a_child_that_closes_its_pipes_is_still_killed_at_its_deadline() -> None:
    server = _server("close_and_run")
    try:
        t0 = time.monotonic()
        _, _, code, timed_out = _request(server, seconds=1.0)
        assert timed_out and code == -signal.SIGKILL and time.monotonic() - t0 < 10
    finally:
        server.close()


def test_a_flood_of_output_is_cut_off_at_the_limit() -> None:
    server = _server("flood")
    try:
        out, _, code, _ = server.run(wire.encode({"sys_path": sys.path}, []), 2048, 60, 60.0, 1 << 20)
        assert (1 << 20) < len(out) <= (1 << 20) + (1 << 16) and code == -signal.SIGKILL
    finally:
        server.close()


@pytest.mark.skipif(isolation.mechanism() == "rlimits", reason="the weak fallback has no seccomp filter")
def test_a_child_can_neither_signal_its_server_nor_fork() -> None:
    server = _server("attack_server")
    try:
        tried, _, code, _ = _request(server)
        assert code == 0 and (tried["kill"], tried["fork"]) == ("PermissionError", "PermissionError")
        assert server.alive()
    finally:
        server.close()


def test_checks_go_through_one_server_and_a_dead_one_costs_nothing(
    monkeypatch: pytest.MonkeyPatch, easy_task: Task, easy_sample: Transition
) -> None:
    monkeypatch.delenv(pool.ENV_FORKSERVER, raising=False)
    pool.close_servers()
    assert check_source(GOOD, easy_task, sample=easy_sample).ok
    servers = pool.idle_servers()
    assert len(servers) == 1
    assert check_source(GOOD, easy_task, sample=easy_sample).ok
    assert pool.idle_servers() == servers  # reused
    os.killpg(servers[0].proc.pid, signal.SIGKILL)
    servers[0].proc.wait()
    assert check_source(GOOD, easy_task, sample=easy_sample).ok  # a new server answers
    assert len(pool.idle_servers()) == 1 and pool.idle_servers() != servers
    pool.close_servers()


def test_servers_of_an_old_sandbox_view_make_way_for_new_ones(
    monkeypatch: pytest.MonkeyPatch, easy_task: Task, easy_sample: Transition
) -> None:
    # the sandbox binds what the engine imported: when that grows, the command line (and
    # so the server) changes, and the idle servers of the old view are closed first
    monkeypatch.delenv(pool.ENV_FORKSERVER, raising=False)
    monkeypatch.setattr(pool, "_IDLE_KEPT", 1)
    pool.close_servers()
    assert check_source(GOOD, easy_task, sample=easy_sample).ok
    (old,) = pool.idle_servers()
    command = isolation.worker_command
    def another(name: str, module: str) -> list[str]:
        argv = command(name, module)
        at = argv.index("-c")
        return [*argv[:at], "-u", *argv[at:]]  # unbuffered: the same server, another command line

    monkeypatch.setattr(isolation, "worker_command", another)
    assert check_source(GOOD, easy_task, sample=easy_sample).ok
    (new,) = pool.idle_servers()
    assert new is not old and not old.alive()
    pool.close_servers()
