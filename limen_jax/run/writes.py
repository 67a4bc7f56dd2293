"""What a batch writes into the run directory: the programs it trains, each record, the
trained policies kept, the checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from limen_jax.archive import ProgramRecord
from limen_jax.run.ask import Child
from limen_jax.run.outputs import write_best
from limen_jax.run.repeats import savings
from limen_jax.run.state import RunState
from limen_jax.rundir import RunDir
from limen_jax.search.requests import Request, request_to_dict


def write_trainable(rd: RunDir, children: Sequence[Child]) -> None:
    """Write each trainable child's program and compiled artifacts before it trains, and log it."""
    for child in children:
        r, iface = child.record, child.interface
        rd.write_program(r.id, r.code)
        rd.write_artifacts(r.id, {"obs": iface.obs_artifact, "reward": iface.reward_artifact})
        rd.log("program", id=r.id, obs_dim=r.obs_dim, reward_ast_size=r.reward_ast_size)


def store_record(rd: RunDir, state: RunState, record: ProgramRecord) -> None:
    """Add ``record`` to the archive (the grid takes it when it is an elite), write its
    code, and log it (``score`` or ``reject``, without the code and the fingerprint,
    which state.json keeps)."""
    elite = state.archive.add(record)
    if record.code:
        rd.write_program(record.id, record.code)
    brief = {k: v for k, v in record.to_dict().items() if k not in ("code", "fingerprint")}
    rd.log("score" if record.error is None else "reject", elite=elite, **brief)


def keep_trained_policies(rd: RunDir, kept: list[tuple[str, Any]], which: str) -> None:
    """Save the trained policies ``which`` names ("best", "all"; "none": nothing) of
    ``kept`` ((program id, result) pairs) into <run>/policies/<id>/seed<k>, and log them."""
    if which == "none" or not kept:
        return
    from limen_jax.policies import keep_policies, saved_seeds

    written = keep_policies(rd.path, kept, which)
    for pid in dict.fromkeys(path.parent.name for path in written):
        rd.log("policy", id=pid, seeds=saved_seeds(rd.path, pid), path=str(Path("policies") / pid))


def write_checkpoint(rd: RunDir, it: int, state: RunState, pending: list[Request] | None) -> None:
    """``state.json`` after batch ``it`` (the archive, the strategy's memory, the next
    batch already proposed, the spend), ``usage.json`` (the LLM's, and under "programs"
    what recognising repeats saved: :func:`~limen_jax.run.repeats.savings`) and
    ``best.json``; the plots are due again."""
    usage = {**state.mutator.usage(), "programs": savings(state.archive.store)}
    rd.write_json("state.json", {
        "iteration": it, "archive": state.archive.to_dict(), "strategy": state.strategy.to_dict(),
        "pending": [request_to_dict(r) for r in pending] if pending else None,
        "spend_usd": state.mutator.spend, "usage": usage, "baseline": state.baseline,
    })
    rd.write_json("usage.json", usage)
    write_best(rd.path, state.archive.store, state.config, state.task.name)
    state.plots_due = True
