"""Interrupts are a normal stop: a real SIGINT or SIGTERM sent to a real `python -m
limen_jax.evolve` while it checks or trains stops it at once with the resume command and
exit status 130 / 143 (no traceback, no abort from XLA's threads), a second SIGINT too, and
`--resume` then finishes the same run as one never interrupted. A SIGINT while the run
starts says what it left: the resume command (which works), or that nothing was recorded
(a directory half made by the command removed)."""

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


# run in a fresh interpreter: ``patch`` makes one step of the start stall (after touching
# ``mark``) until the test's SIGINT arrives
STALL = """
import pathlib, sys, time
import limen_jax.loop, limen_jax.rundir
from limen_jax.evolve import main
def stall(*args, **kwargs):
    pathlib.Path({mark!r}).touch()
    time.sleep(120)
write_json = limen_jax.rundir.RunDir.write_json
def stall_config(self, name, data):
    if name == "config.json":
        stall()
    write_json(self, name, data)
{patch}
sys.exit(main({argv!r}))
"""
STARTS = {  # where the start stalls -> what the interrupt says it left
    "before anything is written": ("limen_jax.loop.Loop._check_demos = stall",
                                   "nothing was recorded yet; run the same command again"),
    "with the run dir made, no config in it": ("limen_jax.rundir.RunDir.write_json = stall_config",
                                               "nothing was recorded yet; removed the half-made {run}; "
                                               "run the same command again"),
    "with the config written": ("limen_jax.loop.Loop._ppo_config = stall",
                                "nothing was lost; resume with python -m limen_jax.evolve --resume {run}"),
}


@pytest.mark.parametrize("where", sorted(STARTS))
def test_a_ctrl_c_while_starting_says_what_it_left(tmp_path, where):
    patch, said = STARTS[where]
    run_dir, mark = tmp_path / "run", tmp_path / "stalled"
    (tmp_path / "cfg.json").write_text(json.dumps(toy_config(search={"iterations": 0, "candidates": 1, "seeds": 1})))
    argv = ["--task", "toy_task:ToyCorridor", "--config", str(tmp_path / "cfg.json"), "--run-dir", str(run_dir)]
    code = STALL.format(mark=str(mark), patch=patch, argv=argv)
    proc = subprocess.Popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and not mark.exists():
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert err.endswith(f"\ninterrupted while starting: {said.format(run=run_dir)}\n"), err[-2000:]
    if "--resume" not in said:
        assert not run_dir.exists()
        return
    resume = err.strip().splitlines()[-1].split("resume with ")[1]  # the command as printed
    out = subprocess.run([sys.executable, *resume.split()[1:]], env=ENV, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and events(run_dir)[-1]["complete"] is True, out.stderr[-2000:]
