"""The parts a search strategy plugs into: the read-only view, the protocol, request builders.

A :class:`Strategy` never calls the LLM or the trainer. From a :class:`SearchView` (the
archive as the loop lets it see it, the task, the mode) and a Generator derived from
(seed, iteration) it *proposes* a batch of requests (:mod:`limen_jax.search.requests`:
programs, text, evaluations); the loop carries them out and records them, then *tells*
the strategy the batch's :class:`~limen_jax.search.requests.Outcome` s. A strategy's
settings are a frozen dataclass (``Options``, filled from ``search.options``) and its
memory is plain data (``to_dict`` / ``load``), saved in the checkpoint beside the archive,
so a killed run resumes with it. ``lookahead`` says how many batches the loop may propose
ahead of the outcomes: 1 lets batch i+1 be asked while batch i trains (MAP-Elites); 0
means the strategy sees every outcome before it proposes again (a tree search).

In a run with no LLM (the offline stand-in), the strategy answers what only it knows how
to: its text requests (``offline_text``) and its own program operators
(``offline_program``); the generic operators (from scratch, mutate, crossover) are the
stand-in's (:mod:`limen_jax.llm.offline`). Each gets an :class:`OfflineRequest`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from limen_jax.archive import Archive, ProgramRecord, program_id
from limen_jax.llm.offline import OfflineAuthor, read_genome
from limen_jax.llm.prompts import PromptConfig, build_prompt
from limen_jax.search.faults import rejection_of
from limen_jax.search.requests import EvalRequest, Outcome, ProgramRequest, Request, TextRequest


@dataclasses.dataclass
class SearchView:
    """What a strategy may read when it proposes (and update when told: the archive's
    migrations are map_elites' own bookkeeping).

    archive: the MAP-Elites archive (store + grid). task: the task (description, context).
    mode: the program mode ("full", "obs_only", "reward_only"). iteration: the batch being
    proposed. candidates: children wanted in it. prompt: the prompt settings. budget: one
    sentence on the training budget, stated in every prompt. max_obs_dim, max_work_vs_step:
    the checker's observation limit and cost budget (x one env step), stated with its
    other rules. first_index: added to every index the request builders (:func:`ask_program`,
    :func:`ask_text`, :func:`evaluate`) turn into an id, so that strategies sharing one batch
    (a portfolio's members) never give two requests the same id; 0 for a strategy alone.
    demos: a function returning the run's demonstrations
    (:class:`~limen_jax.demos.DemoSet`, built or read on first call), or None. last: the
    run's last batch as planned (None: not known), so that a strategy whose fitness is not
    PPO can train its best before the run ends.
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
    first_index: int = 0
    demos: Any = None
    last: int | None = None

    @property
    def store(self) -> Any:
        return self.archive.store

    def program_failures(self, n: int) -> list[ProgramRecord]:
        """The ``n`` newest failures that are the program's fault, newest first. Failures
        of the machinery (no answer from the LLM, a checker or engine fault) are never shown
        to the LLM as its mistakes."""
        failed = [r for r in self.archive.store if r.failed and blamed_on_program(r)]
        return failed[::-1][: max(n, 0)]


def blamed_on_program(record: ProgramRecord) -> bool:
    """True unless the record's rejection is marked as the machinery's (its ``blame``)."""
    rejection = rejection_of(record)
    return rejection is None or rejection.blame == "program"


@dataclasses.dataclass(frozen=True)
class OfflineRequest:
    """What a strategy's offline answer reads.

    request: the program or text request the strategy made (its ``operator``, ``role``
    and ``tag`` say what it asked). parent: the record of ``request.parent_id`` (a program
    request), else None. others: the records a mutator gets besides the parent (a program
    request: the other parents, then the context; a text request: the context). mode: the
    program mode. author: the offline stand-in (the task's catalog, the genome helpers).
    rng: a Generator seeded by the request's ``rng_seed``; an answer draws from it in a
    fixed order, so it is deterministic (and ``offline_program`` returns None before
    drawing, so the generic operator sees the stream unused).
    """

    request: ProgramRequest | TextRequest
    parent: ProgramRecord | None
    others: tuple[ProgramRecord, ...]
    mode: str
    author: OfflineAuthor
    rng: np.random.Generator


def offline_answer(strategy: Strategy, request: OfflineRequest) -> str:
    """The offline answer to ``request``: the strategy's text, its own program operator's
    answer, else the stand-in's generic operator."""
    if isinstance(request.request, TextRequest):
        return strategy.offline_text(request)
    own = strategy.offline_program(request)
    if own is not None:
        return own
    parent = request.parent.code if request.parent is not None else None
    return request.author.program(parent, [r.code for r in request.others], request.mode, request.rng)


def describe_programs(role: str, records: Sequence[ProgramRecord]) -> str:
    """The default offline text: "Offline <role>:" and a line per record (its id, success
    and catalog pieces)."""
    lines = []
    for record in records:
        genome = read_genome(record.code)
        pieces = (f"features {', '.join(genome['features'])}; terms {', '.join(genome['terms'])}"
                  if genome else "no catalog pieces")
        scored = "untrained" if record.success is None else f"success {record.success:.2f}"
        lines.append(f"- {record.id} ({scored}): {pieces}")
    return f"Offline {role}:\n" + ("\n".join(lines) if lines else "nothing to review")


@runtime_checkable
class Strategy(Protocol):
    """A search strategy (see the module docstring and docs/concepts/strategies.md).

    The loop uses every member below and probes for none, so a strategy that subclasses
    nothing implements them all. :class:`StrategyBase` gives the defaults of all but
    ``name`` and ``propose``: a subclass writes those two and overrides what it needs.

    name: the name it is registered and recorded under. lookahead: batches the loop may
    propose ahead of the outcomes (1: batch i+1 is asked while batch i trains; 0: every
    outcome is told before the next proposal). max_iterations: a cap on the run's
    generations below ``search.iterations`` (None: no cap). keep_policies: the trained
    policies it reads ("all", "best" or None), kept at least as far as the config keeps
    them. asks_llm: False when it never asks the LLM (the run builds no mutator, so
    needs no key or catalog).
    """

    name: str
    lookahead: int
    max_iterations: int | None
    keep_policies: str | None
    asks_llm: bool

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Request]: ...

    def tell(self, view: SearchView, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        """Take in a batch's outcomes (already recorded in the archive by the loop);
        returns events for the run log, each a dict with an "event" name."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The strategy's memory as plain JSON data."""
        ...

    def load(self, state: dict[str, Any]) -> None:
        """Restore the memory :meth:`to_dict` saved."""
        ...

    def done(self, view: SearchView) -> str | None:
        """A reason to stop early, or None."""
        ...

    def offline_text(self, request: OfflineRequest) -> str:
        """The offline answer to one of the strategy's text requests."""
        ...

    def offline_program(self, request: OfflineRequest) -> str | None:
        """The offline answer (source in a markdown fence, as an LLM writes it) to one of
        the strategy's program requests, or None for the stand-in's generic operator."""
        ...


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """A strategy without settings."""


class StrategyBase:
    """Defaults for a strategy: no options, no memory, lookahead 1, never done early, as
    many generations as ``search.iterations`` asks (``max_iterations`` caps them), the
    trained policies ``--keep-policies`` keeps (``keep_policies``: "all" or "best" makes
    the loop keep at least those, for a strategy that rolls them out), asks the LLM
    (``asks_llm`` False: the run builds no mutator, so needs no key or catalog), and
    offline answers its text requests by describing their context programs
    (:func:`describe_programs`) and its program requests by the generic operators.
    Subclasses set ``name`` and implement ``propose``; ``options`` is an instance of
    their ``Options`` dataclass."""

    name: ClassVar[str] = "base"
    Options: ClassVar[type] = NoOptions
    lookahead: int = 1
    max_iterations: int | None = None
    keep_policies: str | None = None
    asks_llm: bool = True

    def __init__(self, options: Any = None) -> None:
        self.options = options if options is not None else self.Options()

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        raise NotImplementedError

    def tell(self, view: SearchView, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        return []

    def to_dict(self) -> dict[str, Any]:
        return {}

    def load(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"strategy {self.name!r} keeps no state, but the checkpoint holds {sorted(state)}")

    def done(self, view: SearchView) -> str | None:
        return None

    def offline_text(self, request: OfflineRequest) -> str:
        assert isinstance(request.request, TextRequest)
        return describe_programs(request.request.role, request.others)

    def offline_program(self, request: OfflineRequest) -> str | None:
        return None


def ask_program(
    view: SearchView,
    rng: np.random.Generator,
    index: int,
    island: int,
    *,
    parent: ProgramRecord | None,
    top: Sequence[ProgramRecord] = (),
    diverse: Sequence[ProgramRecord] = (),
    failures: Sequence[ProgramRecord] = (),
    second_parent: ProgramRecord | None = None,
    operator: str | None = None,
    evaluation: str = "ppo",
    tag: dict[str, Any] | None = None,
) -> ProgramRequest:
    """Render the standard prompt for one child and draw its mutator seed (from ``rng``,
    in this order: the prompt's draws, then the seed). ``second_parent`` makes it a
    crossover: the mutator gets it first among the other programs."""
    prompt = build_prompt(view.task, view.mode, rng, parent=parent, top=top, diverse=diverse,
                          failures=failures, config=view.prompt, budget=view.budget,
                          max_obs_dim=view.max_obs_dim, max_work_vs_step=view.max_work_vs_step)
    seed = int(rng.integers(2**31 - 1))
    parents = tuple(r.id for r in (parent, second_parent) if r is not None)
    default_op = "from_scratch" if parent is None else "crossover" if second_parent is not None else "mutate"
    return ProgramRequest(
        id=program_id(view.iteration, view.first_index + index), iteration=view.iteration, island=island,
        operator=operator or default_op, parent_ids=parents, context_ids=tuple(r.id for r in diverse),
        system=prompt.system, user=prompt.user, sections=prompt.sections, rng_seed=seed,
        evaluation=evaluation, tag=dict(tag or {}),
    )


def ask_text(
    view: SearchView,
    rng: np.random.Generator,
    index: int,
    role: str,
    *,
    system: str,
    user: str,
    context: Sequence[ProgramRecord] = (),
    tag: dict[str, Any] | None = None,
    images: Sequence[str] = (),
) -> TextRequest:
    """A text request (id "it<iteration>-t<first_index + index>") with a seed drawn from
    ``rng``; ``images``: base64 PNGs shown with it."""
    return TextRequest(id=f"it{view.iteration:04d}-t{view.first_index + index:02d}", iteration=view.iteration,
                       role=role, system=system, user=user, rng_seed=int(rng.integers(2**31 - 1)),
                       context_ids=tuple(r.id for r in context), tag=dict(tag or {}), images=tuple(images))


def evaluate(view: SearchView, index: int, records: Sequence[ProgramRecord], evaluation: str,
             tag: dict[str, Any] | None = None, **options: Any) -> EvalRequest:
    """An evaluation request (id "it<iteration>-e<first_index + index>") of stored programs."""
    return EvalRequest(id=f"it{view.iteration:04d}-e{view.first_index + index:02d}", iteration=view.iteration,
                       program_ids=tuple(r.id for r in records), evaluation=evaluation,
                       options=dict(options), tag=dict(tag or {}))
