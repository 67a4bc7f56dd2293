"""A local HTTP server that speaks enough of the OpenAI Chat Completions API for client tests.

Each POST /v1/chat/completions consumes the next scripted behaviour (or asks the responder).
The server records every request (path, headers, JSON body) and what it billed (the usage
of every reply that reported one), so tests can compare recorded spend with true spend.
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


class FakeOpenAI:
    """Usage: ``with FakeOpenAI([Status(429), Reply("hi")]) as fake: ... fake.url ...`` (the
    URL ends in /v1, as OPENAI_BASE_URL does)."""

    def __init__(self, script: list[Behaviour] | None = None, default: Behaviour | None = None,
                 responder: Callable[[dict[str, Any]], Behaviour] | None = None) -> None:
        """script: behaviours for the next POSTs, in order; default: the behaviour once the
        script is used up (None: HTTP 500); responder: computes the behaviour from the
        request's JSON body instead (a fake model that writes programs)."""
        self.script: collections.deque[Behaviour] = collections.deque(script or [])
        self.default = default
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.billed: list[tuple[str, int, int, int]] = []  # (model, prompt, cached, completion) per billed reply
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                body = json.loads(raw or b"{}")
                with fake._lock:
                    fake.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                          "body": body})
                    behaviour = fake.script.popleft() if fake.script else (fake.default or Status(500))
                if fake.responder is not None:
                    behaviour = fake.responder(body)
                if self.path != "/v1/chat/completions":
                    behaviour = Status(404)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up
                    self._act(behaviour, body.get("model", "unknown"))

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
                if isinstance(behaviour, Reply):
                    time.sleep(behaviour.delay)
                    if behaviour.usage:
                        with fake._lock:
                            fake.billed.append((model, behaviour.prompt_tokens, behaviour.cached_tokens,
                                                behaviour.completion_tokens))
                    self._send(200, json.dumps(completion_json(behaviour, model)).encode())
                elif isinstance(behaviour, Status):
                    err = {"error": {"message": f"fake {behaviour.code}", "type": "error", "code": None}}
                    self._send(behaviour.code, json.dumps(err).encode(), behaviour.headers)
                else:
                    self._send(200, behaviour.body, content_type=behaviour.content_type)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def posts(self) -> int:
        return len(self.requests)

    def spend(self, prices: dict[str, tuple[float, float]]) -> float:
        """True dollars of every billed reply: prompt x IN + completion x OUT (/1e6), by model."""
        return sum(p * prices[m][0] + c * prices[m][1] for m, p, _, c in self.billed) / 1e6

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
