"""The model client seam: one prompt in, one completion out.

Every model client (Anthropic, a test fake, an OpenAI-compatible one) implements
:class:`Client`: ``complete(system, user, images, seed) -> Completion``. A client knows
no strategy, no program and no run: it sends a prompt and reports the text, the model,
and what the call used (tokens, dollars, retries). What wraps it is shared by every
client: the response cache and replay (:mod:`limen_jax.llm.replay`), the spend ledger and
the cap (:mod:`limen_jax.llm.cap`), the retry loop and its error classes
(:mod:`limen_jax.llm.retry`). Extracting and validating a program from the text is the
caller's job (:mod:`limen_jax.program`), so a malformed or code-less answer is an
ordinary completion, never a crash.

Errors a run cannot recover from are exceptions (subclasses of :class:`ClientError`):
:class:`BudgetExceeded` (stop cleanly), a replay :class:`~limen_jax.llm.replay.CacheMiss`,
:class:`MissingAPIKey`, :class:`RequestRefused` (bad model, bad key). Transient failures
that outlast the retries come back as a completion with ``error`` set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from limen_jax.fields import reject_unknown


class ClientError(Exception):
    """A client cannot go on; the run should stop (and can be resumed)."""


class BudgetExceeded(ClientError):
    """The LLM spend cap would be (or has been) exceeded. Stop the run cleanly."""


class RequestRefused(ClientError):
    """The API refused the request (bad key, unknown model, invalid parameters).

    Not retried and fatal to the run: every later request would be refused the same way.
    """


class MissingAPIKey(ClientError, ValueError):
    """No API key was given and the client's environment variable is not set: a setting the
    run is started with, so also a ValueError (the CLI answers it in one line, exit 2)."""


@dataclasses.dataclass(frozen=True)
class Usage:
    """What one call used. input_tokens, output_tokens: billed tokens (0 offline);
    cost_usd: dollars (0 offline and for a cached answer); retries: attempts beyond the
    first."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    retries: int = 0


@dataclasses.dataclass(frozen=True)
class Completion:
    """One answer.

    text: the raw answer (program extraction happens later). usage: what the call used.
    model: the model (or stand-in) that wrote the text. cached: served from the replay
    cache instead of a fresh call. error: None, or why no usable answer came back
    (retries exhausted, ...). metadata: client-specific details (stop reason, request id,
    ``truncated`` when the answer was cut at ``max_tokens``, ...).
    """

    text: str
    usage: Usage = Usage()
    model: str = ""
    cached: bool = False
    error: str | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A flat dict (the usage's fields beside the others): one replay cache line's answer."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "usage"}
        return {**out, **dataclasses.asdict(self.usage), "metadata": dict(self.metadata)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Completion:
        """Inverse of :meth:`to_dict`; an unknown key is an error."""
        data = dict(data)
        data.pop("code", None)  # the cache format's lines also hold an extracted program: always None
        usage = {f.name: data.pop(f.name) for f in dataclasses.fields(Usage) if f.name in data}
        reject_unknown(cls, data)
        return cls(**data, usage=Usage(**usage))


@runtime_checkable
class Client(Protocol):
    """A model client: ``complete`` answers one prompt.

    name: what the run's start line and usage call it ("anthropic", ...).
    ``complete``: ``system`` and ``user`` are the prompt; ``images`` base64-encoded PNGs
    shown before the user text (a client without vision may ignore them); ``seed`` the
    call's own seed (a client that samples may use it; the replay cache keys on it).
    Raises a :class:`ClientError` when the run cannot go on.
    """

    name: str

    def complete(self, system: str, user: str, images: Sequence[str] = (), seed: int = 0) -> Completion: ...


@runtime_checkable
class PricedClient(Client, Protocol):
    """A client that can bound a call's cost before making it (what the cap needs).

    ``worst_cost``: dollars the call could cost at most (estimated input and a full-length
    answer)."""

    def worst_cost(self, system: str, user: str, images: Sequence[str] = ()) -> float: ...


@dataclasses.dataclass
class Answered:
    """A client that answers every prompt with ``text`` (written by ``model``), at no cost:
    an answer made without a model (the offline stand-in's, a strategy's own) passing
    through the cache like any other."""

    text: str
    model: str = "offline"
    name: str = "offline"

    def complete(self, system: str, user: str, images: Sequence[str] = (), seed: int = 0) -> Completion:
        return Completion(self.text, model=self.model)
