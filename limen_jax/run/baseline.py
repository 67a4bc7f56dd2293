"""The run's baseline: the task's default interface (default observation, sparse reward),
trained once at the run's full budget in the first batch, beside the candidates (a job of
its own: its observation is far wider than a program's, :func:`limen_jax.run.batch_jobs.jobs_for`).

It is the level every search is measured against, and nothing more: not a candidate,
never a parent, never in the archive or its grid, not counted as a program of the
search. A run that trains the default interface anyway (``--mode sparse``, the
``sparse`` strategy) takes that program's result as its baseline instead of training it
twice. What is kept (``state.json``'s ``baseline``, the ``baseline`` event) is a plain
dict: ``{"id": str, "success": float | None, "success_per_seed": list[float],
"error": dict | None}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from limen_jax.run.ask import Child, Prepared, default_child
from limen_jax.search.requests import ProgramRequest

BASELINE_ID = "baseline"
DESCRIPTION = "default observation, sparse reward"


def with_baseline(prepared: Prepared, state: Any) -> Prepared:
    """``prepared`` with the baseline to train beside its children, when the run wants one
    and has none yet, and no child of the batch is the task's default already."""
    if state.baseline is not None or not state.config.search.baseline or state.config.search.mode == "sparse":
        return prepared
    if prepared.stop is not None or any(c.request.source == "default" for c in prepared.children):
        return prepared
    request = ProgramRequest(BASELINE_ID, prepared.iteration, 0, "baseline", (), (), "", "", (), 0,
                             source="default")
    prepared.baseline = default_child(request, state.task)
    return prepared


def baseline_of(record: Any) -> dict[str, Any]:
    """The kept form of the baseline's scored ``record`` (see the module)."""
    return {"id": record.id, "success": record.success, "success_per_seed": list(record.success_per_seed),
            "error": record.error}


def note_baseline(state: Any, prepared: Prepared, log: Any) -> None:
    """Keep the batch's baseline in ``state`` (the trained one, or a default child a sparse
    run trained as a program) and log it once."""
    if state.baseline is not None:
        return
    found = _default_children(prepared.children) if prepared.baseline is None else [prepared.baseline]
    if found:
        state.baseline = baseline_of(found[0].record)
        log("baseline", **state.baseline)


def _default_children(children: Sequence[Child]) -> list[Child]:
    return [c for c in children if c.request.source == "default" and c.record.success is not None]


def baseline_line(baseline: dict[str, Any] | None, best: Any) -> list[str]:
    """The summary's baseline line and the best's margin over it ([] without a baseline)."""
    if baseline is None:
        return []
    if baseline.get("success") is None:
        return [f"baseline: not trained ({DESCRIPTION}): {(baseline.get('error') or {}).get('message', '')}"]
    line = f"baseline: success {baseline['success']:.3f} ({DESCRIPTION})"
    if best is not None and best.success is not None and best.id != baseline["id"]:
        line += f"; best {best.success - baseline['success']:+.3f} over it"
    return [line]
