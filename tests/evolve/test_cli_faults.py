"""The evolve CLI on a bad day: replay is one command (the recorded run's config), a
different task is refused up front, --resume refuses what is not a run (creating nothing)
and a changed task; every bad input is one line, exit 2, and leaves every file as it was."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import cli_env
from test_evolve import summary, toy_config

import limen_jax as lj
from limen_jax.config import RESUMABLE, EvolveConfig
from limen_jax.llm.factory import settled
from limen_jax.run.cli import main

TOY = "--task toy_corridor "
REFUSED = "{run} holds a run with another config (differs in %s); a resume may change only " + \
    ", ".join(sorted(RESUMABLE)) + "; or choose a new --run-dir"
NO_KEY = ("ANTHROPIC_API_KEY is not set: export it to use Claude, or run with --mutator offline (no network) or "
          "--mutator replay --replay-from RUN_DIR (a recorded run's answers).")
ZERO_STEPS = "cascade.full_steps must be a whole number >= 1, got 0"
NOT_AN_OBJECT = "--config {inputs}/list.json: expected a JSON object of config overrides, not a list"
# flags -> the one line on stderr; {inputs}: the files below, {run}: a run with its config.json
BAD_INPUT = {
    "zero full steps": (TOY + "--full-steps 0", ZERO_STEPS),
    "negative short steps": (TOY + "--short-steps -1", "cascade.short_steps must be a whole number >= 0, got -1"),
    "zero steps by --set": (TOY + "--set cascade.full_steps=0", ZERO_STEPS),
    "zero steps in --config": (TOY + "--config {inputs}/zero_steps.json", ZERO_STEPS),
    "fractional steps": (TOY + "--set cascade.full_steps=1.5",
                         "CascadeConfig.full_steps: expected an integer, got 1.5"),
    "zero seeds": (TOY + "--seeds 0", "search.seeds must be a whole number >= 1, got 0"),
    "a string for a number": (TOY + "--set llm.timeout_s=abc", "LLMConfig.timeout_s: expected a number, got 'abc'"),
    "a value for a section": (TOY + "--set cascade=3", "EvolveConfig.cascade: expected a mapping of its fields, got 3"),
    "--config a directory": (TOY + "--config {inputs}", "--config {inputs}: cannot read it (Is a directory)"),
    "--config missing": (TOY + "--config {inputs}/none.json",
                         "--config {inputs}/none.json: cannot read it (No such file or directory)"),
    "--config a list": (TOY + "--config {inputs}/list.json", NOT_AN_OBJECT),
    "--config not JSON": (TOY + "--config {inputs}/bad.json", "--config {inputs}/bad.json: not a JSON file "
                          "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    "anthropic without a key": (TOY + "--mutator anthropic", NO_KEY),
    "a task without a catalog": ("--task toy_task:ToyCorridorNoCatalog --mutator offline",
                                 "task 'toy_corridor' has no offline catalog; use an LLM mutator "
                                 "(set ANTHROPIC_API_KEY or OPENAI_API_KEY)"),
    "a missing replay cache": (TOY + "--replay-from {inputs}/no_run",
                               "nothing to replay at {inputs}/no_run: expected a run directory or its llm_cache.jsonl"),
    "prescreen with no expert": (TOY + "--prescreen demos", "--prescreen demos: task 'toy_corridor' has no scripted "
                                 "expert to build demonstrations from; supply them with --demos PATH "
                                 "(python -m limen_jax.demos --from-policy writes them from a trained policy)"),
    "no Ray actors": (TOY + "--evaluator ray --ray-actors 0", "Ray actors (--ray-actors): at least 1, got 0"),
    "a malformed Ray address": (TOY + "--evaluator ray --ray-address head",
                                "Ray address 'head' (--ray-address): expected auto, local, HOST:PORT or "
                                "ray://HOST:PORT"),
    "Ray flags without Ray": (TOY + "--ray-actors 2", "--ray-address and --ray-actors need --evaluator ray"),
    "a run dir that is a file": (TOY + "--run-dir {inputs}/list.json",
                                 "{inputs}/list.json/config.json: cannot read: Not a directory"),
    "resume with another seed": ("--resume {run} --seed 3", REFUSED % "seed"),
    "resume with another preset": ("--resume {run} --preset paper", REFUSED % "preset"),
    "resume with another --config": ("--resume {run} --config {inputs}/more_steps.json",
                                     REFUSED % "cascade.full_steps"),
    "resume with a bad --config": ("--resume {run} --config {inputs}/list.json", NOT_AN_OBJECT),
    "resume a run of Claude without a key": ("--resume {inputs}/claude", "{inputs}/claude is a run of Claude "
                                             "(llm.mutator anthropic) and ANTHROPIC_API_KEY is not set: export it, "
                                             "then resume again"),
    "resume elsewhere": ("--resume {run} --run-dir {inputs}/x",
                         "--run-dir: a resumed run stays in its own directory ({run}); leave --run-dir out"),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The files the bad commands name, and ``run`` and ``claude``: runs stopped before their
    first batch (their config.json only), as a --resume finds one, the second asking Claude."""
    d = tmp_path_factory.mktemp("inputs")
    (d / "zero_steps.json").write_text(json.dumps({"cascade": {"full_steps": 0}}))
    (d / "more_steps.json").write_text(json.dumps({"cascade": {"full_steps": 4096}}))
    (d / "list.json").write_text("[1, 2]")
    (d / "bad.json").write_text("{bad")
    over = toy_config(search={"pipeline": "off"})
    config = EvolveConfig.from_dict({**EvolveConfig.preset_for("toy_corridor").to_dict(), **over})
    for name, mutator in (("run", "offline"), ("claude", "anthropic")):
        (d / name).mkdir()
        llm = settled(dataclasses.replace(config.llm, mutator=mutator))  # as a run records it: model, prices
        (d / name / "config.json").write_text(json.dumps(dataclasses.replace(config, llm=llm).to_dict()))
    return d


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and modification time."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_one_line_exit_2_and_changes_nothing(case, inputs, tmp_path):
    flags, line = (text.replace("{inputs}", str(inputs)).replace("{run}", str(inputs / "run"))
                   for text in BAD_INPUT[case])
    env = {k: v for k, v in cli_env().items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")}
    before = tree(inputs)
    out = subprocess.run([sys.executable, "-m", "limen_jax.evolve", *flags.split()], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert (out.returncode, out.stderr, out.stdout) == (2, f"error: {line}\n", ""), out.stderr[-3000:]
    assert list(tmp_path.iterdir()) == [] and tree(inputs) == before


def test_replay_takes_the_recorded_runs_config_and_refuses_another_task(tmp_path, capsys):
    cfg = toy_config(search={"iterations": 1, "candidates": 2, "seeds": 1})
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    first = tmp_path / "first"
    assert main(["--task", "toy_corridor", "--config", str(tmp_path / "cfg.json"), "--seed", "7",
                 "--run-dir", str(first)]) == 0
    capsys.readouterr()
    again = tmp_path / "again"
    assert main(["--replay-from", str(first), "--run-dir", str(again)]) == 0  # no --task, no config, no seed
    out = capsys.readouterr().out
    assert f"replay: the recorded run's task, configuration and seed (toy_corridor, seed 7) from {first}" in out
    recorded, replayed = lj.resume(first, verbose=False), lj.resume(again, verbose=False)
    assert summary(replayed) == summary(recorded)
    saved = json.loads((again / "config.json").read_text())
    assert saved["seed"] == 7 and saved["llm"]["mutator"] == "replay"
    assert {k: saved["cascade"][k] for k in cfg["cascade"]} == cfg["cascade"]
    # the README's form, with the same task, works too; another task is refused before anything is made
    assert main(["--task", "toy_corridor", "--replay-from", str(first), "--run-dir", str(tmp_path / "r3")]) == 0
    capsys.readouterr()
    assert main(["--task", "xland_easy", "--replay-from", str(first), "--run-dir", str(tmp_path / "r4")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "replays a run of task 'toy_corridor', not 'xland_easy'" in err
    assert not (tmp_path / "r4").exists()


def test_resume_refuses_what_is_not_a_run_and_a_changed_task(tmp_path, capsys):
    nothing = tmp_path / "not_a_run"
    assert main(["--resume", str(nothing)]) == 2
    assert "holds no config.json: not a limen_jax run directory" in capsys.readouterr().err
    assert not nothing.exists()  # nothing created
    run = tmp_path / "run"
    (tmp_path / "cfg.json").write_text(json.dumps(toy_config(search={"iterations": 0, "candidates": 1, "seeds": 1})))
    assert main(["--task", "toy_corridor", "--config", str(tmp_path / "cfg.json"), "--run-dir", str(run)]) == 0
    capsys.readouterr()
    assert main(["--resume", str(run), "--task", "xland_easy"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the run's task is 'toy_corridor'; --task xland_easy would change it" in err
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


def test_the_library_refuses_the_same_before_making_the_run_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for over, message in (({"cascade": {"full_steps": 0}}, "cascade.full_steps must be a whole number >= 1"),
                          ({"llm": {"mutator": "anthropic"}}, "ANTHROPIC_API_KEY is not set"),
                          ({"search": {"prescreen": "demos"}}, "has no scripted expert")):
        with pytest.raises(ValueError, match=message):
            lj.evolve("toy_corridor", toy_config(**over), run_dir=tmp_path / "run", verbose=False)
        assert not (tmp_path / "run").exists()
    # the sparse baseline asks no LLM: no key is needed
    sparse = toy_config(llm={"mutator": "anthropic"}, search={"mode": "sparse", "seeds": 1},
                        cascade={"short_steps": 0, "full_steps": 512})
    assert lj.evolve("toy_corridor", sparse, run_dir=tmp_path / "sparse", verbose=False).complete
