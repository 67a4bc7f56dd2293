"""kill -9 at different moments of a pipelined run (batch i+1 asked and checked while batch
i trains), then --resume: the finished run holds the same programs, parents, scores and
archive grid as a run never killed, and every line of events.jsonl parses. Besides three
moments found by polling, exact ones (tests/evolve/hooked.py): halfway through writing a
checkpoint, and a seeded draw of event boundaries, killed one after another in the same
run dir, each session a resume of the last."""

from __future__ import annotations

import json
import random
import signal
import subprocess
from pathlib import Path

import pytest
from cli_runs import checkpoint, events, evolve_argv, kill_9, logged, resume_cli, start_stalled
from test_evolve import summary, toy_config

import limen_jax as lj

CONFIG = toy_config(search={"iterations": 2, "pipeline": "on"})

MOMENTS = {
    "training the first batch": logged("program"),
    "after the first checkpoint": logged("iteration"),
    "checking the last batch": logged("response", "it0002"),
}


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    return lj.evolve("toy_corridor", CONFIG, run_dir=tmp_path_factory.mktemp("whole") / "run", verbose=False)


def same_run(run_dir: Path, whole) -> None:
    """Every line of the run's events.jsonl parses and the run finished as ``whole`` did."""
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        json.loads(line)  # every line parses (a torn one was cut back on resume)
    again = lj.resume(run_dir, verbose=False)
    assert again.complete
    assert summary(again) == summary(whole)
    assert [r.parent_ids for r in again.records] == [r.parent_ids for r in whole.records]
    assert again.archive.to_dict()["grid"] == whole.archive.to_dict()["grid"]


@pytest.mark.parametrize("moment", sorted(MOMENTS))
def test_kill_9_anywhere_then_resume_is_the_same_run(tmp_path, whole, moment):
    run_dir = tmp_path / "run"
    kill_9(run_dir, CONFIG, MOMENTS[moment])
    resume_cli(run_dir)
    same_run(run_dir, whole)


def kill_stalled(argv: list[str], where: str, flags: Path) -> None:
    """Run ``python -m limen_jax.evolve argv`` to the moment ``where`` and SIGKILL it there."""
    proc, _ = start_stalled(argv, where, flags, stderr=subprocess.DEVNULL)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def kill_in_turn(tmp_path: Path, whole, moments: list[str]) -> None:
    """Start the run, SIGKILL it at the first of ``moments`` (stall points of hooked.py),
    resume it and kill the resume at the next, and so on; then resume it to its end. A kill
    halfway through a checkpoint write leaves no state.json, half of one in state.json.tmp,
    and the one before in state.json.prev: the next session goes on from that and says so.
    The finished run is the run never killed."""
    run_dir = tmp_path / "run"
    said = ""
    for i, where in enumerate(moments):
        before = checkpoint(run_dir)
        argv = evolve_argv(run_dir, CONFIG) if i == 0 else ["--resume", str(run_dir)]
        kill_stalled(argv, where, tmp_path)
        kind, _, n = where.partition(":")
        if kind == "event":
            assert (run_dir / "events.jsonl").read_bytes().count(b"\n") >= int(n)
        else:  # state-torn
            assert not (run_dir / "state.json").exists() and (run_dir / "state.json.tmp").exists()
            prev = run_dir / "state.json.prev"
            if before is not None:  # what the session started from, kept as the previous copy
                assert json.loads(prev.read_text())["iteration"] >= before["iteration"]
            said = (f"resume: {run_dir / 'state.json'} is missing (a kill between two writes); using the previous "
                    "copy state.json.prev") if prev.exists() else ""
    out = resume_cli(run_dir)
    assert said in out.stdout
    same_run(run_dir, whole)


def seeded_events(whole, seed: int, kills: int, first: int = 2) -> list[str]:
    """``kills`` event boundaries of the whole run from line ``first`` on, drawn with ``seed``, in order."""
    total = len(events(whole.run_dir))
    return [f"event:{n}" for n in sorted(random.Random(seed).sample(range(first, total - 1), kills))]


def test_kill_9_at_a_random_event_then_in_a_checkpoint_write_then_resume_is_the_same_run(tmp_path, whole):
    """Killed at a seeded random event boundary after the first checkpoint, then its resume
    killed halfway through its first checkpoint write (so there is a previous copy)."""
    kill_in_turn(tmp_path, whole, [*seeded_events(whole, 27, 1, first=16), "state-torn:1"])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_9_at_many_random_moments_then_resume_is_the_same_run(tmp_path, whole, seed):
    """Five seeded random event boundaries, and a checkpoint write (the first of a session:
    on the first session, one with no previous copy) among them, each session a resume."""
    moments = seeded_events(whole, seed, 5)
    moments.insert(random.Random(seed).randrange(len(moments) + 1), "state-torn:1")
    kill_in_turn(tmp_path, whole, moments)
