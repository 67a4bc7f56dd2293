"""A local HTTP server that speaks enough of the OpenAI Chat Completions API for client tests.

Each POST /v1/chat/completions consumes the next scripted behaviour (or asks the responder).
The server records every request (path, headers, JSON body) and what it billed (the usage
of every reply that reported one), so tests can compare recorded spend with true spend.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from fake_server import FakeServer, send


@dataclasses.dataclass
class Reply:
    """A chat completion. text None: ``"content": null``."""

    text: str | None = "```python\ndef get_observation(state):\n    return state\n```"
    prompt_tokens: int = 1000
    completion_tokens: int = 200
    cached_tokens: int = 0
    finish_reason: str = "stop"
    usage: bool = True  # False: a 200 without the "usage" field
    choices: bool = True  # False: "choices": []
    delay: float = 0.0  # seconds before answering (a model's latency)


@dataclasses.dataclass
class Status:
    """An API error with an HTTP status (429, 500, 401, ...) and headers (retry-after)."""

    code: int
    headers: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Slow:
    """Wait ``delay`` seconds before replying (longer than the client's timeout: a hang)."""

    delay: float
    then: Reply = dataclasses.field(default_factory=Reply)


@dataclasses.dataclass
class Raw:
    """HTTP 200 with any body and content type: cut-off JSON, invalid UTF-8, an HTML page."""

    body: bytes = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    content_type: str = "text/html"


Behaviour = Reply | Status | Slow | Raw
CUT_OFF_JSON = Raw(b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "mess',
                   "application/json")
INVALID_UTF8 = Raw(b'{"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, '
                   b'"finish_reason": "stop", "message": {"role": "assistant", "content": "\xff\xfe"}}]}',
                   "application/json")


def completion_json(reply: Reply, model: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                     "message": {"role": "assistant", "content": reply.text}}] if reply.choices else [],
    }
    if reply.usage:
        body["usage"] = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                         "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                         "prompt_tokens_details": {"cached_tokens": reply.cached_tokens}}
    return body


class FakeOpenAI(FakeServer):
    """Usage: ``with FakeOpenAI([Status(429), Reply("hi")]) as fake: ... fake.url ...`` (the
    URL ends in /v1, as OPENAI_BASE_URL does). Besides the requests it records what it
    billed: the usage of every reply that reported one. Once the script is used up
    without a default: HTTP 500."""

    path, url_suffix = "/v1/chat/completions", "/v1"

    def __init__(self, script: list[Behaviour] | None = None, default: Behaviour | None = None,
                 responder: Callable[[dict[str, Any]], Behaviour] | None = None) -> None:
        super().__init__(script, default, responder)
        self.billed: list[tuple[str, int, int, int]] = []  # (model, prompt, cached, completion) per billed reply

    def fallback(self) -> Behaviour:
        return Status(500)

    def not_found(self) -> Behaviour:
        return Status(404)

    def answer(self, handler: BaseHTTPRequestHandler, behaviour: Behaviour, model: str) -> None:
        if isinstance(behaviour, Slow):
            time.sleep(behaviour.delay)
            behaviour = behaviour.then
        if isinstance(behaviour, Reply):
            time.sleep(behaviour.delay)
            if behaviour.usage:
                with self._lock:
                    self.billed.append((model, behaviour.prompt_tokens, behaviour.cached_tokens,
                                        behaviour.completion_tokens))
            send(handler, 200, json.dumps(completion_json(behaviour, model)).encode())
        elif isinstance(behaviour, Status):
            err = {"error": {"message": f"fake {behaviour.code}", "type": "error", "code": None}}
            send(handler, behaviour.code, json.dumps(err).encode(), behaviour.headers)
        else:
            send(handler, 200, behaviour.body, content_type=behaviour.content_type)

    def spend(self, prices: dict[str, tuple[float, float]]) -> float:
        """True dollars of every billed reply: prompt x IN + completion x OUT (/1e6), by model."""
        return sum(p * prices[m][0] + c * prices[m][1] for m, p, _, c in self.billed) / 1e6
