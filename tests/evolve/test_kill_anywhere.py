"""kill -9 at different moments of a pipelined run (batch i+1 asked and checked while batch
i trains), then --resume: the finished run holds the same programs, parents, scores and
archive grid as a run never killed, and every line of events.jsonl parses."""

from __future__ import annotations

import json

import pytest
from cli_runs import kill_9, logged, resume_cli
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
    return lj.evolve("toy_task:ToyCorridor", CONFIG, run_dir=tmp_path_factory.mktemp("whole") / "run", verbose=False)


@pytest.mark.parametrize("moment", sorted(MOMENTS))
def test_kill_9_anywhere_then_resume_is_the_same_run(tmp_path, whole, moment):
    run_dir = tmp_path / "run"
    kill_9(run_dir, CONFIG, MOMENTS[moment])
    resume_cli(run_dir)
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        json.loads(line)  # every line parses (a torn one was cut back on resume)
    again = lj.resume(run_dir, verbose=False)
    assert summary(again) == summary(whole)
    assert [r.parent_ids for r in again.records] == [r.parent_ids for r in whole.records]
    assert again.archive.to_dict()["grid"] == whole.archive.to_dict()["grid"]
