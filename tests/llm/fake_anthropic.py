"""A local HTTP server that speaks enough of the Anthropic Messages API for client tests.

Each POST /v1/messages consumes the next scripted behaviour (fake_server.py); tests
assert on the requests it records.
"""

from __future__ import annotations

import dataclasses
import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from fake_server import FakeServer, send


@dataclasses.dataclass
class Reply:
    """A successful message."""

    text: str = "```python\ndef get_observation(state):\n    return state\n```"
    input_tokens: int = 1000
    output_tokens: int = 200
    stop_reason: str = "end_turn"
    content: list[dict[str, Any]] | None = None  # overrides text when given
    usage: bool = True  # False: a 200 without the "usage" field
    delay: float = 0.0  # seconds before answering (a model's latency)


@dataclasses.dataclass
class Status:
    """An API error with an HTTP status (429, 500, 401, ...)."""

    code: int
    error_type: str = "api_error"
    headers: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Slow:
    """Wait ``delay`` seconds before replying (longer than the client's timeout)."""

    delay: float
    then: Reply = dataclasses.field(default_factory=Reply)


@dataclasses.dataclass
class Malformed:
    """HTTP 200 with a body that is not JSON."""

    body: bytes = b'{"id": "msg_1", "type": "message", "content": [ {"type": "te'


@dataclasses.dataclass
class Raw:
    """HTTP 200 with any body and content type (a proxy's HTML error page)."""

    body: bytes = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    content_type: str = "text/html"


Behaviour = Reply | Status | Slow | Malformed | Raw


def message_json(reply: Reply, model: str) -> dict[str, Any]:
    content = reply.content if reply.content is not None else [{"type": "text", "text": reply.text}]
    message = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "content": content,
        "model": model,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }
    if not reply.usage:
        del message["usage"]
    return message


class FakeAnthropic(FakeServer):
    """Usage: ``with FakeAnthropic([Status(429), Reply("hi")]) as fake: ... fake.url ...``.
    Once the script is used up without a default: HTTP 500 "script_exhausted"."""

    path = "/v1/messages"

    def fallback(self) -> Behaviour:
        return Status(500, "script_exhausted")

    def not_found(self) -> Behaviour:
        return Status(404, "not_found_error")

    def answer(self, handler: BaseHTTPRequestHandler, behaviour: Behaviour, model: str) -> None:
        if isinstance(behaviour, Slow):
            time.sleep(behaviour.delay)
            behaviour = behaviour.then
        if isinstance(behaviour, Reply):
            time.sleep(behaviour.delay)
            send(handler, 200, json.dumps(message_json(behaviour, model)).encode())
        elif isinstance(behaviour, Raw):
            send(handler, 200, behaviour.body, content_type=behaviour.content_type)
        elif isinstance(behaviour, Status):
            err = {"type": "error", "error": {"type": behaviour.error_type, "message": f"fake {behaviour.code}"}}
            send(handler, behaviour.code, json.dumps(err).encode(), behaviour.headers)
        else:
            send(handler, 200, behaviour.body)
