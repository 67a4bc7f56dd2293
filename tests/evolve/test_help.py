"""Every CLI's --help is plain text (no reStructuredText markers reach a terminal) and says what
each option does; evolve's shows the budgets its presets give, and tasks prints a task's."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

CLIS = ["evolve", "train", "check", "tasks", "compare", "rollout", "view", "demos"]


@pytest.mark.parametrize("cli", CLIS)
def test_help_is_plain_text(cli):
    out = subprocess.run([sys.executable, "-m", f"limen_jax.{cli}", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith(f"usage: python -m limen_jax.{cli}"), out.stderr[-1000:]
    # an RST literal (``x``) or role; a markdown fence (```python) is meant
    assert not re.search(r"(?<!`)``[^`\n]+``(?!`)|:func:|:class:|:mod:", out.stdout), out.stdout


@pytest.mark.parametrize("cli", ["run.cli", "train", "check", "rollout", "view.__main__", "demos"])
def test_every_option_says_what_it_does(cli):
    import importlib

    parser = importlib.import_module(f"limen_jax.{cli}")._parser()
    assert [a.dest for a in parser._actions if not a.help] == []


def test_evolve_help_shows_the_budgets_the_presets_give():
    out = subprocess.run([sys.executable, "-m", "limen_jax.evolve", "--help"], capture_output=True, text=True,
                         timeout=120).stdout
    text = " ".join(out.split())  # argparse wraps lines at the terminal's width
    for flag in ("--iterations ITERATIONS", "--candidates CANDIDATES", "--seeds SEEDS", "--full-steps FULL_STEPS"):
        assert re.search(re.escape(flag) + r" [^-]*\(default: the task's --preset budget, below\)", text), flag
    assert ("A task that declares none gets cpu: 2 iterations of 2 candidates, 2 seeds, 16,000 steps, no short run; "
            "paper: 30 iterations of 1 candidate, 3 seeds, 1,000,000 short (threshold 0.02) / 2,000,000 full steps."
            ) in text
    assert "stop cleanly when the LLM spend reaches this many USD (default 20)" in text
    assert "--mode {full,obs_only,reward_only,sparse,independent} what candidates write: full" in text


def test_tasks_prints_a_tasks_budgets():
    out = subprocess.run([sys.executable, "-m", "limen_jax.tasks", "--budgets", "xland_easy"], capture_output=True,
                         text=True, timeout=120)
    assert (out.returncode, out.stdout) == (0, "cpu: 3 iterations of 3 candidates, 2 seeds, 150,000 steps, "
                                               "no short run\nquick: as cpu (none declared)\n"
                                               "paper: 30 iterations of 1 candidate, 3 seeds, 500,000 "
                                               "short (threshold 0.05) / 1,000,000 full steps\ngpu: 10 iterations of 8 "
                                               "candidates, 3 seeds, 500,000 short (threshold 0.05) / 1,000,000 full "
                                               "steps\n"), out.stderr
