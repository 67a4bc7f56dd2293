"""What a strategy asks the loop for, and what comes back: plain data, kept in state.json.

A strategy's ``propose`` returns a list of requests of three kinds; the loop carries
them out (asks the mutator, checks, trains) and tells the strategy an :class:`Outcome`
per request:

- :class:`ProgramRequest`: ask for a program (a rendered prompt, its parents and
  context) and evaluate the checked child with a named evaluation kind (``ppo`` by
  default). ``source="default"`` is the task's default interface (the sparse baseline)
  and ``source="given"`` a program the strategy already holds (``code``); neither calls
  the LLM, both are checked and evaluated like any answer.
- :class:`TextRequest`: ask for text (a plan, a critique, a decomposition, a
  verification score). Answered by the same mutator seam with the same accounting,
  spend cap, cache and replay; the offline mutator answers each role deterministically.
- :class:`EvalRequest`: evaluate programs already in the store with a named evaluation
  kind (``retrain``: fresh seeds at the full budget; see
  :mod:`limen_jax.search.evaluation.kind_registry`).

Every request's ``rng_seed`` is drawn from the batch's Generator, so a resumed or replayed
run asks exactly the same questions; ``tag`` is the strategy's own plain data (a tree
node, a pool slot) and comes back on the outcome.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from limen_jax.archive import ProgramRecord
from limen_jax.fields import reject_unknown

SOURCES = ("llm", "default", "given")


@dataclasses.dataclass(frozen=True)
class ProgramRequest:
    """Ask for one program.

    id: the child's program id (:func:`limen_jax.archive.program_id`). iteration, island:
    where it belongs. operator: what the prompt asks ("from_scratch", "mutate",
    "crossover", a strategy's own). parent_ids: the programs it derives from (two for a
    crossover; the first is the one the mutator improves). context_ids: programs shown
    or handed to the mutator besides the parents. system, user: the prompt, rendered when
    proposed. sections: the optional prompt sections included. rng_seed: the mutator's
    seed (and the replay cache's sample label). evaluation: the evaluation kind that
    scores the child. source: "llm", "default" or "given" (see the module). code: the
    program when ``source == "given"``. tag: strategy-private plain data.
    """

    id: str
    iteration: int
    island: int
    operator: str
    parent_ids: tuple[str, ...]
    context_ids: tuple[str, ...]
    system: str
    user: str
    sections: tuple[str, ...]
    rng_seed: int
    evaluation: str = "ppo"
    source: str = "llm"
    code: str = ""
    tag: dict[str, Any] = dataclasses.field(default_factory=dict)
    kind: str = dataclasses.field(default="program", init=False)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"request {self.id}: source must be one of {SOURCES}, got {self.source!r}")

    @property
    def parent_id(self) -> str | None:
        """The parent the mutator improves (the first of ``parent_ids``), or None."""
        return self.parent_ids[0] if self.parent_ids else None


@dataclasses.dataclass(frozen=True)
class TextRequest:
    """Ask for text. id: a label unique in the run ("it0003-t00"). role: what the text is
    ("plan", "critique", "decompose", "verify", a strategy's own); the offline mutator
    answers by role. context_ids: programs the text is about (the offline mutator reads
    them). images: pictures shown with the prompt, base64-encoded PNGs (a critic's
    rendered frames): a vision model gets them before the text, the offline mutator
    ignores them. system, user, rng_seed, iteration, tag: as for :class:`ProgramRequest`."""

    id: str
    iteration: int
    role: str
    system: str
    user: str
    rng_seed: int
    context_ids: tuple[str, ...] = ()
    tag: dict[str, Any] = dataclasses.field(default_factory=dict)
    images: tuple[str, ...] = ()
    kind: str = dataclasses.field(default="text", init=False)


@dataclasses.dataclass(frozen=True)
class EvalRequest:
    """Evaluate programs already in the store. id: a label unique in the run
    ("it0003-e00"). program_ids: what to evaluate. evaluation: a registered kind
    ("retrain", ...). options: the kind's settings (e.g. ``{"seeds": 5}``)."""

    id: str
    iteration: int
    program_ids: tuple[str, ...]
    evaluation: str
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    tag: dict[str, Any] = dataclasses.field(default_factory=dict)
    kind: str = dataclasses.field(default="eval", init=False)


Request = ProgramRequest | TextRequest | EvalRequest
_KINDS: dict[str, type] = {"program": ProgramRequest, "text": TextRequest, "eval": EvalRequest}
_TUPLES = ("parent_ids", "context_ids", "sections", "program_ids", "images")


def request_to_dict(request: Request) -> dict[str, Any]:
    return dataclasses.asdict(request)


def request_from_dict(data: dict[str, Any]) -> Request:
    """Inverse of :func:`request_to_dict`; unknown kinds and keys are an error."""
    data = dict(data)
    kind = data.pop("kind", "program")
    try:
        cls = _KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown request kind {kind!r}; expected one of {sorted(_KINDS)}") from None
    reject_unknown(cls, data)
    return cls(**{k: tuple(v) if k in _TUPLES else v for k, v in data.items()})  # type: ignore[no-any-return]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What became of a request.

    request: the request. record: for a program request, the child's record (scored or
    rejected; its ``thought`` is the answer's text around the code, its ``parent_ids``
    every parent); for an eval request, None (see ``records``). records: for an eval
    request, the evaluated records (their ``evaluations[kind]`` hold the new scores).
    text: the raw answer of a program or text request ("" when none came). error: why a
    text request got no answer (None otherwise). evaluation: the kind that scored it.
    results: the evaluation's raw results (a ``CascadeResult`` or an exception per
    program; not saved, present in the process that trained them).
    duplicate_of: for a program request whose child behaves exactly like an earlier
    program of the run, that program's id: the child was not trained, its record holds
    the earlier program's result, and it is no improvement on it (None otherwise).
    """

    request: Request
    record: ProgramRecord | None = None
    records: tuple[ProgramRecord, ...] = ()
    text: str = ""
    error: str | None = None
    evaluation: str | None = None
    results: tuple[Any, ...] = ()
    duplicate_of: str | None = None
