"""A pre-screen between the checker and training, for every strategy: ``--prescreen``.

``--prescreen KIND[:THRESHOLD]`` runs evaluation kind KIND (one that gives a number per
program: ``value(result)``; today ``demos``, the ranking accuracy on demonstrations) on
every checked child of a batch before it is trained. A child scoring below THRESHOLD is
rejected, never trained: its record's error (stage ``prescreen``, blame ``program``)
gives the score as the reason, so the next prompts show it like any other failure.
Children that pass keep their score in ``record.metadata["scores"]``. The task's default
interface (the sparse baseline) and children the strategy already evaluates with KIND
are not screened.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from limen_jax.search.faults import Rejection, describe, rejection_of

# kind -> the threshold used when none is given. demos: 0.5 rejects a reward that ranks
# expert play no better than a constant would; the reference rewards of xland_medium and
# xland_hard rank 0.768 and 0.532 (benchmarks/prescreen.py), so a higher default would
# refuse a reward that trains the hard task well.
DEFAULT_THRESHOLDS = {"demos": 0.5}


@dataclasses.dataclass(frozen=True)
class Prescreen:
    kind: str
    threshold: float


def parse_prescreen(spec: str | None) -> Prescreen | None:
    """``"demos"`` or ``"demos:0.7"`` -> Prescreen; None or "" or "none" -> None.
    ValueError (one line) for anything else."""
    if spec is None or spec in ("", "none"):
        return None
    kind, colon, raw = str(spec).partition(":")
    if kind not in DEFAULT_THRESHOLDS:
        raise ValueError(f"prescreen {spec!r}: unknown kind {kind!r}; expected one of {sorted(DEFAULT_THRESHOLDS)}"
                         f"[:threshold]")
    if not colon:
        return Prescreen(kind, DEFAULT_THRESHOLDS[kind])
    try:
        threshold = float(raw)
    except ValueError:
        raise ValueError(f"prescreen {spec!r}: the threshold must be a number in [0, 1], got {raw!r}") from None
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"prescreen {spec!r}: the threshold must be a number in [0, 1], got {raw!r}")
    return Prescreen(kind, threshold)


def screen(prescreen: Prescreen, children: Sequence[Any], ctx: Any) -> list[dict[str, Any]]:
    """Score the trainable ``children`` (:class:`limen_jax.run.ask.Child`) with the kind and
    reject those below the threshold (their ``interface`` becomes None). Returns one
    event per screened child."""
    from limen_jax.search.evaluation.kind_registry import evaluation_kind

    kind = evaluation_kind(prescreen.kind)
    todo = [c for c in children if c.interface is not None and c.request.source != "default"
            and c.request.evaluation != prescreen.kind]
    if not todo:
        return []
    job = kind.job(ctx, [c.interface for c in todo], {})
    batch = kind.run(job, None)
    events = []
    for child, result in zip(todo, batch.results):
        record = child.record
        if isinstance(result, BaseException):
            kind.score(record, result, job)  # the program failed on the demonstrations: rejected
            failed = rejection_of(record) or Rejection("prescreen", describe(result))
            record.error = dataclasses.replace(failed, stage="prescreen", blame="program").to_dict()
            child.interface = None
            events.append({"id": record.id, "kind": prescreen.kind, "passed": False, "error": failed.message})
            continue
        value = float(kind.value(result))  # type: ignore[attr-defined]
        record.metadata.setdefault("scores", {})[prescreen.kind] = value
        passed = value >= prescreen.threshold
        if not passed:
            reason = kind.reason(result, prescreen.threshold)  # type: ignore[attr-defined]
            record.error = Rejection("prescreen", reason, details={"score": value}).to_dict()
            child.interface = None
        events.append({"id": record.id, "kind": prescreen.kind, "score": value, "passed": passed,
                       "threshold": prescreen.threshold})
    return events


def screen_and_report(prescreen: Prescreen, children: Sequence[Any], ctx: Any, rd: Any, say: Any, progress: Any,
                      iteration: int) -> None:
    """:func:`screen` the batch with the status line saying so, log each verdict to
    ``rd`` (event ``prescreen``) and ``say`` them in one line."""
    progress.set("prescreen", f"iter {iteration}: pre-screening on {prescreen.kind}")
    try:
        events = screen(prescreen, children, ctx)
    finally:
        progress.clear("prescreen")
    for event in events:
        rd.log("prescreen", iteration=iteration, **event)
    if events:
        say(verdicts_line(prescreen, events))


def verdicts_line(prescreen: Prescreen, events: Sequence[dict[str, Any]]) -> str:
    """One line of a batch's pre-screen verdicts: each program's score and whether it
    passed (``p3 0.854 passed``), or why it failed to run."""
    def one(e: dict[str, Any]) -> str:
        if "score" not in e:
            return f"{e['id']} failed ({e.get('error', 'error')})"
        return f"{e['id']} {e['score']:.3f} {'passed' if e['passed'] else 'rejected'}"

    return f"  prescreen {prescreen.kind} (threshold {prescreen.threshold:g}): {'; '.join(map(one, events))}"
