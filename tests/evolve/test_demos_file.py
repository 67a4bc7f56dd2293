"""``--demos PATH`` is read before the run starts: a missing file, one that is not an npz,
or one whose arrays do not fit the task is one line naming the file and what is wrong,
exit 2 from the CLI (a ValueError from the library), and no run directory."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from toy_task import ToyCorridor

import limen_jax as lj
from limen_jax import demos


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A valid toy_corridor set's arrays (8 episodes of random play, half tagged expert)."""
    task = ToyCorridor()
    ep = demos.from_episodes(demos.rollout(task, demos.random_policy(task), jax.random.key(0), 8), "random")
    tagged = demos.DemoSet(ep.transitions, np.where(ep.episode < 4, "expert", "random"), ep.round, ep.episode,
                           ep.step)
    path = tagged.save(tmp_path_factory.mktemp("good") / "good.npz")
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def write(path, arrays):
    np.savez(path, **arrays)
    return path


def bad_files(tmp_path, good):
    m = len(good["source"])
    return {
        "missing": (tmp_path / "absent.npz", "no such file"),
        "not an npz": (tmp_path / "text.npz", "not an .npz archive"),
        "no action": (write(tmp_path / "noaction.npz", {k: v for k, v in good.items() if k != "action"}),
                      "no array action"),
        "action shape": (write(tmp_path / "wide.npz", {**good, "action": np.zeros((m, 2), np.int32)}),
                         f"array action has shape ({m}, 2), task 'toy_corridor' needs ({m},)"),
        "sim length": (write(tmp_path / "short.npz", {**good, "sim/0": good["sim/0"][:-1]}),
                       f"array sim/0 has shape ({m - 1},), task 'toy_corridor' needs ({m},)"),
        "another task": (write(tmp_path / "more.npz", {**good, "sim/3": good["sim/0"], "next_sim/3": good["sim/0"]}),
                         "array sim/3 is beyond the 3 simulator leaves of task 'toy_corridor'"),
    }


def test_the_loader_names_the_file_and_the_fault(tmp_path, good):
    (tmp_path / "text.npz").write_text("not a zip\n")
    task = ToyCorridor()
    for path, why in bad_files(tmp_path, good).values():
        with pytest.raises(ValueError) as err:
            demos.load_demos(path, task)
        line = str(err.value)
        assert line.startswith(f"{path}: ") and why in line and "\n" not in line, line
    back = demos.load_demos(write(tmp_path / "ok.npz", good), task)
    assert back.counts() == {"expert": int((good["source"] == "expert").sum()),
                             "random": int((good["source"] == "random").sum())}


def test_the_library_refuses_before_making_the_run_dir(tmp_path, good):
    path, why = bad_files(tmp_path, good)["action shape"]
    run = tmp_path / "run"
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)")):
        lj.evolve("toy_corridor", {"llm": {"mutator": "offline"},
                                          "search": {"strategy": "grace", "demos": str(path)}},
                  run_dir=run, verbose=False)
    assert not run.exists()


def test_the_cli_says_one_line_exits_2_and_creates_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "limen_jax.evolve", "--task", "xland_medium", "--strategy", "grace",
                          "--mutator", "offline", "--demos", str(tmp_path / "none.npz"), "--run-dir", str(run)],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'none.npz'}: no such file (demonstrations are an .npz, as python -m limen_jax.demos "
        "writes them)"]
    assert not run.exists()
