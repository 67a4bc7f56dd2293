"""A local HTTP server that speaks enough of the Anthropic Messages API for client tests.

Each POST /v1/messages consumes the next scripted behaviour. The server records every
request (path, headers, JSON body) so tests can assert on what the client sent.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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


class FakeAnthropic:
    """Usage: ``with FakeAnthropic([Status(429), Reply("hi")]) as fake: ... fake.url ...``"""

    def __init__(
        self,
        script: list[Behaviour] | None = None,
        default: Behaviour | None = None,
        responder: Callable[[dict[str, Any]], Behaviour] | None = None,
    ) -> None:
        """script: behaviours for the next POSTs, in order; default: the behaviour once the
        script is used up (None: HTTP 500 "script_exhausted"); responder: computes the
        behaviour from the request's JSON body instead (a fake model that writes programs)."""
        self.script: collections.deque[Behaviour] = collections.deque(script or [])
        self.default = default
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                with fake._lock:
                    fake.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": json.loads(raw or b"{}")}
                    )
                    fallback = fake.default or Status(500, "script_exhausted")
                    behaviour = fake.script.popleft() if fake.script else fallback
                    body = fake.requests[-1]["body"]
                if fake.responder is not None:
                    behaviour = fake.responder(body)
                model = body.get("model", "unknown")
                # the client may have given up (timeout): expected for Slow
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._act(behaviour, model)

            def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None,
                      content_type: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _act(self, behaviour: Behaviour, model: str) -> None:
                if isinstance(behaviour, Slow):
                    time.sleep(behaviour.delay)
                    behaviour = behaviour.then
                if isinstance(behaviour, Reply) and behaviour.delay:
                    time.sleep(behaviour.delay)
                if isinstance(behaviour, Raw):
                    self._send(200, behaviour.body, content_type=behaviour.content_type)
                elif isinstance(behaviour, Reply):
                    self._send(200, json.dumps(message_json(behaviour, model)).encode())
                elif isinstance(behaviour, Status):
                    message = f"fake {behaviour.code}"
                    err = {"type": "error", "error": {"type": behaviour.error_type, "message": message}}
                    self._send(behaviour.code, json.dumps(err).encode(), behaviour.headers)
                else:
                    self._send(200, behaviour.body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def posts(self) -> int:
        return len(self.requests)

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
