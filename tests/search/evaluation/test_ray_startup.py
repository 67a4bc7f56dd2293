"""A local Ray cluster the evaluator starts listens on the loopback address only, and the
token that lets anyone run code on it is private (0600), in a fresh process with its own
home folder (Ray writes ``~/.ray/auth_token`` for a new cluster)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

PROBE = r"""
import json, os, psutil, ray
from limen_jax.search.evaluation.ray_evaluator import RayEvaluator
ev = RayEvaluator(actors=1)
node = ray._private.worker._global_node
mine = {p.pid for p in psutil.Process().children(recursive=True)} | {os.getpid()}
# every process of the session: the driver, its children, and the ones Ray started detached
session = [p for p in psutil.process_iter(["pid", "cmdline"])
           if p.info["pid"] in mine or any(node.address_info["session_dir"] in a for a in (p.info["cmdline"] or []))]
listening = sorted({c.laddr.ip for p in session for c in p.net_connections("inet") if c.status == "LISTEN"})
print(json.dumps({"node_ip": node.node_ip_address, "gcs": node.gcs_address, "listening": listening}))
ev.close()
"""


def test_a_local_cluster_listens_on_loopback_and_its_token_is_private(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["node_ip"] == "127.0.0.1" and seen["gcs"].startswith("127.0.0.1:")
    assert seen["listening"] and all(ip in ("127.0.0.1", "::ffff:127.0.0.1") for ip in seen["listening"]), seen
    token = tmp_path / ".ray" / "auth_token"
    assert token.is_file() and stat.S_IMODE(token.stat().st_mode) == 0o600
    assert stat.S_IMODE(token.parent.stat().st_mode) == 0o700
