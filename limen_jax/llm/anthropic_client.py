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
- odd replies handled as for every client (:mod:`limen_jax.llm.replies`): retried, their
  bill kept;
- token and dollar accounting per call, from the price table (:mod:`limen_jax.llm.prices`;
  cache writes and reads billed at their own prices), and the worst case of a call before
  it is sent (what the cap, :class:`~limen_jax.llm.cap.Capped`, reserves);
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
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import anthropic
import numpy as np
from anthropic.types import OutputConfigParam

from limen_jax.llm.client import Completion, MissingAPIKey, RequestRefused, Usage
from limen_jax.llm.prices import Price, price_for
from limen_jax.llm.replies import OddReply, answer_text, classified, estimated_usage, prompt_tokens
from limen_jax.llm.retry import RetryPolicy, retried_completion

log = logging.getLogger(__name__)

# The newest Sonnet the installed SDK (2.12) lists.
DEFAULT_MODEL = "claude-sonnet-5-5"
# The newest Sonnet that still takes a sampling temperature: the paper's setting (0.7).
PAPER_MODEL = "claude-sonnet-4-6"

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
_RETRY_STATUSES = frozenset({408, 409, 429})
Effort = Literal["low", "medium", "high", "xhigh", "max"]


def accepts_temperature(model: str) -> bool:
    return not model.startswith(NO_TEMPERATURE_PREFIXES)


def _validated(message: Any, price: Price, prompt_tokens: int) -> anthropic.types.Message:
    """The message, or :class:`~limen_jax.llm.replies.OddReply` (with what it was billed)
    when a 200 carried something unusable."""
    if not isinstance(message, anthropic.types.Message):
        raise OddReply(f"the reply is not a message ({type(message).__name__})")
    if getattr(message, "usage", None) is None:
        chars = sum(len(getattr(b, "text", "") or "") for b in message.content or [])
        raise OddReply("the reply has no usage", estimated_usage(price, prompt_tokens, chars))
    if not message.content:
        raise OddReply("the reply has an empty content list", _usage(message, price))
    return message


def _usage(message: anthropic.types.Message, price: Price) -> Usage:
    u = message.usage
    write, read = u.cache_creation_input_tokens or 0, u.cache_read_input_tokens or 0
    return Usage(u.input_tokens, u.output_tokens, price.cost(u.input_tokens, u.output_tokens, read, write))


def _is_transient(err: Exception) -> bool:
    if isinstance(err, anthropic.APIStatusError):
        return err.status_code in _RETRY_STATUSES or err.status_code >= 500
    # timeouts and dropped connections; a body that is not valid JSON (a proxy's error page,
    # a truncated stream) is as transient as a 5xx
    return isinstance(
        err, anthropic.APIConnectionError | anthropic.APIResponseValidationError | json.JSONDecodeError)


class AnthropicClient:
    """Claude as a :class:`~limen_jax.llm.client.Client`. Thread-safe: several prompts may
    be asked at once.

    model: model id (default :data:`DEFAULT_MODEL`). temperature: sent only where the model
    accepts one (see module docs). max_tokens: output cap per call (thinking included).
    api_key / base_url: default to ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``.
    timeout: seconds per attempt. retry: :class:`~limen_jax.llm.retry.RetryPolicy`.
    prices: the model's :class:`~limen_jax.llm.prices.Price` (default: the shipped table's). effort: optional
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
        prices: Price | None = None,
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
        return self.prices.cost(prompt_tokens(system, user, images), self.max_tokens)

    def _attempt(self, system: str, user: str, images: Sequence[str]) -> tuple[anthropic.types.Message, str]:
        """One call and its answer text, its failures classified: Transient or RequestRefused."""
        extra = {"temperature": self.temperature} if self.sends_temperature else None
        output_config: OutputConfigParam | anthropic.Omit = (
            OutputConfigParam(effort=self.effort) if self.effort else anthropic.omit
        )

        def call() -> tuple[anthropic.types.Message, str]:
            message = _validated(self._client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=system,
                messages=[{"role": "user", "content": _content(user, images)}],
                output_config=output_config,
                extra_body=extra,
            ), self.prices, prompt_tokens(system, user, images))
            # Newer models may think first (adaptive thinking): keep only the text blocks.
            text = "".join(getattr(b, "text", "") for b in message.content if b.type == "text")
            return message, answer_text(text, _usage(message, self.prices),
                                        truncated=message.stop_reason == "max_tokens")

        return classified(call, is_transient=_is_transient, describe=_describe, refused=self._refused)

    def _refused(self, err: Exception) -> Exception | None:
        if isinstance(err, anthropic.APIStatusError):
            return RequestRefused(f"{self.model}: HTTP {err.status_code}: {err.message}")
        return None

    def complete(self, system: str, user: str, images: Sequence[str] = (), seed: int = 0) -> Completion:
        """One answer. Raises RequestRefused (a refused request); transient failures beyond
        the retry budget return a completion with ``error`` set. The completion names the
        model the run priced and records (usage per model), not a dated alias it was served."""
        return retried_completion(lambda: self._attempt(system, user, images), self.retry, self._finish,
                                  model=self.model, label="anthropic", rng=self._rng, sleep=self._sleep)

    def _finish(self, answer: tuple[Any, str]) -> tuple[str, Usage, dict[str, Any]]:
        message, text = answer
        u = message.usage
        usage = _usage(message, self.prices)
        log.info("anthropic %s: %d in / %d out tokens, $%.4f", message.model, u.input_tokens, u.output_tokens,
                 usage.cost_usd)
        return text, Usage(usage.input_tokens, usage.output_tokens, usage.cost_usd), {
            "served_model": message.model,
            "stop_reason": message.stop_reason,
            "message_id": message.id,
            "cache_write_tokens": u.cache_creation_input_tokens or 0,
            "cache_read_tokens": u.cache_read_input_tokens or 0,
            "blocks": [b.type for b in message.content],
            "truncated": message.stop_reason == "max_tokens",
            "max_tokens": self.max_tokens,
        }


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
    return type(err).__name__
