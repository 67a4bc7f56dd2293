"""Every command the README prints runs, as printed, in a fresh directory.

The commands are read from README.md (its quick start and its table), so a command added
there without a case here fails :func:`test_every_readme_command_has_a_case`. Each case
runs the command in a subprocess from a scratch working directory, with the run directory
the quick start printed standing in for ``runs/<dir>``; training budgets are cut to a few
thousand steps (the flags a user would add), nothing else changes. The GPU-scale and
MuJoCo commands are ``slow``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()
TINY = ["--iterations", "0", "--candidates", "1", "--seeds", "1", "--full-steps", "4096"]
STEPS = ["--steps", "4096"]
SEEDS = ["--seeds", "2"]  # a later flag wins: 10 seeds x 4,096 steps cost a minute of a 2-core CI
QUICK_START = "python -m limen_jax.evolve --task xland_easy"

# README command -> (extra flags appended, slow)
CASES: dict[str, tuple[list[str], bool]] = {
    QUICK_START: (TINY, False),
    "python -m limen_jax.evolve --task xland_hard --preset quick": (TINY, False),
    "python -m limen_jax.tasks": ([], False),
    "python -m limen_jax.evolve --task playground:CartpoleBalance": (TINY, True),
    "python -m limen_jax.check --task xland_easy mine.py": ([], False),
    "python -m limen_jax.check --sandbox-info": ([], False),
    "python -m limen_jax.train --task xland_hard --interface best_interface.py --seeds 10": (STEPS + SEEDS, False),
    "python -m limen_jax.train --task xland_easy --default --seeds 3 --steps 500000": (STEPS, False),
    "python -m limen_jax.evolve --task xland_hard --preset paper": (TINY, True),
    "python -m limen_jax.evolve --task go1_push": (TINY, True),
    "python -m limen_jax.rollout runs/<dir> <program id> [--frames ep.gif]": (["--episodes", "4"], False),
    # the quick start's tiny policy may succeed nowhere: its failed episodes are kept as the expert's
    "python -m limen_jax.demos --from-policy runs/<dir> <program id> --out demos.npz":
        (["--all-episodes", "--episodes", "4", "--random", "4"], False),
    "python -m limen_jax.view runs/<dir>": ([], False),
    "python -m limen_jax.compare runs/a runs/b --plot compare.png": ([], False),
    "python -m limen_jax.evolve --resume runs/<dir>": ([], False),
    "python -m limen_jax.evolve --task xland_easy --replay-from runs/<dir>": ([], False),
}


def readme_commands() -> set[str]:
    quick = re.search(r"```bash\n(.*?)```", README, re.S)
    assert quick is not None
    found = {m.group(1).strip() for m in re.finditer(r"&& (python -m limen_jax\.[^#]*)#", quick.group(1))}
    found |= {m.group(1) for m in re.finditer(r"`(python -m limen_jax\.[^`]+)`", README)}
    return found


def test_every_readme_command_has_a_case():
    assert readme_commands() == set(CASES)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _run(argv: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{shlex.join(argv)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done


def _argv(command: str, subs: dict[str, str]) -> list[str]:
    """The command's words (an optional ``[...]`` part included), placeholders filled."""
    command = re.sub(r"\[(.*?)\]", r"\1", command)
    for key, value in subs.items():
        command = command.replace(key, value)
    return [sys.executable, *shlex.split(command)[1:]]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | Path]:
    """A scratch working directory holding the quick start's run (``runs/<dir>``, as it
    printed it), its best program's id, ``mine.py`` and ``best_interface.py``."""
    cwd = tmp_path_factory.mktemp("readme")
    out = _run([sys.executable, *shlex.split(QUICK_START)[1:], *TINY], cwd).stdout
    run = next(line.split()[1] for line in out.splitlines() if line.startswith("run: "))
    best = next(line.split()[1] for line in out.splitlines() if line.startswith("best: "))
    shutil.copy(ROOT / "envs" / "interfaces" / "xland_easy.py", cwd / "mine.py")
    shutil.copy(ROOT / "envs" / "interfaces" / "xland_hard.py", cwd / "best_interface.py")
    return {"cwd": cwd, "run": run, "best": best}


@pytest.mark.parametrize("command", [c for c, (_, slow) in CASES.items() if not slow and c != QUICK_START])
def test_a_readme_command_runs_as_printed(command: str, work: dict[str, str | Path]) -> None:
    cwd = Path(work["cwd"])
    run = str(work["run"])
    argv = _argv(command, {"runs/<dir>": run, "<program id>": str(work["best"]), "runs/a": run}) + CASES[command][0]
    if "runs/b" in command:  # a second run: the quick start's, replayed
        _run([sys.executable, "-m", "limen_jax.evolve", "--replay-from", run, "--run-dir", "runs/b"], cwd)
    if command == "python -m limen_jax.view runs/<dir>":
        _serves(argv + ["--port", "0"], cwd)
        return
    done = _run(argv, cwd)
    if "--frames" in command:
        assert (cwd / "ep.gif").read_bytes()[:6] == b"GIF89a"
    if "--plot" in command:
        assert (cwd / "compare.png").stat().st_size > 0
    if "--from-policy" in command:
        assert "rank reward programs on it with --demos demos.npz" in done.stdout and (cwd / "demos.npz").is_file()
    if "--replay-from" in command:
        assert "replay: the recorded run's task" in done.stdout


def _serves(argv: list[str], cwd: Path) -> None:
    """The viewer serves until stopped: it prints its address, then Ctrl-C ends it cleanly."""
    # SIGINT at its default in the child, as in a terminal: a test run started in the background
    # of a shell hands its children SIGINT ignored, and Python then installs no Ctrl-C handler
    proc = subprocess.Popen(argv, cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    try:
        deadline = time.time() + 120
        line = ""
        while time.time() < deadline and "http://127.0.0.1:" not in line:
            line = proc.stdout.readline() if proc.stdout else ""
            if not line and proc.poll() is not None:
                break
        assert "http://127.0.0.1:" in line, line
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
        rest = proc.stdout.read() if proc.stdout else ""
        assert code == 0 and "Traceback" not in rest, (code, rest)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c, (_, slow) in CASES.items() if slow])
def test_a_gpu_scale_or_mujoco_readme_command_starts_and_finishes_at_a_tiny_budget(command: str, tmp_path) -> None:
    _run([sys.executable, *shlex.split(command)[1:], *CASES[command][0]], tmp_path, timeout=1800)
