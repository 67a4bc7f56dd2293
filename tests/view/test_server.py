"""The viewer's server: its routes, nothing outside them, and a live run followed."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from view_runs import small_run

from limen_jax.view.server import make_server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = small_run(tmp_path / "run")
    (tmp_path / "secret.txt").write_text("outside the run dir")
    server = make_server(root, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host}:{port}", root
    finally:
        server.shutdown()
        server.server_close()


def get(url: str, method: str = "GET") -> tuple[int, bytes, str]:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Content-Type", "")


def test_binds_to_localhost_by_default(served: tuple[str, Path]) -> None:
    assert served[0].startswith("http://127.0.0.1:")


def test_routes(served: tuple[str, Path]) -> None:
    base, _ = served
    status, body, ctype = get(base + "/")
    assert status == 200 and ctype.startswith("text/html") and b'src="static/app.js"' in body
    assert b"script-src 'self'" in body  # the policy: no inline script runs
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css"), ("plotly.min.js", "text/javascript")):
        status, body, ctype = get(f"{base}/static/{name}")
        assert status == 200 and ctype.startswith(kind) and len(body) > 1000
    status, body, _ = get(base + "/api/run")
    run = json.loads(body)
    assert status == 200 and len(run["programs"]) == 6 and run["run"]["live"] is True
    status, body, _ = get(base + "/api/program?id=it0001-c01")
    assert status == 200 and json.loads(body)["parents"][1]["id"] == "it0000-c01"
    status, body, _ = get(base + "/api/stamp")
    assert status == 200 and json.loads(body)["stamp"] == run["stamp"]
    # a rollout needs a kept policy (tests/view/test_browser.py rolls out a real one; test_guard.py the token)
    token = json.loads(get(base + "/api/session")[1])["token"]
    for pid, says in (("it0001-c01", "no kept policy for 'it0001-c01'"), ("../../etc", "no program '../../etc'")):
        req = urllib.request.Request(base + "/api/rollout", method="POST", data=json.dumps({"id": pid}).encode(),
                                     headers={"Content-Type": "application/json", "X-Limen-Token": token})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 404 and says in json.loads(err.value.read())["error"]


@pytest.mark.parametrize("path", [
    "/state.json", "/config.json", "/programs/it0000-c00.py", "/static/../state.json", "/static/..%2fstate.json",
    "/static/%2e%2e/%2e%2e/secret.txt", "/../secret.txt", "/static/index.html", "/static/data.py",
    "/api/program?id=../secret", "/api/program?id=..%2F..%2Fsecret", "/api/program?id=", "/api/nothing",
    "/etc/passwd",
])
def test_nothing_else_is_served(served: tuple[str, Path], path: str) -> None:
    status, body, _ = get(served[0] + path)
    assert status == 404
    assert b"outside the run dir" not in body and b"get_observation" not in body


def test_read_only(served: tuple[str, Path]) -> None:
    for method in ("POST", "PUT", "DELETE"):
        assert get(served[0] + "/api/run", method)[0] == 405
    assert get(served[0] + "/api/rollout?id=it0001-c01")[0] == 405


def test_follows_a_live_run(served: tuple[str, Path]) -> None:
    base, root = served
    before = json.loads(get(base + "/api/run")[1])
    # the run finishes the pending program and checkpoints: the stamp moves, the summary follows
    state = json.loads((root / "state.json").read_text())
    rec = dict(state["archive"]["programs"][0], id="it0003-c00", iteration=3, island=1, parent_ids=["it0001-c01"],
               success=0.8)
    state["archive"]["programs"].append(rec)
    state["iteration"] = 3
    (root / "state.json").write_text(json.dumps(state))
    with open(root / "events.jsonl", "a") as fh:
        fh.write('\n{"event": "run_end", "stopped": "finished", "best": "it0003-c00"}\n')
    stamp = json.loads(get(base + "/api/stamp")[1])["stamp"]
    assert stamp != before["stamp"]
    after = json.loads(get(base + "/api/run")[1])
    node = next(p for p in after["programs"] if p["id"] == "it0003-c00")
    assert (node["stage"], node["success"], after["run"]["live"], after["stamp"]) == ("full", 0.8, False, stamp)
    assert after["progress"][-1]["best"] == 0.8


def test_a_bad_rewrite_keeps_the_last_good_run(served: tuple[str, Path]) -> None:
    base, root = served
    get(base + "/api/run")
    (root / "state.json").write_text("{")
    status, body, _ = get(base + "/api/run")
    assert status == 200 and len(json.loads(body)["programs"]) == 6
