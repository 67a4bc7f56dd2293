"""kill -9 at different moments of a pipelined run (batch i+1 asked and checked while batch
i trains), then --resume: the finished run holds the same programs, parents, scores and
archive grid as a run never killed, and every line of events.jsonl parses."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_evolve import summary, toy_config

import limen_jax as lj

HERE = Path(__file__).parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent.parent), str(HERE)])}
CONFIG = toy_config(search={"iterations": 2, "pipeline": "on"})


def events(run_dir: Path) -> list[dict]:
    path = run_dir / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    out = []
    for line in lines:
        with contextlib.suppress(json.JSONDecodeError):  # the line being written when polled
            out.append(json.loads(line))
    return out


MOMENTS = {
    "training the first batch": lambda log: any(e["event"] == "program" for e in log),
    "after the first checkpoint": lambda log: any(e["event"] == "iteration" for e in log),
    "checking the last batch": lambda log: any(e["event"] == "response" and e["id"].startswith("it0002")
                                               for e in log),
}


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    return lj.evolve("toy_task:ToyCorridor", CONFIG, run_dir=tmp_path_factory.mktemp("whole") / "run", verbose=False)


@pytest.mark.parametrize("moment", sorted(MOMENTS))
def test_kill_9_anywhere_then_resume_is_the_same_run(tmp_path, whole, moment):
    run_dir = tmp_path / "run"
    (tmp_path / "cfg.json").write_text(json.dumps(CONFIG))
    proc = subprocess.Popen([sys.executable, "-m", "limen_jax.evolve", "--task", "toy_task:ToyCorridor", "--config",
                             str(tmp_path / "cfg.json"), "--run-dir", str(run_dir)],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and not MOMENTS[moment](events(run_dir)):
        time.sleep(0.01)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    out = subprocess.run([sys.executable, "-m", "limen_jax.evolve", "--resume", str(run_dir)], env=ENV,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        json.loads(line)  # every line parses (a torn one was cut back on resume)
    again = lj.resume(run_dir, verbose=False)
    assert summary(again) == summary(whole)
    assert [r.parent_ids for r in again.records] == [r.parent_ids for r in whole.records]
    assert again.archive.to_dict()["grid"] == whole.archive.to_dict()["grid"]
