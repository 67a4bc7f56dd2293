"""Trained policies on disk, with orbax-checkpoint: save, load, and keep a run's best.

One policy is one directory::

    <dir>/arrays/        orbax checkpoint: {"params": network pytree, "obs_stats": {mean, var, count}}
    <dir>/policy.json    its metadata (task, PPO config, width, obs_dim, seed, reward terms, ...)

A run keeps them as ``<run>/policies/<program_id>/seed<k>/`` (:func:`keep_policies`);
``python -m limen_jax.train --save-policy DIR`` writes the same layout under DIR, and
``python -m limen_jax.rollout`` reads it. Arrays are restored bit for bit.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from limen_jax.rl.normalize import ObsStats
from limen_jax.rl.policy import Policy
from limen_jax.rundir import write_text_atomic

if TYPE_CHECKING:
    from limen_jax.rl.cascade import CascadeResult

KEEP = ("all", "best", "none")
# A program id becomes a directory name: nothing that could leave the run directory.
_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def save_policy(directory: str | Path, params: Any, obs_stats: ObsStats, metadata: dict[str, Any]) -> Path:
    """Write one policy to ``directory`` (replacing what is there); returns its path.

    params: the network's parameter pytree; obs_stats: its observation statistics
    (mean, var float32[width], count float32[]); metadata: JSON-ready facts
    (:class:`~limen_jax.rl.policy.Policy`).
    """
    import orbax.checkpoint as ocp

    path = Path(directory).absolute()
    path.mkdir(parents=True, exist_ok=True)
    tree = Policy(params, obs_stats, metadata).arrays()
    tree = {"params": _host(tree["params"]), "obs_stats": _host(tree["obs_stats"])}
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(path / "arrays", tree, force=True)
    checkpointer.wait_until_finished()
    checkpointer.close()
    write_text_atomic(path / "policy.json", json.dumps(metadata, indent=1))
    return path


def load_policy(directory: str | Path) -> Policy:
    """The policy saved in ``directory``. Raises FileNotFoundError when there is none."""
    import orbax.checkpoint as ocp

    path = Path(directory).absolute()
    if not (path / "policy.json").is_file() or not (path / "arrays").is_dir():
        raise FileNotFoundError(f"no saved policy in {path}")
    metadata = json.loads((path / "policy.json").read_text())
    checkpointer = ocp.StandardCheckpointer()
    tree = checkpointer.restore(path / "arrays")
    checkpointer.close()
    stats = tree["obs_stats"]
    return Policy(tree["params"], ObsStats(stats["mean"], stats["var"], stats["count"]), metadata)


def policy_dir(run_path: str | Path, program_id: str, seed: int) -> Path:
    """``<run>/policies/<program_id>/seed<seed>``; ValueError for an unsafe id."""
    if not _SAFE_ID.fullmatch(program_id):
        raise ValueError(f"not a program id: {ascii(program_id)[:60]}")
    return Path(run_path) / "policies" / program_id / f"seed{int(seed)}"


def keep_policies(
    run_path: str | Path, results: Sequence[tuple[str, CascadeResult]], which: str = "best"
) -> list[Path]:
    """Save the trained policies of a batch's results under ``<run>/policies/``.

    results: (program id, its CascadeResult) pairs, the results run with
    ``run_cascade(return_policies=True)`` (results without policies, e.g. stopped by the
    cascade's short stage, are skipped). which: "all" (every program with policies),
    "best" (the program of highest success among them; the first on ties) or "none".
    Each seed's policy goes to ``<run>/policies/<id>/seed<k>/``, with the program id in
    its metadata. Returns the directories written.
    """
    if which not in KEEP:
        raise ValueError(f"which must be one of {KEEP}, got {which!r}")
    kept = [(pid, r) for pid, r in results if r.policies]
    if which == "none" or not kept:
        return []
    if which == "best":
        kept = [max(kept, key=lambda pr: pr[1].success)]
    out = []
    for pid, result in kept:
        target = Path(run_path) / "policies" / pid
        if target.exists():  # a retrained program (e.g. after a resume): its old seeds go
            shutil.rmtree(target)
        for policy in result.policies or []:
            meta = {**policy.metadata, "program_id": pid}
            out.append(save_policy(policy_dir(run_path, pid, meta["seed"]), policy.params, policy.obs_stats, meta))
    return out


def saved_seeds(run_path: str | Path, program_id: str) -> list[int]:
    """The seeds with a saved policy for ``program_id`` in the run, sorted."""
    base = policy_dir(run_path, program_id, 0).parent
    if not base.is_dir():
        return []
    return sorted(int(p.name[4:]) for p in base.iterdir() if re.fullmatch(r"seed\d+", p.name))


def _host(tree: Any) -> Any:
    import jax

    return jax.tree.map(np.asarray, tree)
