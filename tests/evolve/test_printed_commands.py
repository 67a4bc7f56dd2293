"""The commands the tool prints as hints run as printed (tests/test_readme_commands.py runs
the README's): the resume command after a run stops, the flags a missing API key suggests, and
the rollout command train prints after saving its policies. (The resume command of an
interrupt is run by tests/run/test_signals.py, best_interface.py's "Train it:" line by
tests/evolve/test_evolve.py.)"""

from __future__ import annotations

import concurrent.futures as cf
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli_runs import cli_env
from test_evolve import TINY_PPO, toy_config

import limen_jax as lj
from limen_jax.search.evaluation.evaluator import EvaluatorBase

# one stage, one compile: each run here costs seconds
CONFIG = toy_config(search={"iterations": 0, "candidates": 1, "seeds": 1, "pipeline": "off"},
                    cascade={"short_steps": 0, "full_steps": 512})


def env(without_key: bool = False) -> dict[str, str]:
    """This checkout and the toy task first on the path (and no API key, if asked)."""
    return {k: v for k, v in cli_env().items() if not (without_key and k == "ANTHROPIC_API_KEY")}


def run(argv: list[str], cwd: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env(**kwargs), capture_output=True, text=True,
                          timeout=600)


def printed(pattern: str, text: str) -> list[str]:
    """The command words the hint matching ``pattern`` (one group) printed, ``python`` dropped."""
    found = re.search(pattern, text)
    assert found is not None, text[-2000:]
    words = shlex.split(found.group(1))
    return words[1:] if words[0] == "python" else words


class Broken(EvaluatorBase):
    """An evaluator whose batches never come back: the run stops as the engine's fault."""

    def submit(self, job: Any) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        future.set_exception(RuntimeError("the cluster went away"))
        return future

    def close(self, wait: bool = True) -> None:
        pass


def test_the_resume_command_after_a_stop_finishes_the_run(tmp_path, capsys):
    stopped = lj.evolve("toy_corridor", CONFIG, run_dir=tmp_path / "run", evaluator=Broken())
    assert not stopped.complete
    out = capsys.readouterr().out
    assert "stopped (engine): the evaluator failed: RuntimeError: the cluster went away" in out
    again = run(printed(r"then resume with (python -m limen_jax\.evolve --resume \S+)\)", out), tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert lj.resume(tmp_path / "run", verbose=False).complete


def test_the_flags_a_missing_key_suggests_start_the_run(tmp_path):
    (tmp_path / "cfg.json").write_text(json.dumps(CONFIG))
    command = ["-m", "limen_jax.evolve", "--task", "toy_corridor", "--config", "cfg.json", "--mutator",
               "anthropic"]
    refused = run([*command, "--run-dir", "first"], tmp_path, without_key=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr[-2000:]
    offline = printed(r"run with (--mutator offline) \(no network\)", refused.stderr)
    done = run([*command, "--run-dir", "first", *offline], tmp_path, without_key=True)
    assert done.returncode == 0 and (tmp_path / "first" / "best_interface.py").is_file(), done.stderr[-2000:]
    replay = printed(r" or (--mutator replay --replay-from RUN_DIR) \(a recorded run's answers\)", refused.stderr)
    replay = [w.replace("RUN_DIR", "first") for w in replay]
    done = run([*command, "--run-dir", "again", *replay], tmp_path, without_key=True)
    assert done.returncode == 0 and "best:" in done.stdout, done.stderr[-2000:]


def test_the_rollout_command_train_prints_rolls_the_policy_out(tmp_path):
    ppo = [f"{k}={json.dumps(v).replace(' ', '')}" for k, v in TINY_PPO.items()]
    trained = run(["-m", "limen_jax.train", "--task", "toy_corridor", "--default", "--seeds", "1", "--steps",
                   "512", "--save-policy", "policy", "--ppo", *ppo], tmp_path)
    assert trained.returncode == 0, trained.stderr[-2000:]
    rolled = run([*printed(r"saved 1 policies in [\d.]+ s: (python -m limen_jax\.rollout .+)", trained.stdout),
                  "--episodes", "4"], tmp_path)
    assert rolled.returncode == 0 and "success" in rolled.stdout, rolled.stderr[-2000:]
