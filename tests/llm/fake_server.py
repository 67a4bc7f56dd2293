"""What the fake model APIs (fake_openai.py, fake_anthropic.py) share: a threaded HTTP
server on 127.0.0.1 that answers each POST with the next scripted behaviour (or the
responder's), records every request (path, headers lower-cased, JSON body), and answers
any path but the API's own with HTTP 404."""

from __future__ import annotations

import collections
import contextlib
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def send(handler: BaseHTTPRequestHandler, code: int, body: bytes, headers: dict[str, str] | None = None,
         content_type: str = "application/json") -> None:
    handler.send_response(code)
    handler.send_header("content-type", content_type)
    handler.send_header("content-length", str(len(body)))
    for k, v in (headers or {}).items():
        handler.send_header(k, v)
    handler.end_headers()
    handler.wfile.write(body)


class FakeServer:
    """A subclass names its ``path`` and ``url_suffix`` and writes ``fallback`` (the
    behaviour once the script is used up and no default is given), ``not_found`` and
    ``answer`` (a behaviour sent as the API would)."""

    path = ""
    url_suffix = ""

    def __init__(self, script: list[Any] | None = None, default: Any = None,
                 responder: Callable[[dict[str, Any]], Any] | None = None) -> None:
        """script: behaviours for the next POSTs, in order; default: the behaviour once the
        script is used up; responder: computes the behaviour from the request's JSON body
        instead (a fake model that writes programs)."""
        self.script: collections.deque[Any] = collections.deque(script or [])
        self.default = default
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
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
                    behaviour = fake.script.popleft() if fake.script else (fake.default or fake.fallback())
                if fake.responder is not None:
                    behaviour = fake.responder(body)
                if self.path != fake.path:
                    behaviour = fake.not_found()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                    fake.answer(self, behaviour, body.get("model", "unknown"))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def fallback(self) -> Any:
        raise NotImplementedError

    def not_found(self) -> Any:
        raise NotImplementedError

    def answer(self, handler: BaseHTTPRequestHandler, behaviour: Any, model: str) -> None:
        raise NotImplementedError

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}{self.url_suffix}"

    @property
    def posts(self) -> int:
        return len(self.requests)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
