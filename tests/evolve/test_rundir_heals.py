"""A run dir damaged by a kill heals on resume and never lies: a torn last event line is cut
back to the last complete record (and the cut logged), and a damaged checkpoint falls back
to the previous good copy with a message naming the file."""

from __future__ import annotations

import json

import pytest
from test_evolve import summary, toy_config

import limen_jax as lj
from limen_jax.rundir import RunDir


def test_a_torn_last_event_line_is_cut_back_and_the_cut_logged(tmp_path):
    rd = RunDir(tmp_path / "r")
    rd.log("one", x=1)
    with open(rd.events_path, "a") as fh:
        fh.write('{"event": "two", "x": [1, 2')  # killed mid-write
    again = RunDir(tmp_path / "r")
    again.log("three")
    lines = rd.events_path.read_text().splitlines()
    events = [json.loads(line) for line in lines]  # every line parses
    assert [e["event"] for e in events] == ["one", "events_repaired", "three"]
    assert events[1]["cut"] == '{"event": "two", "x": [1, 2' and events[1]["cut_bytes"] == 27
    assert "torn by a kill" in again.notes[0]
    RunDir(tmp_path / "r")  # a whole file is left alone
    assert len(rd.events_path.read_text().splitlines()) == 3


def test_json_keeps_the_previous_copy_and_falls_back_to_it(tmp_path):
    rd = RunDir(tmp_path / "r")
    assert rd.read_json("state.json") is None
    rd.write_json("state.json", {"iteration": 0})
    rd.write_json("state.json", {"iteration": 1})
    assert json.loads((rd.path / "state.json.prev").read_text()) == {"iteration": 0}
    (rd.path / "state.json").write_text('{"iteration": 2, "archive": {"pro')  # damaged
    fresh = RunDir(tmp_path / "r")
    assert fresh.read_json("state.json") == {"iteration": 0}
    assert "state.json is damaged" in fresh.notes[0] and "state.json.prev" in fresh.notes[0]
    (rd.path / "state.json.prev").write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match=r"cannot read .*state.json .* or .*state.json.prev"):
        RunDir(tmp_path / "r").read_json("state.json")


def test_a_run_with_a_damaged_checkpoint_resumes_from_the_previous_one(tmp_path, capsys):
    whole = lj.evolve("toy_corridor", toy_config(), run_dir=tmp_path / "whole", verbose=False)
    run_dir = tmp_path / "damaged"
    lj.evolve("toy_corridor", toy_config(), run_dir=run_dir, verbose=False)
    state = run_dir / "state.json"
    assert json.loads(state.read_text())["iteration"] == 1
    state.write_text(state.read_text()[: len(state.read_text()) // 2])  # torn by a disk fault
    with open(run_dir / "events.jsonl", "a") as fh:
        fh.write('{"event": "score", "id": "it00')
    again = lj.resume(run_dir)
    out = capsys.readouterr().out
    assert "state.json is damaged" in out and "torn by a kill" in out
    assert summary(again) == summary(whole)  # iteration 1 ran again from iteration 0's checkpoint
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    names = [e["event"] for e in events]
    assert "checkpoint_fallback" in names and "events_repaired" in names
    assert [e["from_iteration"] for e in events if e["event"] == "run_resume"] == [1]
