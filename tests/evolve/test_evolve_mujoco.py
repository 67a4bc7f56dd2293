"""`python -m limen_jax.evolve` on the MuJoCo tasks: the offline mutator writes programs
from the task's catalog, the batched trainer scores them, every artifact is written.

The CLI default (``--preset cpu``) is a tiny run; here it is shrunk further through
``--config`` (a first generation of two programs, one compiled batch, a few updates) so
that the test spends its time on what it checks, not on training. Mutation of MuJoCo
programs is covered by tests/envs/test_mujoco_catalogs.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mujoco_extra import require_mujoco

require_mujoco()

TINY = {
    "search": {"iterations": 0, "candidates": 2, "seeds": 1},
    "cascade": {"short_steps": 0, "full_steps": 256},
    "llm": {"mutator": "offline"},
    "ppo": {"num_envs": 8, "rollout_len": 8, "epochs": 1, "minibatches": 2, "eval_episodes": 2,
            "actor_hidden": [16], "critic_hidden": [16]},
}  # fmt: skip


def evolve_cli(task: str, tmp_path, config: dict) -> tuple[list[dict], list[str]]:
    """Run the CLI; the event log and the programs' sources."""
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(config))
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "limen_jax.evolve", "--task", task, "--config", str(cfg), "--run-dir", str(run_dir)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stderr[-3000:]
    for name in ("config.json", "state.json", "best_interface.py", "progress.png", "archive.png"):
        assert (run_dir / name).stat().st_size > 0, name
    assert "best" in out.stdout
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    return events, [p.read_text() for p in sorted((run_dir / "programs").glob("*.py"))]


def scores(events: list[dict]) -> list[dict]:
    return [e for e in events if e["event"] == "score"]


def test_offline_evolve_on_go1_push(tmp_path):
    events, programs = evolve_cli("go1_push", tmp_path, TINY)
    assert events[-1]["event"] == "run_end" and events[-1]["stopped"] == "finished"
    # both programs passed the checker and were trained together, nothing was rejected
    assert len(scores(events)) == 2 and not [e for e in events if e["event"] == "reject"]
    assert len(programs) == 2 and all("f_proprio" in p and "t_success" in p for p in programs)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["panda_track", "ant", "humanoid", "hopper", "walker2d", "halfcheetah"])
def test_offline_evolve_on_other_mujoco_tasks(task, tmp_path):
    events, _ = evolve_cli(task, tmp_path, TINY)
    assert len(scores(events)) == 2
