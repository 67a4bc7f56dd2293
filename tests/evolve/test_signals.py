"""Interrupts are a normal stop: a real SIGINT or SIGTERM sent to a real `python -m
limen_jax.evolve` while it checks or trains stops it at once with the resume command and
exit status 130 / 143 (no traceback, no abort from XLA's threads), a second SIGINT too, and
`--resume` then finishes the same run as one never interrupted."""

from __future__ import annotations

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
CONFIG = toy_config(search={"iterations": 1, "pipeline": "off"})


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    return lj.evolve("toy_task:ToyCorridor", CONFIG, run_dir=tmp_path_factory.mktemp("whole") / "run", verbose=False)


def events(run_dir: Path) -> list[dict]:
    path = run_dir / "events.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def checking(log: list[dict]) -> bool:
    names = [e["event"] for e in log]
    return "response" in names and "program" not in names


def training(log: list[dict]) -> bool:
    names = [e["event"] for e in log]
    return "program" in names and "iteration" not in names


def interrupt(tmp_path: Path, when, signals: list[int]) -> tuple[Path, int, str]:
    run_dir = tmp_path / "run"
    (tmp_path / "cfg.json").write_text(json.dumps(CONFIG))
    cmd = [sys.executable, "-m", "limen_jax.evolve", "--task", "toy_task:ToyCorridor", "--config",
           str(tmp_path / "cfg.json"), "--run-dir", str(run_dir)]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and not when(events(run_dir)):
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    for s in signals:
        proc.send_signal(s)
        time.sleep(0.05)
    out, err = proc.communicate(timeout=120)
    text = out + err
    assert "Traceback" not in text and "terminate called" not in text and "FATAL" not in text, text[-3000:]
    assert f"resume with python -m limen_jax.evolve --resume {run_dir}" in err, err[-2000:]
    return run_dir, proc.returncode, err


def resumed_equals_whole(run_dir: Path, whole) -> None:
    out = subprocess.run([sys.executable, "-m", "limen_jax.evolve", "--resume", str(run_dir)], env=ENV,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    again = lj.resume(run_dir, verbose=False)  # finished: loads it back
    assert summary(again) == summary(whole)
    assert again.archive.to_dict()["grid"] == whole.archive.to_dict()["grid"]


@pytest.mark.parametrize(("phase", "when", "sig", "code"), [
    ("checking", checking, signal.SIGINT, 130),
    ("training", training, signal.SIGTERM, 143),
])
def test_a_signal_stops_the_run_resumably(tmp_path, whole, phase, when, sig, code):
    run_dir, status, err = interrupt(tmp_path, when, [sig])
    assert status == code, err[-2000:]
    assert f"{signal.Signals(sig).name}: stopping at the next safe point" in err
    log = events(run_dir)
    assert log[-1]["event"] == "run_end" and log[-2]["event"] == "interrupted"
    assert log[-2]["signal"] == signal.Signals(sig).name and log[-2]["at_once"] is False
    assert not (run_dir / "state.json").exists()  # batch 0 was abandoned, not half recorded
    resumed_equals_whole(run_dir, whole)


def test_a_second_ctrl_c_is_still_a_clean_stop(tmp_path, whole):
    run_dir, status, err = interrupt(tmp_path, training, [signal.SIGINT, signal.SIGINT])
    assert status == 130 and [e["event"] for e in events(run_dir)][-2:] == ["interrupted", "run_end"]
    resumed_equals_whole(run_dir, whole)
