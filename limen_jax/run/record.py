"""Recording a batch's outcomes, as functions of what came back (no loop needed).

:func:`score_batch` writes every result into its record by its evaluation kind and
collects what the loop then writes and tells (:class:`Scored`); :func:`batch_outcomes`
is what the strategy is told; :func:`policies_to_keep` the trained policies there are
to keep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from limen_jax.run.ask import Child, Prepared
from limen_jax.run.batch_jobs import Submitted
from limen_jax.search.evaluation.jobs import EvalBatch
from limen_jax.search.evaluation.kind_registry import evaluation_kind
from limen_jax.search.requests import Outcome


@dataclasses.dataclass
class Scored:
    """A batch scored. results: program id -> (evaluation kind, result) of this batch's
    children; evaluated: the outcomes of its eval requests; events: the ``evaluation``
    events to log (fields of each); demos: (demonstrations, iteration) a child's result
    brought; trained: (children, results) per training job, whose policies may be kept."""

    results: dict[str, tuple[str, Any]] = dataclasses.field(default_factory=dict)
    evaluated: list[Outcome] = dataclasses.field(default_factory=list)
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    demos: list[tuple[Any, int]] = dataclasses.field(default_factory=list)
    trained: list[tuple[list[Child], list[Any]]] = dataclasses.field(default_factory=list)


def score_batch(submitted: Sequence[Submitted], batches: Sequence[EvalBatch]) -> Scored:
    """Write every job's results into their records (each by its kind's ``score``)."""
    out = Scored()
    for s, batch in zip(submitted, batches):
        kind = evaluation_kind(s.kind)
        if s.request is None:
            for child, res in zip(s.children, batch.results):
                kind.score(child.record, res, s.job)
                out.results[child.record.id] = (s.kind, res)
                more = getattr(res, "demos", None)  # a result type's optional field (learner's)
                if more is not None and child.record.error is None:
                    out.demos.append((more, child.record.iteration))
            out.trained.append((list(s.children), list(batch.results)))
            continue
        for record, res in zip(s.records, batch.results):
            kind.score(record, res, s.job)
            out.events.append({"id": s.request.id, "program": record.id, "kind": s.kind,
                               **kind.summary(record.evaluations.get(s.kind, {}))})
        out.evaluated.append(Outcome(s.request, records=tuple(s.records), evaluation=s.kind,
                                     results=tuple(batch.results)))
    return out


def batch_outcomes(prepared: Prepared, scored: Scored) -> list[Outcome]:
    """What the strategy is told of the batch: every child, text answer and evaluation, in that order."""
    out = [Outcome(c.request, c.record, text=c.text, evaluation=scored.results.get(c.record.id, (None,))[0],
                   results=scored.results[c.record.id][1:] if c.record.id in scored.results else (),
                   duplicate_of=c.record.duplicate_of)
           for c in prepared.children]
    out += [Outcome(t.request, text=t.text, error=t.error) for t in prepared.texts]
    return out + scored.evaluated


def policies_to_keep(children: Sequence[Child], results: Sequence[Any]) -> list[tuple[str, Any]]:
    """(program id, result) of every trained child that was not rejected and brought policies
    (the baseline's are not kept: it is no program of the search)."""
    return [(c.record.id, r) for c, r in zip(children, results)
            if c.record.error is None and getattr(r, "policies", None) and c.request.operator != "baseline"]
