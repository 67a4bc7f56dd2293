"""`python -m limen_jax.check`: output and exit codes (in-process main() for speed, one subprocess)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
from limen_envs import interfaces
from program_corpus import HEAD, OBS

from limen_jax.check import main
from limen_jax.task import Task, Transition


def test_accepts_the_reference_interface(
    capsys: pytest.CaptureFixture[str], easy_task: Task, easy_sample: Transition
) -> None:
    code = main(["--task", "xland_easy", str(interfaces.path("xland_easy"))])
    out = capsys.readouterr().out
    assert code == 0
    assert "verdict: TRAINABLE" in out and "obs_dim: 30" in out and "reward_ast_size: " in out


def test_rejects_with_stage_message_and_trace(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, easy_task: Task, easy_sample: Transition
) -> None:
    program = tmp_path / "bad.py"
    program.write_text(
        HEAD + OBS + "def compute_reward(state, action, next_state):\n    if action > 2:\n        return 1.0\n"
    )
    assert main(["--task", "xland_easy", str(program)]) == 1
    out = capsys.readouterr().out
    assert "verdict: REJECTED" in out and "stage: trace" in out and "jnp.where" in out
    assert "line 8, in compute_reward: if action > 2:" in out

    assert main(["--task", "xland_easy", "--json", str(program)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["error"]["stage"] == "trace" and report["task"] == "xland_easy"


def test_obs_only_mode_from_the_command_line(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, easy_task: Task, easy_sample: Transition
) -> None:
    program = tmp_path / "obs.py"
    program.write_text(HEAD + OBS)
    assert main(["--task", "xland_easy", "--mode", "obs_only", "--json", str(program)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["obs_dim"] == 2 and report["mode"] == "obs_only"


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    program = tmp_path / "p.py"
    program.write_text(HEAD + OBS)
    assert main(["--task", "xland_easy", str(tmp_path / "missing.py")]) == 2
    assert main(["--task", "no_such_task", str(program)]) == 2
    assert "unknown task" in capsys.readouterr().err
    assert main([]) == 2
    assert main(["--task", "xland_easy", "--mode", "bogus", str(program)]) == 2


def test_module_entry_point(tmp_path: pathlib.Path) -> None:
    program = tmp_path / "p.py"
    program.write_text(HEAD + OBS)
    run = subprocess.run(
        [sys.executable, "-m", "limen_jax.check", "--task", "no_such_task", str(program)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "unknown task" in run.stderr


def test_sandbox_info_reports_the_mechanism(capsys: pytest.CaptureFixture[str]) -> None:
    from limen_jax.program.isolation import MECHANISMS, mechanism

    assert main(["--sandbox-info"]) == 0
    out = capsys.readouterr().out
    assert f"mechanism: {mechanism()}" in out and "protects with:" in out
    assert main(["--sandbox-info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["mechanism"] in MECHANISMS and info["protections"]
    assert main([]) == 2  # neither a program nor --sandbox-info
