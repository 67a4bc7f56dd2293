"""Bring your own task, as a user would: a separate package (tests/envs/thirdparty) with
an entry point shows up in ``python -m limen_jax.tasks`` and runs check, train and evolve
with no change to limen_jax.

The package folder holds the ``.dist-info`` that ``pip install`` would write (installing
needs a build backend, which a test must not download); a subprocess gets the folder on
``PYTHONPATH`` and finds the task only through ``importlib.metadata`` entry points. All
four commands run in one subprocess (one JAX import) through their ``main`` functions.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import limen_jax as lj

PKG = pathlib.Path(__file__).resolve().parent / "thirdparty"

SCRIPT = """\
import importlib, json, sys
check, evolve, tasks, train = (importlib.import_module(f"limen_jax.{m}") for m in ("check", "evolve", "tasks", "train"))
from limen_jax.config import EvolveConfig
from limen_jax.rl import PPOConfig

print("== tasks"); assert tasks.main([]) == 0
print("== check"); assert check.main(["--task", "beacon", "--json", sys.argv[1]]) == 0
print("== facts", json.dumps({"num_envs": PPOConfig.preset("beacon").num_envs,
                             "full_steps": EvolveConfig.preset_for("beacon").cascade.full_steps}))
print("== train"); assert train.main(["--task", "beacon", "--interface", sys.argv[1], "--seeds", "1",
                                     "--steps", "2048", "--json"]) == 0
print("== evolve"); assert evolve.main(["--task", "beacon", "--mutator", "offline", "--run-dir", sys.argv[2]]) == 0
"""


def test_the_package_declares_the_entry_point_its_metadata_carries():
    """The checked-in .dist-info says what the package's pyproject says (they cannot drift)."""
    pyproject = (PKG / "pyproject.toml").read_text()
    declared = pyproject.split('[project.entry-points."limen_jax.tasks"]\n')[1].split("\n\n")[0]
    written = (PKG / "limen_beacon-0.1.0.dist-info" / "entry_points.txt").read_text()
    assert declared == 'beacon = "limen_beacon:Beacon"'
    assert written == "[limen_jax.tasks]\nbeacon = limen_beacon:Beacon\n"


def test_the_package_is_not_seen_without_being_on_the_path():
    assert "beacon" not in lj.registered_tasks()


def test_a_third_party_task_lists_checks_trains_and_evolves(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PKG), os.environ.get("PYTHONPATH", "")])}
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(PKG / "beacon_interface.py"), str(run_dir)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    listing = out.split("== tasks")[1].split("== check")[0]
    assert "beacon  " in listing and "third-party example" in listing and "xland_easy" in listing
    report = json.loads(out.split("== check")[1].split("== facts")[0].strip().splitlines()[-1])
    assert report["ok"] and report["obs_dim"] == 4
    # the task's own facts, not the engine's defaults
    assert json.loads(out.split("== facts")[1].splitlines()[0]) == {"num_envs": 32, "full_steps": 4096}
    trained = json.loads(out.split("== train")[1].split("== evolve")[0].strip().splitlines()[-1])
    assert trained["task"] == "beacon" and 0.0 <= trained["success_mean"] <= 1.0
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    assert events[-1]["event"] == "run_end" and events[-1]["stopped"] == "finished"
    # the task's cpu budget: one generation of 2 programs
    assert len([e for e in events if e["event"] == "score"]) == 2
    assert json.loads((run_dir / "config.json").read_text())["cascade"]["full_steps"] == 4096
    assert (run_dir / "best_interface.py").stat().st_size > 0
