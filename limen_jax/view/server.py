"""The viewer's server: the standard library's ThreadingHTTPServer, serving the page and a
JSON API over one run directory.

Routes (everything else is 404/405):

    GET  /                      the page
    GET  /static/<name>         app.js, style.css, plotly.min.js (from the installed packages)
    GET  /api/run               :func:`limen_jax.view.data.summary`
    GET  /api/program?id=<id>   :func:`limen_jax.view.data.detail` of one program
    GET  /api/stamp             {"stamp": ...}: changes when the run writes; the page polls it
    GET  /api/session           {"token": ...}: the token the page sends with its POSTs
    POST /api/rollout           body {"id": <id>}, header X-Limen-Token: roll out the program's kept
                                policy (:func:`limen_jax.rollout.roll_out`, 16 episodes): success,
                                each term's episode sum, episode 0 as a GIF

A page on another site can make the browser send requests to this server (a form, an image,
a fetch; or a DNS name it rebinds to 127.0.0.1), so every request is checked (:class:`Guard`):
its Host must name the address the server bound, with its port; a request from another
origin (Origin, Sec-Fetch-Site) is refused, but for opening the page itself; an action with
effects (a rollout trains nothing but costs minutes of CPU) is a POST carrying the session's
token, which only a page of this origin can read. No route maps a URL to a path: the run
directory is read only through ``data`` (limen_jax/run/reader.py keeps it inside the run), and
the run is re-read when its stamp changes, so a live run is followed without a restart.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from limen_jax.view import data, page

_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
TOKEN_HEADER = "X-Limen-Token"
_MAX_BODY = 4096  # a POST body is {"id": ...}
# the headers the Host, origin and token checks read: each must come at most once
_CHECKED_HEADERS = ("Host", "Origin", "Sec-Fetch-Site", "Sec-Fetch-Mode", TOKEN_HEADER)


class Guard:
    """Which requests the server answers: Host, origin and token checks (see the module docs).

    host, port: the address the server listens on. A loopback address also answers to
    ``localhost``; a wildcard one (0.0.0.0, ::) to any address literal and ``localhost``,
    never to another name (a rebound DNS name is a name).
    """

    def __init__(self, host: str, port: int) -> None:
        self.port = int(port)
        self.token = secrets.token_urlsafe(32)
        self.names = {_host_name(host)}
        self.any_literal = False
        try:
            ip = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            ip = None
        if host.lower() == "localhost" or (ip is not None and (ip.is_loopback or ip.is_unspecified)):
            self.names |= {"localhost", "127.0.0.1", "[::1]"}
            self.any_literal = ip is not None and ip.is_unspecified

    def host_ok(self, host: str | None) -> bool:
        """Whether a Host header (``name:port``; the port may go unsaid only for 80) names this server."""
        if not host:
            return False
        name, sep, port = host.strip().lower().rpartition(":")
        if not sep or name.endswith(":") or (name.startswith("[") != name.endswith("]")):
            name, port = host.strip().lower(), "80"  # no port (an IPv6 literal's colons are inside [])
        if port != str(self.port):
            return False
        if name in self.names:
            return True
        if self.any_literal:
            try:
                ipaddress.ip_address(name.strip("[]"))
                return True
            except ValueError:
                return False
        return False

    def origin_ok(self, origin: str | None) -> bool:
        """An Origin header, when sent, must be this server's own (``http://<Host>``)."""
        if origin is None:
            return True
        url = urlsplit(origin)
        return url.scheme == "http" and not url.path and self.host_ok(url.netloc or None)

    def token_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def _host_name(host: str) -> str:
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host.lower()
    return f"[{ip}]" if ip.version == 6 else str(ip)


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


def make_handler(cache: RunCache, title: str, guard: Guard) -> type[BaseHTTPRequestHandler]:
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
            self.send_header("X-Frame-Options", "DENY")  # no other page frames the Roll out button
            self.send_header("Content-Security-Policy", "frame-ancestors 'none'")
            self.send_header("Cross-Origin-Resource-Policy", "same-origin")
            if status == HTTPStatus.METHOD_NOT_ALLOWED:
                self.send_header("Allow", "POST" if urlsplit(self.path).path == "/api/rollout" else "GET")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, body: bytes | str) -> None:
            self._send(status, body.encode() if isinstance(body, str) else body, "application/json; charset=utf-8")

        def _error(self, status: int, message: str) -> None:
            self._json(status, data.to_json({"error": message}))

        def _allowed(self, page: bool) -> bool:
            """The Host and origin checks; answers 403 itself when they fail. ``page``: a
            request for the page, which a link from another site may open. A header the
            checks read that comes twice is refused: the copies could say different things."""
            if any(len(self.headers.get_all(name) or ()) > 1 for name in _CHECKED_HEADERS):
                self._error(HTTPStatus.BAD_REQUEST, "a header the server checks came more than once")
                return False
            if not guard.host_ok(self.headers.get("Host")):
                self._error(HTTPStatus.FORBIDDEN, "this server answers only to the address it listens on")
                return False
            site = self.headers.get("Sec-Fetch-Site")
            navigation = page and self.headers.get("Sec-Fetch-Mode") == "navigate"
            if not guard.origin_ok(self.headers.get("Origin")) or (
                    site not in (None, "same-origin", "none") and not navigation):
                self._error(HTTPStatus.FORBIDDEN, "a request from another site")
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urlsplit(self.path)
            route = url.path
            try:
                if not self._allowed(page=route in ("/", "/index.html")):
                    return
                if route in ("/", "/index.html"):
                    self._send(200, page.served_html(title).encode(), "text/html; charset=utf-8")
                elif route.startswith("/static/"):
                    name = route[len("/static/"):]
                    try:
                        body = page.asset(name)
                    except KeyError:
                        self._error(404, "no such file")
                        return
                    self._send(200, body, _TYPES[Path(name).suffix], cache_s=3600)
                elif route == "/api/stamp":
                    self._json(200, data.to_json({"stamp": data.stamp(cache.path)}))
                elif route == "/api/session":
                    self._json(200, data.to_json({"token": guard.token}))
                elif route == "/api/run":
                    _, body = cache.get()
                    self._json(200, body)
                elif route == "/api/program":
                    pid = parse_qs(url.query).get("id", [""])[0]
                    run, _ = cache.get()
                    try:
                        detail = data.detail(run, pid)
                    except KeyError:
                        self._error(404, f"no program {pid[:80]!r}")
                        return
                    self._json(200, data.to_json(detail))
                elif route == "/api/rollout":
                    self._error(HTTPStatus.METHOD_NOT_ALLOWED, "a rollout is a POST with the session's token")
                else:
                    self._error(404, "not found")
            except data.RunDirError as exc:
                self._error(503, str(exc))
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_POST(self) -> None:  # noqa: N802
            try:
                if not self._allowed(page=False):
                    return
                if urlsplit(self.path).path != "/api/rollout":
                    self._error(HTTPStatus.METHOD_NOT_ALLOWED, "read-only")
                    return
                if not guard.token_ok(self.headers.get(TOKEN_HEADER)):
                    self._error(HTTPStatus.FORBIDDEN, f"a rollout needs the session's token in {TOKEN_HEADER}")
                    return
                pid = self._posted_id()
                if pid is None:
                    self._error(HTTPStatus.BAD_REQUEST, 'the body must be JSON {"id": "<program id>"}')
                    return
                run, _ = cache.get()
                if pid not in run.records:
                    self._error(404, f"no program {pid[:80]!r} in this run")
                    return
                if data.policy_left_run(run, pid):
                    self._error(404, f"the kept policy of {pid!r} is a link out of the run directory: not read")
                    return
                status, body = rollouts.get(pid)
                self._json(status, body)
            except data.RunDirError as exc:
                self._error(503, str(exc))
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _posted_id(self) -> str | None:
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                return None
            if not 0 < length <= _MAX_BODY or not self.headers.get("Content-Type", "").startswith("application/json"):
                return None
            try:
                body = json.loads(self.rfile.read(length))
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                return None
            pid = body.get("id") if isinstance(body, dict) else None
            return pid if isinstance(pid, str) else None

        def _refuse(self) -> None:
            self._error(HTTPStatus.METHOD_NOT_ALLOWED, "read-only")

        do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815

    return Handler


def make_server(run_dir: str | Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server over ``run_dir`` (checked first: :class:`data.RunDirError`); port 0 picks a free one."""
    path = Path(run_dir)
    cache = RunCache(path)
    run, _ = cache.get()
    title = f"limen_jax: {run.path.resolve().name}"
    server = ThreadingHTTPServer((host, port), BaseHTTPRequestHandler)
    server.RequestHandlerClass = make_handler(cache, title, Guard(host, server.server_address[1]))
    server.daemon_threads = True
    return server
