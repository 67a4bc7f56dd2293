"""Claude as a model client (:class:`~limen_jax.llm.client.Client`), through the official
``anthropic`` SDK.

What this adds to a bare SDK call:

- the SDK's errors classified once for the shared retry loop (:mod:`limen_jax.llm.retry`;
  the SDK's own retries are off, ``max_retries=0``): 408/409/429/5xx (529 overloaded
  included), timeouts, dropped connections and malformed replies (a body that is not
  JSON, an HTML page, a 200 without ``usage`` or with an empty content list) are
  transient, with ``retry-after-ms`` / ``retry-after`` honoured; any other HTTP status is
  a refused request;
- a reply cut off at ``max_tokens`` is marked (``metadata["truncated"]``) so the loop can
  tell the LLM its answer was cut, not that its program is wrong;
- token and dollar accounting per call, from a per-family price table
  (:data:`PRICES_PER_MTOK`), and the worst case of a call before it is sent (what the
  cap, :class:`~limen_jax.llm.cap.Capped`, reserves);
- the API key from ``ANTHROPIC_API_KEY`` (a clear error when missing) and a base URL from
  the argument or ``ANTHROPIC_BASE_URL`` (tests point it at a local fake server).

Sampling: the paper used Claude Sonnet at temperature 0.7. Claude Sonnet 5 and later (and
Opus 4.7+) reject a non-default temperature with HTTP 400, and SDK 2.x no longer has a
``temperature`` argument; so the temperature is sent (as an extra body field) only to
models that accept it. :data:`PAPER_MODEL` is the newest Sonnet that does.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import anthropic
import numpy as np
from anthropic.types import OutputConfigParam

from limen_jax.llm.client import Completion, MissingAPIKey, RequestRefused, Usage
from limen_jax.llm.retry import RetryPolicy, Transient, gave_up, with_retries

log = logging.getLogger(__name__)

# The newest Sonnet the installed SDK (2.12) lists.
DEFAULT_MODEL = "claude-sonnet-5-5"
# The newest Sonnet that still takes a sampling temperature: the paper's setting (0.7).
PAPER_MODEL = "claude-sonnet-4-6"

# US dollars per million tokens (input, output) by model-id prefix; the longest prefix wins.
# From Anthropic's published model pages; pass ``prices=`` for anything else.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "claude-fable-5": (10.0, 50.0),
    "claude-opus-5-5": (4.0, 20.0),
    "claude-opus-5": (5.0, 25.0),
    "claude-opus-4-8": (5.0, 25.0),
    "claude-opus-4-7": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4": (15.0, 75.0),  # Opus 4 and 4.1
    "claude-sonnet-5": (2.0, 10.0),  # Sonnet 5 and 5.5
    "claude-sonnet-4": (3.0, 15.0),  # Sonnet 4, 4.5, 4.6
    "claude-haiku-5-5": (0.10, 0.50),  # the band for prompts up to 100k tokens
    "claude-haiku-4": (1.0, 5.0),
}
# Prompt-cache writes and reads are billed at these multiples of the input price. We do not
# ask for prompt caching, but count it if a response reports it.
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1
# Model families that answer HTTP 400 to a non-default temperature.
NO_TEMPERATURE_PREFIXES: tuple[str, ...] = (
    "claude-sonnet-5",
    "claude-opus-5",
    "claude-opus-4-7",
    "claude-opus-4-8",
    "claude-fable",
    "claude-mythos",
    "claude-haiku-5",
)
# A pessimistic characters-per-token ratio for the pre-call budget estimate (English prose
# runs ~4, code ~3): overestimating the input only makes the cap stop a little early.
CHARS_PER_TOKEN_ESTIMATE = 3.0
# Tokens an image may cost at most (the API downsizes larger images to about this), for the
# same estimate.
IMAGE_TOKENS_ESTIMATE = 1600

_RETRY_STATUSES = frozenset({408, 409, 429})
Effort = Literal["low", "medium", "high", "xhigh", "max"]


class MalformedReply(Exception):
    """HTTP 200, but not a usable message (no usage, no content, not a message at all).
    Transient: retried like a 5xx."""


def price_for(model: str) -> tuple[float, float]:
    """(input, output) dollars per million tokens for ``model``, by longest matching prefix."""
    matches = [p for p in PRICES_PER_MTOK if model.startswith(p)]
    if not matches:
        raise ValueError(f"no price known for model {model!r}; pass prices=(input, output) in $ per million tokens")
    return PRICES_PER_MTOK[max(matches, key=len)]


def accepts_temperature(model: str) -> bool:
    return not model.startswith(NO_TEMPERATURE_PREFIXES)


def call_cost(
    prices: tuple[float, float],
    input_tokens: int,
    output_tokens: int,
    cache_write_tokens: int = 0,
    cache_read_tokens: int = 0,
) -> float:
    """Dollars for one call."""
    p_in, p_out = prices
    billed_in = input_tokens + CACHE_WRITE_FACTOR * cache_write_tokens + CACHE_READ_FACTOR * cache_read_tokens
    return (billed_in * p_in + output_tokens * p_out) / 1e6


def _retry_after(err: Exception) -> float:
    """Seconds the server asked us to wait: ``retry-after-ms`` (milliseconds) first, then
    ``retry-after`` (seconds); 0 when neither is a number (an HTTP date: our own backoff)."""
    response = getattr(err, "response", None)
    if response is None:
        return 0.0
    for header, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = response.headers.get(header)
        try:
            if value is not None:
                return max(0.0, float(value) * scale)
        except ValueError:
            continue
    return 0.0


def _validated(message: Any) -> anthropic.types.Message:
    """The message, or :class:`MalformedReply` when a 200 carried something unusable."""
    if not isinstance(message, anthropic.types.Message):
        raise MalformedReply(f"the reply is not a message ({type(message).__name__})")
    if getattr(message, "usage", None) is None:
        raise MalformedReply("the reply has no usage")
    if not message.content:
        raise MalformedReply("the reply has an empty content list")
    return message


def _is_transient(err: Exception) -> bool:
    if isinstance(err, anthropic.APIStatusError):
        return err.status_code in _RETRY_STATUSES or err.status_code >= 500
    # timeouts and dropped connections; a body that is not valid JSON (a proxy's error page,
    # a truncated stream) is as transient as a 5xx
    return isinstance(
        err, anthropic.APIConnectionError | anthropic.APIResponseValidationError | json.JSONDecodeError | MalformedReply
    )


class AnthropicClient:
    """Claude as a :class:`~limen_jax.llm.client.Client`. Thread-safe: several prompts may
    be asked at once.

    model: model id (default :data:`DEFAULT_MODEL`). temperature: sent only where the model
    accepts one (see module docs). max_tokens: output cap per call (thinking included).
    api_key / base_url: default to ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``.
    timeout: seconds per attempt. retry: :class:`~limen_jax.llm.retry.RetryPolicy`.
    prices: (input, output) $ per million tokens, overriding the table. effort: optional
    ``output_config.effort`` ("low" ... "max") for models that think (thinking tokens count
    against ``max_tokens``). rng: jitter source for the backoff (None: no jitter). sleep:
    injectable for tests.
    """

    name = "anthropic"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        temperature: float | None = 0.7,
        max_tokens: int = 8192,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 300.0,
        retry: RetryPolicy = RetryPolicy(),
        prices: tuple[float, float] | None = None,
        effort: Effort | None = None,
        rng: np.random.Generator | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise MissingAPIKey(
                "ANTHROPIC_API_KEY is not set: export it to use Claude, or run with --mutator offline "
                "(no network) or --mutator replay --replay-from RUN_DIR (a recorded run's answers)."
            )
        self.model = model
        self.max_tokens = int(max_tokens)
        self.prices = prices if prices is not None else price_for(model)
        self.effort = effort
        self.retry = retry
        self.timeout = timeout
        self.temperature = temperature
        self.sends_temperature = temperature is not None and accepts_temperature(model)
        if temperature is not None and not self.sends_temperature:
            log.warning(
                "%s does not accept a sampling temperature; sampling at its default instead of %s "
                "(use %s for the paper's setting)",
                model,
                temperature,
                PAPER_MODEL,
            )
        self._rng = rng
        self._sleep = sleep
        self._client = anthropic.Anthropic(
            api_key=key,
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
            timeout=timeout,
            max_retries=0,  # retries are ours: counted, logged, tested
        )

    def worst_cost(self, system: str, user: str, images: Sequence[str] = ()) -> float:
        """Worst-case dollars for one call: estimated input tokens and a full ``max_tokens`` answer."""
        input_tokens = math.ceil((len(system) + len(user)) / CHARS_PER_TOKEN_ESTIMATE)
        input_tokens += IMAGE_TOKENS_ESTIMATE * len(images)
        return call_cost(self.prices, input_tokens, self.max_tokens)

    def _attempt(self, system: str, user: str, images: Sequence[str]) -> anthropic.types.Message:
        """One call, its failures classified: :class:`Transient` or :class:`RequestRefused`."""
        extra = {"temperature": self.temperature} if self.sends_temperature else None
        output_config: OutputConfigParam | anthropic.Omit = (
            OutputConfigParam(effort=self.effort) if self.effort else anthropic.omit
        )
        try:
            return _validated(self._client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=system,
                messages=[{"role": "user", "content": _content(user, images)}],
                output_config=output_config,
                extra_body=extra,
            ))
        except Exception as err:  # classified here; anything unexpected propagates
            if _is_transient(err):
                raise Transient(_describe(err), _retry_after(err)) from err
            if isinstance(err, anthropic.APIStatusError):
                raise RequestRefused(f"{self.model}: HTTP {err.status_code}: {err.message}") from err
            raise

    def complete(self, system: str, user: str, images: Sequence[str] = (), seed: int = 0) -> Completion:
        """One answer. Raises RequestRefused (a refused request); transient failures beyond
        the retry budget return a completion with ``error`` set."""
        message, retries, last = with_retries(lambda: self._attempt(system, user, images), self.retry,
                                              label="anthropic", rng=self._rng, sleep=self._sleep)
        if message is None:
            return Completion(text="", usage=Usage(retries=retries), model=self.model, error=gave_up(self.retry, last))
        u = message.usage
        write, read = u.cache_creation_input_tokens or 0, u.cache_read_input_tokens or 0
        cost = call_cost(self.prices, u.input_tokens, u.output_tokens, write, read)
        # Newer models may think first (adaptive thinking): keep only the text blocks.
        text = "".join(getattr(b, "text", "") for b in message.content if b.type == "text")
        log.info("anthropic %s: %d in / %d out tokens, $%.4f", message.model, u.input_tokens, u.output_tokens, cost)
        return Completion(
            text=text,
            usage=Usage(u.input_tokens, u.output_tokens, cost, retries),
            model=message.model,
            metadata={
                "stop_reason": message.stop_reason,
                "message_id": message.id,
                "cache_write_tokens": write,
                "cache_read_tokens": read,
                "blocks": [b.type for b in message.content],
                "truncated": message.stop_reason == "max_tokens",
                "max_tokens": self.max_tokens,
            },
        )


def _content(user: str, images: Sequence[str]) -> Any:
    """The user message: the prompt, after an image block per picture when it has any."""
    if not images:
        return user
    blocks = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}}
              for b64 in images]
    return [*blocks, {"type": "text", "text": user}]


def _describe(err: Exception) -> str:
    if isinstance(err, anthropic.APIStatusError):
        return f"HTTP {err.status_code}"
    if isinstance(err, anthropic.APITimeoutError):
        return "timeout"
    if isinstance(err, json.JSONDecodeError):
        return "malformed response body"
    if isinstance(err, MalformedReply):
        return f"malformed reply: {err}"
    return type(err).__name__
