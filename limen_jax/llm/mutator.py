"""The mutation seam: one request in, one response out.

Every mutation operator (Anthropic, offline, replay, a test fake) implements
:class:`Mutator`. A mutator returns text; extracting and validating the program is the
caller's job (:mod:`limen_jax.program`), so a malformed or code-less answer is an
ordinary response that the validation path rejects, never a crash.

Errors a run cannot recover from are exceptions (subclasses of :class:`MutatorError`):
:class:`BudgetExceeded` (stop cleanly), a replay :class:`~limen_jax.llm.replay.CacheMiss`,
a missing API key, a request the API refuses (bad model, bad key). Transient failures
that outlast the retries come back as a response with ``error`` set.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from limen_jax.archive.store import ProgramRecord

from limen_jax.fields import reject_unknown
from limen_jax.modes import PROGRAM_MODES as MODES
from limen_jax.modes import ProgramMode as Mode


class MutatorError(Exception):
    """A mutator cannot go on; the run should stop (and can be resumed)."""


class BudgetExceeded(MutatorError):
    """The LLM spend cap would be (or has been) exceeded. Stop the run cleanly."""


@dataclasses.dataclass(frozen=True)
class MutationRequest:
    """What a mutator is asked.

    system, user: the prompt (see :func:`limen_jax.llm.prompts.build_prompt`).
    task_name: the task, for logs and the offline mutator's catalog.
    mode: which functions the answer must define ("full", "obs_only", "reward_only").
    parent: the program to improve; None for a from-scratch proposal.
    others: other programs (top and diverse) an operator may draw on, e.g. for crossover.
    role: "program" for a program; otherwise the kind of text asked for ("plan",
        "critique", "decompose", "verify", ...): the answer is text, not code.
    rng_seed: seed for the mutator's own randomness. Give every call in a run its own
        seed: the replay cache keys on it, so equal prompts with different seeds are
        distinct samples and a resumed run asks exactly the same questions.
    operator: what the prompt asks of a program ("from_scratch", "mutate", "crossover", or a
        strategy's own, e.g. "retune"); an LLM reads it in the prompt, the offline mutator
        dispatches on it ("" for a text request).
    images: base64-encoded PNGs shown with the prompt (e.g. a critic's frames); the
        Anthropic client sends them as image blocks before the text, the offline mutator
        ignores them, the replay cache keys on their digest.
    """

    system: str
    user: str
    task_name: str
    mode: Mode = "full"
    parent: ProgramRecord | None = None
    others: list[ProgramRecord] = dataclasses.field(default_factory=list)
    rng_seed: int = 0
    role: str = "program"
    operator: str = ""
    images: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; expected one of {MODES}")


@dataclasses.dataclass(frozen=True)
class MutationResponse:
    """What a mutator answered.

    text: the raw answer (program extraction happens later).
    code: extracted source if a mutator already has it; usually None.
    input_tokens, output_tokens: billed tokens of this call (0 for offline).
    cost_usd: dollars spent by this call (0 for offline and for cache hits).
    model: the model (or operator) that produced the text.
    cached: True when served from the replay cache instead of a fresh call.
    error: None, or why no usable answer came back (retries exhausted, ...).
    retries: attempts beyond the first.
    metadata: operator-specific details (offline edit ops, stop reason, request id, ...).
    """

    text: str
    code: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model: str = ""
    cached: bool = False
    error: str | None = None
    retries: int = 0
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MutationResponse:
        reject_unknown(cls, data)
        return cls(**data)


@runtime_checkable
class Mutator(Protocol):
    """A mutation operator: ``propose`` answers one request."""

    name: str

    def propose(self, request: MutationRequest) -> MutationResponse: ...
