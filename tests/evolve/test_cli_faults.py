"""The evolve CLI on a bad day: replay is one command (the recorded run's config), a
different task is refused up front, --resume refuses what is not a run (creating nothing)
and a changed task."""

from __future__ import annotations

import json

from test_evolve import summary, toy_config

import limen_jax as lj
from limen_jax.evolve import main


def test_replay_takes_the_recorded_runs_config_and_refuses_another_task(tmp_path, capsys):
    cfg = toy_config(search={"iterations": 1, "candidates": 2, "seeds": 1})
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    first = tmp_path / "first"
    assert main(["--task", "toy_task:ToyCorridor", "--config", str(tmp_path / "cfg.json"), "--seed", "7",
                 "--run-dir", str(first)]) == 0
    capsys.readouterr()
    again = tmp_path / "again"
    assert main(["--replay-from", str(first), "--run-dir", str(again)]) == 0  # no --task, no config, no seed
    out = capsys.readouterr().out
    assert f"replay: the recorded run's task, configuration and seed (toy_task:ToyCorridor, seed 7) from {first}" in out
    recorded, replayed = lj.resume(first, verbose=False), lj.resume(again, verbose=False)
    assert summary(replayed) == summary(recorded)
    saved = json.loads((again / "config.json").read_text())
    assert saved["seed"] == 7 and saved["llm"]["mutator"] == "replay"
    assert {k: saved["cascade"][k] for k in cfg["cascade"]} == cfg["cascade"]
    # the README's form, with the same task, works too; another task is refused before anything is made
    assert main(["--task", "toy_task:ToyCorridor", "--replay-from", str(first), "--run-dir", str(tmp_path / "r3")]) == 0
    capsys.readouterr()
    assert main(["--task", "xland_easy", "--replay-from", str(first), "--run-dir", str(tmp_path / "r4")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "replays a run of task 'toy_task:ToyCorridor', not 'xland_easy'" in err
    assert not (tmp_path / "r4").exists()


def test_resume_refuses_what_is_not_a_run_and_a_changed_task(tmp_path, capsys):
    nothing = tmp_path / "not_a_run"
    assert main(["--resume", str(nothing)]) == 2
    assert "holds no config.json: not a limen_jax run directory" in capsys.readouterr().err
    assert not nothing.exists()  # nothing created
    run = tmp_path / "run"
    (tmp_path / "cfg.json").write_text(json.dumps(toy_config(search={"iterations": 0, "candidates": 1, "seeds": 1})))
    assert main(["--task", "toy_task:ToyCorridor", "--config", str(tmp_path / "cfg.json"), "--run-dir", str(run)]) == 0
    capsys.readouterr()
    assert main(["--resume", str(run), "--task", "xland_easy"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the run's task is 'toy_task:ToyCorridor'; --task xland_easy would change it" in err
    assert main(["--resume", str(run), "--mode", "obs_only"]) == 2
    assert "search.mode" in capsys.readouterr().err


def test_config_json_records_the_mutator_that_ran_and_a_resume_keeps_it(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    run = tmp_path / "run"
    lj.evolve("toy_corridor", toy_config(llm={"mutator": "auto"}, search={"iterations": 1}), run_dir=run,
              verbose=False)
    saved = json.loads((run / "config.json").read_text())
    assert saved["llm"]["mutator"] == "offline"  # what "auto" stood for, not "auto"
    start = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()][0]
    assert start["event"] == "run_start" and start["config"]["llm"]["mutator"] == "offline"
    # a key set later does not switch the run to Claude (the bogus key would fail any call)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-not-a-key")
    assert main(["--resume", str(run), "--iterations", "2"]) == 0
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    later = [e for e in events if e["event"] == "response" and e["id"].startswith("it0002")]
    assert later and {e["mutator"] for e in later} == {"offline"}
    assert json.loads((run / "config.json").read_text())["llm"]["mutator"] == "offline"
