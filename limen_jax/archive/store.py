"""The program store: every candidate ever proposed, by id. The single source of truth.

The MAP-Elites grid holds only ids and fitness; code, scores, learning curves, lineage
and errors live here, so a rejected candidate (which never enters the grid) is still
on record and can be shown to the LLM as a failure.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any, Literal

from limen_jax.fields import reject_unknown

Stage = Literal["rejected", "demos", "short", "full"]
STAGES: tuple[str, ...] = ("rejected", "demos", "short", "full")


def program_id(iteration: int, index: int) -> str:
    """A readable, sortable id for the ``index``-th candidate of ``iteration``."""
    return f"it{iteration:04d}-c{index:02d}"


@dataclasses.dataclass
class ProgramRecord:
    """One candidate interface program and everything measured about it.

    id: unique key in the store (see :func:`program_id`).
    code: the program source (as extracted from the mutator's answer; may be "").
    iteration: evolution iteration that proposed it (0 = first generation).
    island: island the candidate was proposed for and is inserted into.
    parent_ids: lineage; empty for from-scratch programs, two ids for crossover.
    obs_dim: observation length, the first MAP-Elites descriptor (None if rejected
        before it was known).
    reward_ast_size: AST node count of ``compute_reward``, the second descriptor.
    success_per_seed: success rate of the trained policy, one entry per training seed.
    success: mean of ``success_per_seed``; None when never trained.
    final_return: mean episode return (under the evolved reward) at the end of training.
    curves: learning curves averaged over seeds, by name (e.g. "success", "return"; a
        dict reward adds "reward/<term>", the term's sum per episode), each a list of
        floats over training progress.
    feedback: derived training feedback (trend, spread, plateau) shown to the LLM.
    error: None, or {"stage": ..., "message": ..., "trace": ...} when the candidate
        failed extraction, validation, compilation or training.
    stage: "rejected" (never trained to a score), "demos" (scored on demonstrations only,
        not trained: GRACE's fitness), "short" (stopped by the cascade after the short run)
        or "full" (full multi-seed run).
    thought: the answer's text around the code (the LLM's reasoning, a design thought).
    evaluations: scores by other evaluation kinds than the fitness, by kind (e.g.
        "retrain": {"success": ..., "success_per_seed": [...], "seeds": [...], ...}).
    metadata: anything else worth keeping (mutator name, tokens, cost, timings, ...).
    eval_terms: a dict reward's terms, each one's mean sum per episode in the final
        evaluation (mean over seeds), by name; {} for a scalar reward.
    fingerprint: what the program's φ and R return on the check sample, as
        :meth:`limen_jax.program.fingerprint.Fingerprint.to_json` gives it; None when it
        was rejected before its check passed, and for the task's default interface.
    duplicate_of: the earlier program of the run this one behaves identically to (equal
        fingerprints, the same evaluation kind): it was never trained and holds that
        program's result. A repeat is not ``evaluated``: it never enters the grid, the
        best-of lists or parent selection, where the program it repeats already is.
    """

    id: str
    code: str
    iteration: int = 0
    island: int = 0
    parent_ids: list[str] = dataclasses.field(default_factory=list)
    obs_dim: int | None = None
    reward_ast_size: int | None = None
    success_per_seed: list[float] = dataclasses.field(default_factory=list)
    success: float | None = None
    final_return: float | None = None
    curves: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    feedback: dict[str, Any] = dataclasses.field(default_factory=dict)
    error: dict[str, Any] | None = None
    stage: Stage = "rejected"
    thought: str = ""
    evaluations: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    eval_terms: dict[str, float] = dataclasses.field(default_factory=dict)
    fingerprint: dict[str, Any] | None = None
    duplicate_of: str | None = None

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"program {self.id}: unknown stage {self.stage!r}; expected one of {STAGES}")

    @property
    def evaluated(self) -> bool:
        """Trained at the full budget to a score without error: eligible for the grid, the
        best-of lists and parent selection. A short-run score (one seed, a fraction of the
        budget, stopped by the cascade) never competes with a multi-seed full-run mean. A
        repeat (``duplicate_of``) never competes with the program it repeats."""
        return self.error is None and self.success is not None and self.stage == "full" and self.duplicate_of is None

    @property
    def failed(self) -> bool:
        return self.error is not None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProgramRecord:
        """Inverse of :meth:`to_dict`; unknown keys are an error (a corrupt or foreign file)."""
        reject_unknown(cls, data)
        return cls(**data)


def _by_success(record: ProgramRecord) -> float:
    return float("-inf") if record.success is None else float(record.success)


class ProgramStore:
    """Records by id, in insertion order. Ids are unique; records are never removed."""

    def __init__(self, records: list[ProgramRecord] | None = None) -> None:
        self._records: dict[str, ProgramRecord] = {}
        for record in records or []:
            self.add(record)

    def add(self, record: ProgramRecord) -> None:
        if record.id in self._records:
            raise ValueError(f"program id {record.id!r} is already in the store")
        self._records[record.id] = record

    def get(self, program_id: str) -> ProgramRecord:
        try:
            return self._records[program_id]
        except KeyError:
            raise KeyError(f"no program {program_id!r} in the store") from None

    def __contains__(self, program_id: object) -> bool:
        return program_id in self._records

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[ProgramRecord]:
        return iter(self._records.values())

    def evaluated(self) -> list[ProgramRecord]:
        """Records with a score, in insertion order."""
        return [r for r in self if r.evaluated]

    def top_k(self, k: int, key: Callable[[ProgramRecord], float] = _by_success) -> list[ProgramRecord]:
        """The ``k`` best evaluated records by ``key`` (default: mean success), best first.

        Ties keep insertion order (the earlier program ranks first): sorted() is stable.
        """
        return sorted(self.evaluated(), key=key, reverse=True)[: max(k, 0)]

    def best(self, key: Callable[[ProgramRecord], float] = _by_success) -> ProgramRecord | None:
        top = self.top_k(1, key)
        return top[0] if top else None

    def to_list(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self]

    @classmethod
    def from_list(cls, data: list[dict[str, Any]]) -> ProgramStore:
        return cls([ProgramRecord.from_dict(d) for d in data])

    def to_json(self) -> str:
        return json.dumps(self.to_list())

    @classmethod
    def from_json(cls, text: str) -> ProgramStore:
        return cls.from_list(json.loads(text))
