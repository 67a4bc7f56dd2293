"""The parts a search strategy plugs into: proposals, outcomes, the read-only view.

A :class:`Strategy` never calls the LLM or the trainer. From a :class:`SearchView` (the
archive as the loop lets it see it, the task, the mode) and a Generator derived from
(seed, iteration) it *proposes* a batch of :class:`Proposal` s (parent, programs to show,
failures to show, island, operator, the rendered prompt); the loop asks, checks, trains
and records them, then *tells* the strategy the batch's :class:`Outcome` s. A strategy's
own state is plain data (``to_dict``), saved in the checkpoint beside the archive.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from limen_jax.archive import Archive, ProgramRecord, program_id
from limen_jax.llm.prompts import PromptConfig, build_prompt


@dataclasses.dataclass(frozen=True)
class Proposal:
    """One child to ask for.

    id: the child's program id. iteration, island: where it belongs. operator:
    "from_scratch" or "mutate". parent_id: the program to improve (None from scratch).
    context_ids: programs handed to the mutator besides the parent (crossover material).
    system, user: the prompt, rendered when proposed (so it sees the archive as of then).
    sections: optional prompt sections included. rng_seed: the mutator's seed (and the
    replay cache's sample label). tag: strategy-private plain data (node id, ...).
    """

    id: str
    iteration: int
    island: int
    operator: str
    parent_id: str | None
    context_ids: tuple[str, ...]
    system: str
    user: str
    sections: tuple[str, ...]
    rng_seed: int
    tag: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Proposal:
        return cls(**{**data, "context_ids": tuple(data["context_ids"]), "sections": tuple(data["sections"])})


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A proposal and what became of it: the record, scored or rejected."""

    proposal: Proposal
    record: ProgramRecord


@dataclasses.dataclass
class SearchView:
    """What a strategy may read when it proposes (and update when told: the archive's
    migrations are map_elites' own bookkeeping).

    archive: the MAP-Elites archive (store + grid). task: the task (description, context).
    mode: the program mode ("full", "obs_only", "reward_only"). iteration: the batch being
    proposed. candidates: children wanted in it. prompt: the prompt settings. budget: one
    sentence on the training budget, stated in every prompt. max_obs_dim, max_work_vs_step:
    the checker's observation limit and cost budget (x one env step), stated with its
    other rules.
    """

    archive: Archive
    task: Any
    mode: str
    iteration: int
    candidates: int
    prompt: PromptConfig = PromptConfig()
    budget: str = ""
    max_obs_dim: int = 512
    max_work_vs_step: float = 100.0

    def program_failures(self, n: int) -> list[ProgramRecord]:
        """The ``n`` newest failures that are the program's fault, newest first. Failures
        of the machinery (no answer from the LLM, a checker or engine fault) are never shown
        to the LLM as its mistakes."""
        failed = [r for r in self.archive.store if r.failed and blamed_on_program(r)]
        return failed[::-1][: max(n, 0)]


def blamed_on_program(record: ProgramRecord) -> bool:
    """True unless the record's error is marked as the machinery's (``error["blame"]``)."""
    return (record.error or {}).get("blame", "program") == "program"


class Strategy(Protocol):
    """A search strategy (see module docstring and docs/evolution.md)."""

    name: str

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Proposal]: ...

    def tell(self, view: SearchView, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        """Take in a batch's outcomes (already recorded in the archive by the loop);
        returns events for the run log (e.g. migrations)."""
        ...

    def to_dict(self) -> dict[str, Any]: ...

    def done(self, view: SearchView) -> str | None:
        """A reason to stop early, or None."""
        ...


def make_proposal(
    view: SearchView,
    rng: np.random.Generator,
    index: int,
    island: int,
    *,
    parent: ProgramRecord | None,
    top: Sequence[ProgramRecord] = (),
    diverse: Sequence[ProgramRecord] = (),
    failures: Sequence[ProgramRecord] = (),
    tag: dict[str, Any] | None = None,
) -> Proposal:
    """Render the prompt for one child and draw its mutator seed (from ``rng``, in this
    order: the prompt's draws, then the seed)."""
    prompt = build_prompt(view.task, view.mode, rng, parent=parent, top=top, diverse=diverse,
                          failures=failures, config=view.prompt, budget=view.budget,
                          max_obs_dim=view.max_obs_dim, max_work_vs_step=view.max_work_vs_step)
    seed = int(rng.integers(2**31 - 1))
    return Proposal(
        id=program_id(view.iteration, index), iteration=view.iteration, island=island,
        operator="from_scratch" if parent is None else "mutate",
        parent_id=None if parent is None else parent.id,
        context_ids=tuple(r.id for r in diverse), system=prompt.system, user=prompt.user,
        sections=prompt.sections, rng_seed=seed, tag=dict(tag or {}),
    )
