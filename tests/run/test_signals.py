"""Interrupts are a normal stop: a real SIGINT or SIGTERM sent to a real `python -m
limen_jax.evolve` in each phase (asking the LLM, checking, compiling, training, writing a
checkpoint) stops it at its next safe point with the resume command and exit status 130 /
143 (no traceback, no abort from XLA's threads), a second SIGINT too, and `--resume` then
finishes the same run as one never interrupted. A SIGINT while the run starts says what it
left: the resume command (which works), or that nothing was recorded (a directory half
made by the command removed). The moments that polling cannot catch (an XLA compile, a
checkpoint being written) are exact stall points of tests/evolve/hooked.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from cli_runs import evolve_argv, start_stalled
from llm.fake_anthropic import FakeAnthropic, Reply
from test_evolve import summary, toy_config

import limen_jax as lj

HERE = Path(__file__).parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent.parent), str(HERE.parent / "evolve")])}
CONFIG = toy_config(search={"iterations": 1, "pipeline": "off"})


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    return lj.evolve("toy_corridor", CONFIG, run_dir=tmp_path_factory.mktemp("whole") / "run", verbose=False)


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
    cmd = [sys.executable, "-m", "limen_jax.evolve", "--task", "toy_corridor", "--config",
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


def resumed_equals_whole(run_dir: Path, whole, env: dict[str, str] | None = None) -> str:
    """``--resume`` as printed finishes the run as ``whole`` finished; returns its stderr."""
    out = subprocess.run([sys.executable, "-m", "limen_jax.evolve", "--resume", str(run_dir)], env=env or ENV,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    again = lj.resume(run_dir, verbose=False)  # finished: loads it back
    assert summary(again) == summary(whole)
    assert [r.parent_ids for r in again.records] == [r.parent_ids for r in whole.records]
    assert again.archive.to_dict()["grid"] == whole.archive.to_dict()["grid"]
    return out.stderr


def send(proc: subprocess.Popen[str], sig: int) -> str:
    """Send ``sig`` and return the process's stderr up to the line its handler prints (so
    the handler has run when this returns); read from the pipe itself, so that what follows
    is left for ``communicate``."""
    proc.send_signal(sig)
    fd, said = proc.stderr.fileno(), b""  # type: ignore[union-attr]
    while b"stopping at the next safe point" not in said:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        said += chunk
    return said.decode()


def stopped_cleanly(run_dir: Path, proc: subprocess.Popen[str], sig: int, said: str) -> str:
    """The process stopped by ``sig`` (``said``: its stderr read so far) at a safe point:
    its exit status, message, resume command and last events; returns its stderr."""
    out, err = proc.communicate(timeout=120)
    err = said + err
    text = out + err
    assert "Traceback" not in text and "terminate called" not in text and "FATAL" not in text, text[-3000:]
    assert proc.returncode == 128 + sig, err[-2000:]
    assert f"{signal.Signals(sig).name}: stopping at the next safe point" in err, err[-2000:]
    assert f"resume with python -m limen_jax.evolve --resume {run_dir}" in err, err[-2000:]
    log = events(run_dir)
    assert [e["event"] for e in log][-2:] == ["interrupted", "run_end"]
    assert log[-2]["signal"] == signal.Signals(sig).name and log[-2]["at_once"] is False
    return err


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
import limen_jax.run.state, limen_jax.rundir, limen_jax.run.run_demos
from limen_jax.run.cli import main
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
    "before anything is written": ("limen_jax.run.run_demos.RunDemos.check = stall",
                                   "nothing was recorded yet; run the same command again"),
    "with the run dir made, no config in it": ("limen_jax.rundir.RunDir.write_json = stall_config",
                                               "nothing was recorded yet; removed the half-made {run}; "
                                               "run the same command again"),
    "with the config written": ("limen_jax.run.state._ppo_config = stall",
                                "nothing was lost; resume with python -m limen_jax.evolve --resume {run}"),
}


@pytest.mark.parametrize("where", sorted(STARTS))
def test_a_ctrl_c_while_starting_says_what_it_left(tmp_path, where):
    patch, said = STARTS[where]
    run_dir, mark = tmp_path / "run", tmp_path / "stalled"
    (tmp_path / "cfg.json").write_text(json.dumps(toy_config(search={"iterations": 0, "candidates": 1, "seeds": 1})))
    argv = ["--task", "toy_corridor", "--config", str(tmp_path / "cfg.json"), "--run-dir", str(run_dir)]
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


# --- the phases polling cannot catch: an LLM call in flight, an XLA compile, a checkpoint write ---

PROGRAMS = [f"""```python
import jax.numpy as jnp


def get_observation(state):
    return jnp.array([state.pos / 10.0, state.goal / 10.0{extra}], dtype=jnp.float32)


def compute_reward(state, action, next_state):
    return (jnp.abs(state.goal - state.pos) - jnp.abs(next_state.goal - next_state.pos)).astype(jnp.float32)
```""" for extra in ("", ", state.step_num / 16.0")]
LLM_CONFIG = toy_config(search={"iterations": 0, "pipeline": "off"},
                        llm={"mutator": "anthropic", "max_tokens": 200, "max_retries": 0})


class Model:
    """A fake model behind the Messages API: each answer is one of :data:`PROGRAMS`, chosen
    by the request (so a resumed run is told what an uninterrupted one was), after ``delay``
    seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def __call__(self, body: dict) -> Reply:
        prompt = json.dumps(body["messages"], sort_keys=True).encode()
        return Reply(PROGRAMS[zlib.crc32(prompt) % len(PROGRAMS)], delay=self.delay)


@pytest.fixture(scope="module")
def whole_llm(tmp_path_factory):
    with FakeAnthropic(responder=Model()) as fake, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANTHROPIC_API_KEY", "test-key")
        mp.setenv("ANTHROPIC_BASE_URL", fake.url)
        return lj.evolve("toy_corridor", LLM_CONFIG, run_dir=tmp_path_factory.mktemp("llm") / "run",
                         verbose=False)


def test_a_ctrl_c_while_the_llm_answers_stops_the_run_resumably(tmp_path, whole_llm):
    """A SIGINT while the first batch's calls are in flight (the fake model answers after a
    minute) stops the run without waiting for them; the resume asks again."""
    run_dir = tmp_path / "run"
    model = Model(delay=60.0)
    with FakeAnthropic(responder=model) as fake:
        env = {**ENV, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake.url}
        proc = subprocess.Popen([sys.executable, "-m", "limen_jax.evolve", *evolve_argv(run_dir, LLM_CONFIG)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None and fake.posts < 2:
            time.sleep(0.02)
        assert proc.poll() is None and fake.posts == 2, proc.communicate()[1][-2000:]  # both calls in flight
        started = time.time()
        stopped_cleanly(run_dir, proc, signal.SIGINT, send(proc, signal.SIGINT))
        assert time.time() - started < 30  # not after the answers
        names = [e["event"] for e in events(run_dir)]
        assert names.count("prompt") == 2 and "response" not in names
        assert not (run_dir / "state.json").exists()
        model.delay = 0.0
        resumed_equals_whole(run_dir, whole_llm, env)
    assert fake.posts == 2 + len(whole_llm.records)  # the two lost calls asked again, and the rest


@pytest.mark.parametrize(("where", "sig"), [("compile", signal.SIGTERM), ("state:1", signal.SIGINT)])
def test_a_signal_while_compiling_or_writing_stops_at_the_next_safe_point(tmp_path, whole, where, sig):
    """compile: SIGTERM while the first batch's kernel compiles (XLA busy on the evaluation
    and compile-ahead threads): the batch is abandoned. state:1: SIGINT while the first
    checkpoint is half written: the write finishes, then the run stops with batch 0 kept."""
    run_dir = tmp_path / "run"
    proc, go = start_stalled(evolve_argv(run_dir, CONFIG), where, tmp_path, env=ENV)
    said = send(proc, sig)
    go.touch()  # the handler has run: a stalled write goes on (the stalled compile is abandoned)
    stopped_cleanly(run_dir, proc, sig, said)
    state = json.loads((run_dir / "state.json").read_text()) if (run_dir / "state.json").exists() else None
    if where == "compile":  # batch 0 was submitted, then abandoned
        names = [e["event"] for e in events(run_dir)]
        assert state is None and "program" in names and "iteration" not in names
    else:  # recorded and checkpointed before it stopped
        assert state is not None and state["iteration"] == 0
        assert [e["event"] for e in events(run_dir)][-3:] == ["iteration", "interrupted", "run_end"]
    resumed_equals_whole(run_dir, whole)
    resumes = [e["from_iteration"] for e in events(run_dir) if e["event"] == "run_resume"]
    # (the last one is lj.resume loading the finished run back); with no checkpoint it started over
    assert resumes[:-1] == ([] if state is None else [1])


@pytest.mark.slow
def test_a_second_ctrl_c_while_writing_a_checkpoint_stops_at_once_still_resumably(tmp_path, whole):
    """The second SIGINT stops at once, even halfway through a checkpoint write (the first
    one's, so no previous copy): what the kill left is cleaned up by the resume."""
    run_dir = tmp_path / "run"
    proc, _ = start_stalled(evolve_argv(run_dir, CONFIG), "state-torn:1", tmp_path, env=ENV)
    said = send(proc, signal.SIGINT)
    proc.send_signal(signal.SIGINT)  # raised in the stalled write, on the main thread
    out, err = proc.communicate(timeout=120)
    err = said + err
    assert proc.returncode == 130 and "Traceback" not in out + err, err[-2000:]
    assert f"resume with python -m limen_jax.evolve --resume {run_dir}" in err
    log = events(run_dir)
    assert [e["event"] for e in log][-2:] == ["interrupted", "run_end"] and log[-2]["at_once"] is True
    assert not (run_dir / "state.json").exists()
    resumed_equals_whole(run_dir, whole)
