"""The viewer against a hostile web page and a hostile run directory, from a real HTTP client:
a request naming another host (DNS rebinding) or coming from another site is refused, a
rollout is a POST with the session's token, no file outside the run is shown (served or
--static), and a huge or malformed run dir is a message, quickly."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from view_runs import small_run

from limen_jax.view import data, server
from limen_jax.view.tensorboard import _safe

SECRET = "SECRET-outside-the-run-dir"


class Served:
    def __init__(self, root: Path) -> None:
        self.server = server.make_server(root, port=0)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def request(self, method: str, path: str, headers: dict[str, str] | None = None,
                body: Any = None) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            sent = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
            raw = None if body is None else json.dumps(body).encode()
            if raw is not None:
                sent.setdefault("Content-Type", "application/json")
            conn.request(method, path, body=raw, headers=sent)
            r = conn.getresponse()
            text = r.read()
            return r.status, json.loads(text) if r.getheader("Content-Type", "").startswith("application/json") \
                else {"html": text.decode()}
        finally:
            conn.close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    root = small_run(tmp_path / "run")
    (tmp_path / "secret.py").write_text(SECRET)
    # the pending program's source and a kept policy's file: links out of the run
    (root / "programs" / "it0003-c00.py").symlink_to(tmp_path / "secret.py")
    (root / "policies" / "it0001-c01" / "leak.bin").symlink_to(tmp_path / "secret.py")
    return root


@pytest.fixture
def served(run_dir: Path) -> Iterator[Served]:
    s = Served(run_dir)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def rollouts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Rollouts stand in for the engine's (tests/view/test_browser.py runs a real one)."""
    done: list[str] = []

    def fake(self: server.Rollouts, program_id: str) -> tuple[int, bytes]:
        done.append(program_id)
        return 200, json.dumps({"program_id": program_id, "success": 1.0}).encode()

    monkeypatch.setattr(server.Rollouts, "_run", fake)
    return done


def test_its_own_address_is_answered(served: Served) -> None:
    for host in (f"127.0.0.1:{served.port}", f"localhost:{served.port}", f"LOCALHOST:{served.port}"):
        status, body = served.request("GET", "/api/run", {"Host": host})
        assert status == 200 and len(body["programs"]) == 6, host


@pytest.mark.parametrize("host", ["evil.example:{port}", "evil.example", "127.0.0.1", "127.0.0.1:1",
                                  "localhost.evil.example:{port}", "10.0.0.1:{port}", ""])
def test_another_host_is_refused(served: Served, host: str) -> None:
    """A DNS name rebound to 127.0.0.1 sends its own name as Host."""
    for method, path in (("GET", "/"), ("GET", "/api/run"), ("GET", "/api/session"), ("POST", "/api/rollout")):
        status, body = served.request(method, path, {"Host": host.format(port=served.port)}, body={"id": "x"})
        assert status == 403 and "only to the address it listens on" in body["error"], (method, path)


def test_a_checked_header_sent_twice_is_refused(served: Served) -> None:
    """http.client cannot send a header twice; a raw request can (the first copy might pass
    one check and the second another)."""
    import socket

    own = f"127.0.0.1:{served.port}"
    for twice in (f"Host: {own}\r\nHost: evil.example", f"Host: {own}\r\nOrigin: http://{own}\r\nOrigin: null",
                  f"Host: {own}\r\nSec-Fetch-Site: same-origin\r\nSec-Fetch-Site: cross-site"):
        with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
            sock.sendall(f"GET /api/run HTTP/1.1\r\n{twice}\r\nConnection: close\r\n\r\n".encode())
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.0 400") and b"more than once" in answer, twice
    assert served.request("GET", "/api/run")[0] == 200


def test_another_site_is_refused(served: Served, rollouts: list[str]) -> None:
    token = served.request("GET", "/api/session")[1]["token"]
    for headers in ({"Origin": "http://evil.example"}, {"Origin": f"http://127.0.0.1:{served.port + 1}"},
                    {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}):
        for path in ("/api/run", "/api/session", "/api/program?id=it0000-c00"):
            assert served.request("GET", path, headers)[0] == 403, (headers, path)
        status, body = served.request("POST", "/api/rollout", {**headers, "X-Limen-Token": token},
                                      body={"id": "it0001-c01"})
        assert status == 403 and body["error"] == "a request from another site"
    assert rollouts == []
    # a link from another site may still open the page (it has no effect)
    status, body = served.request("GET", "/", {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
    assert status == 200 and "<html" in body["html"]
    # the page's own requests come from its own origin
    own = {"Origin": f"http://127.0.0.1:{served.port}", "Sec-Fetch-Site": "same-origin"}
    assert served.request("GET", "/api/run", own)[0] == 200


def test_a_rollout_is_a_post_with_the_sessions_token(served: Served, run_dir: Path, rollouts: list[str]) -> None:
    status, body = served.request("GET", "/api/rollout?id=it0001-c01")
    assert status == 405 and "POST" in body["error"]
    status, body = served.request("POST", "/api/rollout", body={"id": "it0001-c01"})
    assert status == 403 and "token" in body["error"]
    status, body = served.request("POST", "/api/rollout", {"X-Limen-Token": "guess"}, body={"id": "it0001-c01"})
    assert status == 403 and "token" in body["error"]
    assert rollouts == []
    token = served.request("GET", "/api/session")[1]["token"]
    assert len(token) >= 40
    status, body = served.request("POST", "/api/rollout", {"X-Limen-Token": token}, body={"id": "it0001-c01"})
    assert (status, body) == (200, {"program_id": "it0001-c01", "success": 1.0})
    assert rollouts == ["it0001-c01"]
    # what the token does not make right
    for sent in ({"id": 3}, ["it0001-c01"], {"id": "../../etc"}):
        status, _ = served.request("POST", "/api/rollout", {"X-Limen-Token": token}, body=sent)
        assert status in (400, 404), sent
    assert rollouts == ["it0001-c01"]
    # every server has its own token
    other = Served(run_dir)
    try:
        assert other.request("GET", "/api/session")[1]["token"] != token
    finally:
        other.close()


def test_a_link_out_of_the_run_is_not_shown(served: Served, run_dir: Path, tmp_path: Path) -> None:
    status, body = served.request("GET", "/api/program?id=it0003-c00")
    assert status == 200 and body["code"] == "" and SECRET not in json.dumps(body)
    status, body = served.request("GET", "/api/program?id=it0001-c01")
    assert [f["name"] for f in body["policy"]] == ["params.msgpack"]
    # --static: the same
    out = tmp_path / "page.html"
    done = subprocess.run([sys.executable, "-m", "limen_jax.view", str(run_dir), "--static", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert SECRET not in out.read_text() and "it0003-c00" in out.read_text()


def test_a_policy_folder_out_of_the_run_is_not_rolled_out(run_dir: Path, tmp_path: Path,
                                                          rollouts: list[str]) -> None:
    (tmp_path / "elsewhere").mkdir()
    (run_dir / "policies" / "it0000-c00").symlink_to(tmp_path / "elsewhere")
    s = Served(run_dir)
    try:
        token = s.request("GET", "/api/session")[1]["token"]
        status, body = s.request("POST", "/api/rollout", {"X-Limen-Token": token}, body={"id": "it0000-c00"})
        assert status == 404 and "link out of the run directory" in body["error"] and rollouts == []
    finally:
        s.close()


def test_run_files_that_are_links_out_of_it_are_refused(run_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere.jsonl").write_text(json.dumps({"event": "note", "text": SECRET}) + "\n")
    (run_dir / "events.jsonl").unlink()
    (run_dir / "events.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(data.RunDirError, match="events.jsonl is not a file inside the run directory"):
        data.load(run_dir)


def _rewrite_state(root: Path, change: Any) -> None:
    state = json.loads((root / "state.json").read_text())
    change(state)
    (root / "state.json").write_text(json.dumps(state))


def view_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "limen_jax.view", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize(("change", "says"), [
    (lambda s: s.update(iteration=10**9), "iteration 1000000000 is not a count of iterations"),
    (lambda s: s.update(iteration="3"), "iteration '3' is not a count of iterations"),
    (lambda s: s["archive"]["programs"][0].update(iteration=10**9), "has fields of the wrong type"),
    (lambda s: s["archive"]["programs"][0].update(curves={"success": ["a", "b"]}), "has fields of the wrong type"),
    (lambda s: s["archive"]["programs"][0].update(id=["x"]), "has fields of the wrong type"),
    (lambda s: s.update(usage=[1]), "usage must be a JSON object"),
    (lambda s: s["archive"]["grid"]["spec"].update(num_ast_bins=10**9), "larger than 1000000 cells"),
])
def test_a_malformed_checkpoint_is_a_message_quickly(run_dir: Path, tmp_path: Path, change: Any, says: str) -> None:
    _rewrite_state(run_dir, change)
    start = time.perf_counter()
    with pytest.raises(data.RunDirError, match=says):
        data.load(run_dir)
    assert time.perf_counter() - start < 1.0
    out = view_cli(run_dir, "--static", tmp_path / "page.html")
    assert out.returncode == 2 and says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "page.html").exists()


def test_wrong_typed_events_are_skipped_and_said(run_dir: Path, tmp_path: Path) -> None:
    bad = [{"event": "prompt", "id": "it0009-c00", "iteration": "lots", "island": 0},
           {"event": "prompt", "id": "it0009-c01", "iteration": 10**9},
           {"event": "response", "id": "it0000-c00", "cost_usd": "much", "cached": "no"},
           {"event": "migrate", "iteration": 1, "moves": [{"target": "a", "cell": [0], "program_id": 3}]},
           {"event": "iteration", "iteration": [1]},
           {"event": "evaluate", "id": {"a": 1}, "programs": "it0000-c00"}]
    with open(run_dir / "events.jsonl", "a") as fh:
        fh.write("\n" + "".join(json.dumps(e) + "\n" for e in bad))
    start = time.perf_counter()
    run = data.load(run_dir)
    summary = data.summary(run)
    assert time.perf_counter() - start < 1.0
    assert run.notes == [f"{run_dir / 'events.jsonl'}: skipped 6 events with fields of the wrong type (not written "
                         "by limen_jax)"]
    assert [p["id"] for p in summary["programs"]][-1] == "it0003-c00"  # the well-typed ones, as before
    assert [p["iteration"] for p in summary["progress"]] == [0, 1, 2]
    s = Served(run_dir)
    try:
        assert s.request("GET", "/api/run")[0] == 200
    finally:
        s.close()
    out = view_cli(run_dir, "--static", tmp_path / "page.html")
    assert out.returncode == 0 and "skipped 6 events" in out.stderr


def test_a_long_program_id_is_a_short_unique_tensorboard_folder() -> None:
    long = "x" * 300
    names = {_safe(i) for i in (long, long + "y", "a/../b", "a_.._b", "search", "it0001-c00")}
    assert len(names) == 6 and all(len(n) <= 77 and "/" not in n for n in names)
    assert _safe("it0001-c00") == "it0001-c00"


def test_a_fifo_in_place_of_a_program_does_not_hang(run_dir: Path) -> None:
    path = run_dir / "programs" / "it0003-c00.py"
    path.unlink()
    os.mkfifo(path)
    start = time.perf_counter()
    assert data.detail(data.load(run_dir), "it0003-c00")["code"] == ""
    assert time.perf_counter() - start < 1.0
