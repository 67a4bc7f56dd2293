"""Any OpenAI-compatible Chat Completions endpoint as a model client
(:class:`~limen_jax.llm.client.Client`), through the official ``openai`` SDK: OpenAI,
OpenRouter, and local servers (vLLM, SGLang, Ollama, llama.cpp).

What this adds to a bare SDK call, as the Anthropic client does:

- the SDK's errors classified once for the shared retry loop (the SDK's own retries are
  off): 408/409/429/5xx, timeouts, dropped connections and bodies that are not JSON (cut
  off, invalid UTF-8) are transient, ``retry-after-ms`` / ``retry-after`` honoured; any
  other HTTP status is a refused request;
- odd replies (:mod:`limen_jax.llm.replies`): no choices, no usage, empty content, an HTML
  page, invalid Unicode are retried with their bill kept; ``<think>`` text is cut out;
- tokens and dollars per call from the model's :class:`~limen_jax.llm.prices.Price`
  (prompt tokens the provider reports as cached are billed at the cache-read price);
- the endpoint from the argument, else ``OPENAI_BASE_URL`` (else OpenAI's own); the key
  from the argument, else the environment variable ``api_key_env`` names (default
  ``OPENAI_API_KEY``), sent as a bearer token. A local server needs none: with an
  endpoint set and no key, the placeholder :data:`NO_KEY` is sent.

Reasoning models (OpenAI's o-series and gpt-5) take ``max_completion_tokens`` and no
temperature; every other model gets ``max_tokens`` and the temperature.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import openai
from openai.types.chat import ChatCompletion

from limen_jax.llm.client import Completion, MissingAPIKey, RequestRefused, Usage
from limen_jax.llm.prices import Price
from limen_jax.llm.replies import OddReply, answer_text, classified, estimated_usage, prompt_tokens
from limen_jax.llm.retry import RetryPolicy, retried_completion

log = logging.getLogger(__name__)

# What a keyless local server is sent as its bearer token (the SDK insists on one).
NO_KEY = "no-key"
# Model ids (after any "provider/" prefix) that take max_completion_tokens and no temperature.
REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
_RETRY_STATUSES = frozenset({408, 409, 429})


def is_reasoning_model(model: str) -> bool:
    return model.rsplit("/", 1)[-1].startswith(REASONING_PREFIXES)


def _is_transient(err: Exception) -> bool:
    if isinstance(err, openai.APIStatusError):
        return err.status_code in _RETRY_STATUSES or err.status_code >= 500
    # timeouts, dropped connections, a body that is not JSON (cut off, invalid UTF-8)
    return isinstance(err, openai.APIConnectionError | openai.APIResponseValidationError | json.JSONDecodeError
                      | UnicodeDecodeError)


def _describe(err: Exception) -> str:
    if isinstance(err, openai.APIStatusError):
        return f"HTTP {err.status_code}"
    if isinstance(err, openai.APITimeoutError):
        return "timeout"
    if isinstance(err, json.JSONDecodeError | UnicodeDecodeError):
        return "malformed response body"
    return type(err).__name__


def _usage(reply: ChatCompletion, price: Price) -> Usage | None:
    """The call's bill, or None when the reply reports no usage."""
    u = getattr(reply, "usage", None)
    if u is None or getattr(u, "prompt_tokens", None) is None:
        return None
    details = getattr(u, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    prompt, out = int(u.prompt_tokens), int(getattr(u, "completion_tokens", 0) or 0)
    return Usage(prompt, out, price.cost(prompt - cached, out, cached))


class OpenAIClient:
    """An OpenAI-compatible endpoint as a :class:`~limen_jax.llm.client.Client`. Thread-safe.

    model: the model id the endpoint knows. price: its
    :class:`~limen_jax.llm.prices.Price` (a local model: ``Price(0, 0, 0, 0)``).
    temperature, max_tokens: sampling settings (see module docs). api_key / api_key_env /
    base_url: the endpoint (see module docs). timeout: seconds per attempt. retry:
    :class:`~limen_jax.llm.retry.RetryPolicy`. rng: jitter source for the backoff (None:
    no jitter). sleep: injectable for tests. The critic's images are sent as data-URL
    ``image_url`` parts; a model that refuses them (HTTP 400) is asked again without, and
    from then on gets text only.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        price: Price,
        temperature: float | None = 0.7,
        max_tokens: int = 8192,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        base_url: str | None = None,
        timeout: float = 300.0,
        retry: RetryPolicy = RetryPolicy(),
        rng: np.random.Generator | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        endpoint = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get(api_key_env)
        if not key and endpoint is None:
            raise MissingAPIKey(
                f"{api_key_env} is not set: export it to use OpenAI, give a local server's endpoint with "
                "--llm-base-url URL (or OPENAI_BASE_URL), or run with --mutator offline."
            )
        self.model = model
        self.price = price
        self.max_tokens = int(max_tokens)
        self.temperature = temperature
        self.retry = retry
        self.base_url = endpoint
        self.vision = True
        self._rng = rng
        self._sleep = sleep
        self._client = openai.OpenAI(api_key=key or NO_KEY, base_url=endpoint, timeout=timeout, max_retries=0)

    def worst_cost(self, system: str, user: str, images: Sequence[str] = ()) -> float:
        """Worst-case dollars for one call: estimated input tokens and a full ``max_tokens`` answer."""
        return self.price.cost(prompt_tokens(system, user, images), self.max_tokens)

    def _body(self) -> dict[str, Any]:
        if is_reasoning_model(self.model):
            return {"max_completion_tokens": self.max_tokens}
        body: dict[str, Any] = {"max_tokens": self.max_tokens}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def _attempt(self, system: str, user: str, images: Sequence[str], seed: int) -> tuple[ChatCompletion, str, Usage]:
        """One call: the reply, its answer text and its bill; failures classified."""
        estimate = prompt_tokens(system, user, images)

        def call() -> tuple[ChatCompletion, str, Usage]:
            messages: Any = [{"role": "system", "content": system},
                             {"role": "user", "content": _content(user, images if self.vision else ())}]
            reply = self._client.chat.completions.create(model=self.model, messages=messages, seed=seed,
                                                         **self._body())
            if not isinstance(reply, ChatCompletion):  # a body that is not JSON: an HTML page, plain text
                raise OddReply(f"the reply is not a chat completion ({str(reply)[:60]!r})")
            usage = _usage(reply, self.price)
            choices = getattr(reply, "choices", None)
            if not choices:
                raise OddReply("the reply has no choices", usage or Usage())
            message = getattr(choices[0], "message", None)
            text = getattr(message, "content", None) if message is not None else None
            if usage is None:
                raise OddReply("the reply has no usage", estimated_usage(self.price, estimate, len(text or "")))
            truncated = getattr(choices[0], "finish_reason", None) == "length"
            return reply, answer_text(text, usage, truncated=truncated), usage

        try:
            return classified(call, is_transient=_is_transient, describe=_describe, refused=self._refused)
        except RequestRefused:
            if not (images and self.vision):
                raise
            log.warning("%s refused a request with images; sending text only from now on", self.model)
            self.vision = False
            return classified(call, is_transient=_is_transient, describe=_describe, refused=self._refused)

    def _refused(self, err: Exception) -> Exception | None:
        if isinstance(err, openai.APIStatusError):
            return RequestRefused(f"{self.model}: HTTP {err.status_code}: {err.message}")
        return None

    def complete(self, system: str, user: str, images: Sequence[str] = (), seed: int = 0) -> Completion:
        """One answer. Raises RequestRefused (a refused request); transient failures beyond
        the retry budget return a completion with ``error`` set."""
        return retried_completion(lambda: self._attempt(system, user, images, seed), self.retry, self._finish,
                                  model=self.model, label="openai", rng=self._rng, sleep=self._sleep)

    def _finish(self, answer: tuple[ChatCompletion, str, Usage]) -> tuple[str, Usage, dict[str, Any]]:
        reply, text, usage = answer
        choice = reply.choices[0]
        log.info("openai %s: %d in / %d out tokens, $%.4f", self.model, usage.input_tokens, usage.output_tokens,
                 usage.cost_usd)
        return text, usage, {
            "finish_reason": choice.finish_reason,
            "served_model": getattr(reply, "model", None),
            "response_id": getattr(reply, "id", None),
            "truncated": choice.finish_reason == "length",
            "max_tokens": self.max_tokens,
        }


def _content(user: str, images: Sequence[str]) -> Any:
    """The user message: the prompt, after a data-URL image part per picture when it has any."""
    if not images:
        return user
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}}
                                   for b64 in images]
    return [*parts, {"type": "text", "text": user}]
