"""Every CLI answers an engine bug (an exception its main did not expect) with the traceback,
then one line asking for a report, and exit status 1; a Ctrl-C is not such a bug."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from limen_jax.cli_errors import BUG_LINE

ROOT = Path(__file__).parents[1]
CLIS = ["check", "compare", "demos", "evolve", "rollout", "tasks", "train", "view.__main__"]
# run in a fresh interpreter: ``patch`` makes something inside the CLI raise, then its main runs
SCRIPT = """
import argparse, importlib, sys
def boom(*args, **kwargs):
    raise {error}
{patch}
sys.exit(importlib.import_module("limen_jax.{cli}").main({argv!r}))
"""


def run(cli: str, patch: str, argv: list[str], cwd: Path, error: str = 'RuntimeError("boom")') -> Any:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests" / "evolve")])}
    code = SCRIPT.format(error=error, patch=patch, cli=cli, argv=argv)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("cli", CLIS)
def test_an_engine_bug_prints_the_traceback_and_asks_for_a_report(cli, tmp_path):
    out = run(cli, "argparse.ArgumentParser.parse_args = boom", [], tmp_path)
    assert out.returncode == 1, out.stderr[-2000:]
    assert out.stderr.startswith("Traceback (most recent call last):\n"), out.stderr[-2000:]
    assert out.stderr.endswith(f'RuntimeError: boom\n{BUG_LINE}\n'), out.stderr[-2000:]


def test_a_bug_inside_a_run_is_reported_the_same_way(tmp_path):
    """Deep inside evolve (past its own handlers for bad input and interrupts)."""
    out = run("evolve", "import limen_jax.loop\nlimen_jax.loop.open_run = boom",
              ["--task", "toy_corridor", "--run-dir", str(tmp_path / "run")], tmp_path)
    assert out.returncode == 1 and "in run_loop\n    state = open_run(" in out.stderr, out.stderr[-2000:]
    assert out.stderr.endswith(f"RuntimeError: boom\n{BUG_LINE}\n"), out.stderr[-2000:]


def test_a_ctrl_c_is_not_reported_as_a_bug(tmp_path):
    out = run("tasks", "argparse.ArgumentParser.parse_args = boom", [], tmp_path, error="KeyboardInterrupt")
    assert out.returncode == -2 and "KeyboardInterrupt" in out.stderr and BUG_LINE not in out.stderr
