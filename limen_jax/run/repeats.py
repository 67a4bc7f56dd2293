"""Never paying twice for one behaviour: the programs of a run that repeat an earlier one.

Every checked program carries its fingerprint (:mod:`limen_jax.program.fingerprint`):
what its φ and R return on the check sample. A program whose fingerprint equals an
earlier program's of the run, scored by the same evaluation kind, is a *repeat*: it is
not trained; its record names the program it repeats (``duplicate_of``) and takes that
program's result when its batch is recorded. "Earlier" is every program checked before
it: recorded, training (with the pipeline, a batch is checked while the one before it
trains) or earlier in the same batch. Batches are recorded in order and a batch's
children in order, so the program repeated is always recorded first.

The index is rebuilt from the records when a run is resumed (each record keeps its
fingerprint, validated there), so a resumed run recognises exactly the repeats the
uninterrupted one would have. The task's default interface has no fingerprint and is
never a repeat; a ``source="given"`` program is checked like any answer and is a repeat
when it behaves like an earlier one.

Each program with a fingerprint also records, as data only, how near it is to the
closest earlier program (``metadata["nearest"]``, :func:`~limen_jax.program.fingerprint.similarity`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from limen_jax.archive import ProgramRecord, ProgramStore
from limen_jax.program.fingerprint import Fingerprint, similarity
from limen_jax.run.ask import Child

# what an evaluation kind's ``score`` writes into a record: the result a repeat takes
RESULT_FIELDS = ("stage", "success_per_seed", "success", "final_return", "curves", "feedback", "error",
                 "eval_terms")


class Repeats:
    """The fingerprints of a run's programs so far, and which came first.

    on: whether a repeat is recognised (``search.dedupe``); off, fingerprints and
    nearest programs are still recorded.
    """

    def __init__(self, on: bool) -> None:
        self.on = on
        self._first: dict[tuple[str, str], str] = {}  # (evaluation kind, digest) -> the first program's id
        self._seen: list[tuple[str, Fingerprint]] = []  # every program that is not a repeat, in order

    @classmethod
    def of(cls, records: Iterable[ProgramRecord], on: bool) -> Repeats:
        """The index of the recorded ``records``, in order. ValueError naming the program
        when a stored fingerprint is malformed or a repeat names no earlier program (a
        corrupt or foreign run directory)."""
        out, ids = cls(on), set()
        for record in records:
            if record.duplicate_of is not None and (record.duplicate_of not in ids or record.fingerprint is None):
                raise ValueError(f"program {record.id} in the run directory repeats {record.duplicate_of!r}, "
                                 "which is no earlier program of the run, or has no fingerprint")
            ids.add(record.id)
            if record.fingerprint is None:
                continue
            try:
                fp = Fingerprint.from_json(record.fingerprint)
            except ValueError as exc:
                raise ValueError(f"program {record.id} in the run directory: {exc}") from None
            if record.duplicate_of is None:
                out._add(record.id, str(record.metadata.get("evaluation", "ppo")), fp)
        return out

    def _add(self, program_id: str, kind: str, fp: Fingerprint) -> None:
        self._first.setdefault((kind, fp.digest), program_id)
        self._seen.append((program_id, fp))

    def mark(self, children: Sequence[Child]) -> list[Child]:
        """Give each checked child of a batch (in order) its fingerprint and nearest
        earlier program; mark the repeats (``duplicate_of`` set, ``interface`` dropped:
        nothing trains them). Returns the repeats."""
        repeats = []
        for child in children:
            fp = getattr(child.interface, "fingerprint", None)
            if fp is None:  # rejected, or the task's default
                continue
            record, kind = child.record, child.request.evaluation
            record.fingerprint = fp.to_json()
            record.metadata["evaluation"] = kind
            nearest = self._nearest(fp)
            if nearest is not None:
                record.metadata["nearest"] = nearest
            first = self._first.get((kind, fp.digest))
            if self.on and first is not None:
                record.duplicate_of, child.interface = first, None
                repeats.append(child)
            else:
                self._add(record.id, kind, fp)
        return repeats

    def settle(self, children: Sequence[Child], train_s: float, store: ProgramStore) -> None:
        """When a batch is recorded: each child's training seconds (``train_s``, its share
        of the batch's), and each repeat's result, copied from the program it repeats
        (recorded in ``store``, or earlier among ``children`` and scored by now)."""
        batch = {c.record.id: c.record for c in children}
        for child in children:
            record = child.record
            record.metadata["train_wall_s"] = train_s
            if record.duplicate_of is not None:
                original = batch.get(record.duplicate_of) or store.get(record.duplicate_of)
                _take_result(record, original, child.request.evaluation)

    def _nearest(self, fp: Fingerprint) -> dict[str, Any] | None:
        """The earlier program closest to ``fp`` and how close (the same behaviour first,
        then the most shared features plus reward rank correlation; the earliest on ties)."""
        best: tuple[float, ...] | None = None
        out = None
        for pid, other in self._seen:
            near = similarity(fp, other)
            key = (float(near["same"]), (near["shared_features"] or 0.0) + (near["reward_rank_correlation"] or 0.0))
            if best is None or key > best:
                best, out = key, {"id": pid, **near}
        return out


def _take_result(record: ProgramRecord, original: ProgramRecord, kind: str) -> None:
    """Copy ``original``'s result (as evaluation ``kind`` scored it) into the repeat
    ``record``, and what not training it saved (``metadata["train_s_saved"]``: the
    original's training seconds)."""
    for name in RESULT_FIELDS:
        setattr(record, name, copy.deepcopy(getattr(original, name)))
    if kind in original.evaluations:
        record.evaluations[kind] = copy.deepcopy(original.evaluations[kind])
    record.metadata["train_wall_s"] = 0.0
    record.metadata["train_s_saved"] = float(original.metadata.get("train_wall_s", 0.0))


def savings(records: Iterable[ProgramRecord]) -> dict[str, Any]:
    """What recognising repeats saved in ``records``: programs checked (a fingerprint),
    repeats recognised, and training seconds not spent (each repeat's original's)."""
    checked = repeats = 0
    saved = 0.0
    for r in records:
        checked += r.fingerprint is not None
        if r.duplicate_of is not None:
            repeats += 1
            saved += float(r.metadata.get("train_s_saved", 0.0))
    return {"checked": checked, "repeats": repeats, "train_s_saved": round(saved, 2)}
