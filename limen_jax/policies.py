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
import os
import re
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from limen_jax.rl.normalize import ObsStats
from limen_jax.rl.policy import Policy
from limen_jax.run import reader
from limen_jax.rundir import write_text_atomic

if TYPE_CHECKING:
    from limen_jax.rl.cascade import CascadeResult

KEEP = ("all", "best", "none")


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


def load_policy(directory: str | Path, root: str | Path | None = None) -> Policy:
    """The policy saved in ``directory``, read as untrusted input: its files must stay inside
    ``root`` (default ``directory``; a run's folder for a kept policy), policy.json is typed
    (:func:`limen_jax.run.reader.check_policy_meta`). FileNotFoundError when there is none;
    :class:`~limen_jax.run.reader.RunDirError` (a ValueError, one line) for a bad one."""
    import orbax.checkpoint as ocp

    path = Path(directory).absolute()
    base = Path(root).absolute() if root is not None else path
    if not os.path.lexists(path / "policy.json") or not os.path.lexists(path / "arrays"):
        raise FileNotFoundError(f"no saved policy in {path}")
    if reader.inside_dir(base, path / "arrays") is None:
        raise reader.RunDirError(f"{path / 'arrays'} is not a folder inside {base} (a link out of it)")
    _check_arrays(path / "arrays")
    meta_path = path / "policy.json"
    metadata = reader.check_policy_meta(reader.read_json(meta_path.parent, meta_path.name, "a policy's metadata"),
                                        meta_path)
    checkpointer = ocp.StandardCheckpointer()
    tree = checkpointer.restore(path / "arrays")
    checkpointer.close()
    stats = tree["obs_stats"]
    return Policy(tree["params"], ObsStats(stats["mean"], stats["var"], stats["count"]), metadata)


def _check_arrays(arrays: Path) -> None:
    """:class:`~limen_jax.run.reader.RunDirError` unless everything under ``arrays`` is a
    plain file or folder (no symlink, FIFO or device: the array store would read through a
    link out of the run, wait on a FIFO or read /dev/zero forever), at most
    :data:`~limen_jax.run.reader.MAX_POLICY_FILES` entries, before the store opens it."""
    count = 0
    for folder, dirs, files in os.walk(arrays):
        for name in dirs + files:
            count += 1
            entry = Path(folder) / name
            mode = entry.lstat().st_mode
            if count > reader.MAX_POLICY_FILES:
                raise reader.RunDirError(f"{arrays} holds more than {reader.MAX_POLICY_FILES} entries")
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise reader.RunDirError(f"{entry} is a link, FIFO or device: a kept policy's arrays are "
                                         "plain files of the run")


def policy_dir(run_path: str | Path, program_id: str, seed: int) -> Path:
    """``<run>/policies/<program_id>/seed<seed>``; ValueError for an unsafe id."""
    reader.check_id(program_id, "policy")
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
        reader.check_id(pid, "policy")  # before anything under policies/ is touched
        base = reader.own_dir(Path(run_path), "policies")
        if os.path.lexists(base / pid):  # a retrained program (e.g. after a resume): its old seeds go
            shutil.rmtree(reader.own_dir(base, pid))  # refused for a link: only the run's own folder goes
        for policy in result.policies or []:
            meta = {**policy.metadata, "program_id": pid}
            out.append(save_policy(policy_dir(run_path, pid, meta["seed"]), policy.params, policy.obs_stats, meta))
    return out


def saved_seeds(run_path: str | Path, program_id: str) -> list[int]:
    """The seeds with a saved policy for ``program_id`` in the run, sorted."""
    base = policy_dir(run_path, program_id, 0).parent
    if not os.path.lexists(base):
        return []
    if base.is_symlink() or reader.inside_dir(Path(run_path), base) is None:
        raise reader.RunDirError(f"{base} is a link or not a folder: a run's policies are folders of its own")
    return sorted(int(p.name[4:]) for p in base.iterdir() if re.fullmatch(r"seed\d+", p.name))


def _host(tree: Any) -> Any:
    import jax

    return jax.tree.map(np.asarray, tree)
