"""A task whose extra is not installed is refused by every CLI that builds it in one line,
exit 2, naming the extra to install; ``tasks`` marks such tasks instead of importing them.

The extra is hidden in a fresh interpreter (``sys.modules[m] = None`` makes ``import m``
fail as if it were not installed), so these tests run whether or not it is installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[1]
HIDE = "import sys\nfor m in ('mujoco', 'brax', 'mujoco_playground'):\n    sys.modules[m] = None\n"
# rollout and demos build the task a kept policy was trained on: a stand-in policy names it
FAKE_POLICY = """
import types, limen_jax.rollout, limen_jax.policies
limen_jax.rollout._plan = lambda args: {"dir": args.run_dir}
limen_jax.policies.load_policy = lambda d, root=None: types.SimpleNamespace(metadata={"task": "go1_push"})
"""
# each CLI prefixes its error lines with "error:" or its own name
LINE = 'task \'go1_push\' needs the mujoco extra (no module \'mujoco\'): pip install -e ".[mujoco]"\n'


def run(cli: str, argv: list[str], cwd: Path, patch: str = "") -> Any:
    code = f"{HIDE}{patch}\nimport importlib\nsys.exit(importlib.import_module('limen_jax.{cli}').main({argv!r}))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


CASES = {
    "evolve": (["--task", "go1_push", "--run-dir", "run"], ""),
    "check": (["--task", "go1_push", "mine.py"], ""),
    "train": (["--task", "go1_push", "--default"], ""),
    "tasks": (["--context", "go1_push"], ""),
    "rollout": (["run", "p0"], FAKE_POLICY),
    "demos": (["--from-policy", "run", "p0", "--out", "d.npz"], FAKE_POLICY),
}


@pytest.mark.parametrize("cli", sorted(CASES))
def test_a_missing_extra_is_one_line_naming_it(cli, tmp_path):
    (tmp_path / "mine.py").write_text("def get_observation(state):\n    return state\n")
    argv, patch = CASES[cli]
    out = run(cli, argv, tmp_path, patch)
    prefix, _, line = out.stderr.partition(": ")
    assert (out.returncode, prefix in ("error", cli), line) == (2, True, LINE), out.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.py"]


def test_tasks_marks_a_task_whose_extra_is_missing_without_importing_it(tmp_path):
    out = run("tasks", [], tmp_path, "import limen_jax.tasks\n")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = {line.split()[0]: line for line in out.stdout.splitlines() if line.strip()}
    assert '(not installed: pip install -e ".[mujoco]") Brax ant' in lines["ant"]
    assert '(not installed: pip install -e ".[mujoco]") Unitree Go1' in lines["go1_push"]
    assert "not installed" not in lines["xland_easy"] and "XLand-MiniGrid 9x9 room" in lines["xland_easy"]
    assert lines["brax:<env>"].startswith('brax:<env>        (not installed: pip install -e ".[mujoco]") Brax')


def test_listing_tasks_imports_no_task_module():
    code = ("import sys, limen_jax.tasks as t; t.main([]); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mujoco', 'brax', 'limen_envs')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.splitlines()[-1] == "['limen_envs']", out.stderr[-2000:]
