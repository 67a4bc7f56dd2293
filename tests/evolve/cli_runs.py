"""Real ``python -m limen_jax.evolve`` runs on the toy corridor for the tests that stop one
hard: start it, wait for a moment in its events.jsonl or state.json (or stall it at an
exact moment, :func:`start_stalled`), kill it with SIGKILL, ``--resume`` it, and compare
what it finished with to a run never killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from limen_jax.archive import ProgramRecord

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

Moment = Callable[[Path], bool]  # run dir -> has the run reached the moment to kill it


def cli_env(*extra: Path) -> dict[str, str]:
    """The environment a CLI run needs: this checkout's package and the toy task beside these
    tests (its dist-info registers ``toy_corridor`` by entry point) first, then ``extra`` and
    the caller's own PYTHONPATH."""
    paths = [str(ROOT), str(HERE), *map(str, extra)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def events(run_dir: Path) -> list[dict[str, Any]]:
    """The run's events.jsonl, read while it may still write: [] before the file exists, and
    a last line without its newline (being written, or torn by a kill) is left out."""
    path = run_dir / "events.jsonl"
    lines = path.read_text().split("\n")[:-1] if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The run's last checkpoint (state.json, replaced whole), None before the first."""
    state = run_dir / "state.json"
    return json.loads(state.read_text()) if state.exists() else None


def logged(event: str, id_prefix: str = "") -> Moment:
    """The moment an ``event`` is logged (with an id starting ``id_prefix``, if given)."""
    return lambda run_dir: any(e["event"] == event and e.get("id", "").startswith(id_prefix)
                               for e in events(run_dir))


def checkpointed(iteration: int) -> Moment:
    """The moment the checkpoint records ``iteration`` or a later one done."""
    return lambda run_dir: (checkpoint(run_dir) or {"iteration": -1})["iteration"] >= iteration


def _command(run_dir: Path, config: dict[str, Any], args: Sequence[str]) -> list[str]:
    """``python -m limen_jax.evolve --task toy_corridor`` with ``config`` (written beside
    ``run_dir`` as ``<run_dir name>.json``) and ``args``, into ``run_dir``."""
    cfg = run_dir.parent / f"{run_dir.name}.json"
    cfg.write_text(json.dumps(config))
    return [sys.executable, "-m", "limen_jax.evolve", "--task", "toy_corridor", "--config", str(cfg), *args,
            "--run-dir", str(run_dir)]


def run_cli(run_dir: Path, config: dict[str, Any], args: Sequence[str] = (),
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m limen_jax.evolve --task toy_corridor`` with ``config`` and ``args``
    (``--replay-from RUN``, ``--strategy NAME``, ...) run to its end, which must be a success."""
    out = subprocess.run(_command(run_dir, config, args), env=env or cli_env(), capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def kill_9(run_dir: Path, config: dict[str, Any], moment: Moment, args: Sequence[str] = (),
           env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """Start ``python -m limen_jax.evolve --task toy_corridor`` with ``config`` (written
    beside ``run_dir``) and ``args``; SIGKILL it once ``moment(run_dir)``, which it must reach
    alive within 10 minutes; returns the checkpoint it left (None if none yet)."""
    cmd = _command(run_dir, config, args)
    proc = subprocess.Popen(cmd, env=env or cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not moment(run_dir):
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return checkpoint(run_dir)


def start_stalled(argv: Sequence[str], where: str, flags: Path, env: dict[str, str] | None = None,
                  stderr: Any = subprocess.PIPE) -> tuple[subprocess.Popen[str], Path]:
    """Start ``python -m limen_jax.evolve argv`` stalling at ``where`` (a moment of
    tests/evolve/hooked.py: ``event:N``, ``compile``, ``state:K``, ``state-torn:K``) and
    return once it stalls there, alive: the process and the file that lets it go on (its
    mark and go files live in ``flags``). The process must reach the moment within 10 minutes."""
    mark, go = flags / "stalled", flags / "go"
    mark.unlink(missing_ok=True)
    go.unlink(missing_ok=True)
    hooks = {"LIMEN_TEST_STALL": where, "LIMEN_TEST_MARK": str(mark), "LIMEN_TEST_GO": str(go)}
    proc = subprocess.Popen([sys.executable, "-m", "hooked", *argv], env={**(env or cli_env()), **hooks},
                            stdout=subprocess.PIPE, stderr=stderr, text=True)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not mark.exists():
        time.sleep(0.02)
    if proc.poll() is not None or not mark.exists():
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"never stalled at {where} (exit {proc.returncode}): {(err or out or '')[-2000:]}")
    return proc, go


def evolve_argv(run_dir: Path, config: dict[str, Any], args: Sequence[str] = ()) -> list[str]:
    """The arguments of ``python -m limen_jax.evolve`` for a toy run with ``config`` (written
    beside ``run_dir``) and ``args``, into ``run_dir``."""
    return _command(run_dir, config, args)[3:]


def resume_cli(run_dir: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m limen_jax.evolve --resume run_dir`` to its end, which must be a success."""
    out = subprocess.run([sys.executable, "-m", "limen_jax.evolve", "--resume", str(run_dir)], env=env or cli_env(),
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def kill_and_resume(run_dir: Path, config: dict[str, Any], moment: Moment, args: Sequence[str] = (),
                    env: dict[str, str] | None = None) -> dict[str, Any]:
    """:func:`kill_9` once a checkpoint is written, then :func:`resume_cli`, which must go on
    from the iteration after the checkpoint's; returns the checkpoint the kill left."""
    killed = kill_9(run_dir, config, moment, args, env)
    assert killed is not None, "killed before the first checkpoint"
    resume_cli(run_dir, env)
    assert [e["from_iteration"] for e in events(run_dir) if e["event"] == "run_resume"] == [killed["iteration"] + 1]
    return killed


def assert_same_programs(run_dir: Path, records: Sequence[ProgramRecord],
                         key: Callable[[ProgramRecord], Any]) -> None:
    """The run in ``run_dir`` checkpointed exactly ``records``' ids, each program equal to its
    record by ``key``."""
    state = checkpoint(run_dir)
    assert state is not None
    mine = {p["id"]: ProgramRecord.from_dict(p) for p in state["archive"]["programs"]}
    assert sorted(mine) == sorted(r.id for r in records)
    for r in records:
        assert key(mine[r.id]) == key(r), r.id
