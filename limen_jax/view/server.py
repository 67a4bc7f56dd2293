"""The viewer's server: the standard library's ThreadingHTTPServer, serving the page and a
read-only JSON API over one run directory.

Routes (GET only; everything else is 404/405):

    /                      the page
    /static/<name>         app.js, style.css, plotly.min.js (from the installed packages)
    /api/run               :func:`limen_jax.view.data.summary`
    /api/program?id=<id>   :func:`limen_jax.view.data.detail` of one program
    /api/stamp             {"stamp": ...}: changes when the run writes; the page polls it
    /api/rollout?id=<id>   roll out the program's kept policy (:func:`limen_jax.rollout.roll_out`,
                           16 episodes): success, each term's episode sum, episode 0 as a GIF

No route maps a URL to a path: the run directory is read only through ``data``, so nothing
outside it (nor any file of it but those ``data`` reads) is served. The run is re-read when
its stamp changes, so a live run is followed without a restart.
"""

from __future__ import annotations

import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from limen_jax.view import data, page

_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


class RunCache:
    """The loaded run, re-read when its stamp changes; the last good one if a re-read fails."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: str | None = None
        self._run: data.Run | None = None
        self._summary: bytes | None = None

    def get(self) -> tuple[data.Run, bytes]:
        with self._lock:
            now = data.stamp(self.path)
            if self._run is None or now != self._stamp:
                try:
                    run = data.load(self.path)
                except data.RunDirError:
                    if self._run is None:
                        raise
                else:  # keep the last good one when a re-read fails
                    self._run, self._stamp = run, now
                    self._summary = data.to_json(data.summary(run)).encode()
            assert self._run is not None and self._summary is not None
            return self._run, self._summary


class Rollouts:
    """Rollouts of kept policies, on demand, one at a time, remembered per program."""

    EPISODES = 16

    def __init__(self, path: Path) -> None:
        self.path = path
        self._done: dict[str, tuple[int, bytes]] = {}
        self._lock = threading.Lock()

    def get(self, program_id: str) -> tuple[int, bytes]:
        """(HTTP status, JSON body): the report, or why there is none (one line)."""
        with self._lock:  # a compile at a time: two clicks do not train the CPU twice
            if program_id not in self._done:
                self._done[program_id] = self._run(program_id)
            return self._done[program_id]

    def _run(self, program_id: str) -> tuple[int, bytes]:
        import base64

        from limen_jax.program import ProgramError
        from limen_jax.rollout import BadInput, roll_out

        try:
            r = roll_out(self.path, program_id, episodes=self.EPISODES, frames=True)
        except (BadInput, ProgramError) as exc:
            return 404, data.to_json({"error": str(exc)}).encode()
        except Exception as exc:  # the engine's: said on the page, the server goes on
            return 500, data.to_json({"error": f"the rollout failed: {type(exc).__name__}: {exc}"}).encode()
        return 200, data.to_json({
            "program_id": r.program_id, "seed": r.seed, "episodes": r.episodes, "success": r.success,
            "return": r.returns, "length": r.length, "terms": r.terms, "seconds": round(r.seconds, 2),
            "gif": base64.b64encode(r.gif).decode() if r.gif else None, "note": r.note,
        }).encode()


def make_handler(cache: RunCache, title: str) -> type[BaseHTTPRequestHandler]:
    rollouts = Rollouts(cache.path)

    class Handler(BaseHTTPRequestHandler):
        server_version = "limen-view"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the page polls every 2 s
            pass

        def _send(self, status: int, body: bytes, ctype: str, cache_s: int = 0) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", f"max-age={cache_s}" if cache_s else "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, body: bytes | str) -> None:
            self._send(status, body.encode() if isinstance(body, str) else body, "application/json; charset=utf-8")

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urlsplit(self.path)
            route = url.path
            try:
                if route in ("/", "/index.html"):
                    self._send(200, page.served_html(title).encode(), "text/html; charset=utf-8")
                elif route.startswith("/static/"):
                    name = route[len("/static/"):]
                    try:
                        body = page.asset(name)
                    except KeyError:
                        self._json(404, data.to_json({"error": "no such file"}))
                        return
                    self._send(200, body, _TYPES[Path(name).suffix], cache_s=3600)
                elif route == "/api/stamp":
                    self._json(200, data.to_json({"stamp": data.stamp(cache.path)}))
                elif route == "/api/run":
                    _, body = cache.get()
                    self._json(200, body)
                elif route == "/api/program":
                    pid = parse_qs(url.query).get("id", [""])[0]
                    run, _ = cache.get()
                    try:
                        detail = data.detail(run, pid)
                    except KeyError:
                        self._json(404, data.to_json({"error": f"no program {pid!r}"}))
                        return
                    self._json(200, data.to_json(detail))
                elif route == "/api/rollout":
                    status, body = rollouts.get(parse_qs(url.query).get("id", [""])[0])
                    self._json(status, body)
                else:
                    self._json(404, data.to_json({"error": "not found"}))
            except data.RunDirError as exc:
                self._json(503, data.to_json({"error": str(exc)}))
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _refuse(self) -> None:
            self._json(HTTPStatus.METHOD_NOT_ALLOWED, data.to_json({"error": "read-only"}))

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815

    return Handler


def make_server(run_dir: str | Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server over ``run_dir`` (checked first: :class:`data.RunDirError`); port 0 picks a free one."""
    path = Path(run_dir)
    cache = RunCache(path)
    run, _ = cache.get()
    server = ThreadingHTTPServer((host, port), make_handler(cache, f"limen_jax: {run.path.resolve().name}"))
    server.daemon_threads = True
    return server
