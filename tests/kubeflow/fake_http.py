"""A small recording JSON-over-HTTP server on 127.0.0.1, the base of the fake Vertex and KFP APIs.

The SDKs under test talk real HTTP to it, so a test sees exactly what tfxd made them send. Routes are
(method, regex) pairs; each handler gets the match, the query and the JSON body and returns
(status, JSON). Every request is recorded, state is kept in memory, and `stop()` shuts the server down
within a bounded time (daemon thread, short poll interval).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

Handler = Callable[["re.Match[str]", dict[str, str], Any], "tuple[int, Any]"]


@dataclass
class Request:
    """One request as the server saw it."""

    method: str
    path: str
    query: dict[str, str]
    body: Any

    @property
    def is_write(self) -> bool:
        return self.method not in ("GET", "HEAD")


@dataclass
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: Handler


@dataclass(repr=False)  # the default repr would print every request in tracebacks
class FakeServer:
    """Base class: subclasses register routes in `__post_init__` via `route()`."""

    requests: list[Request] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "stopped"
        return f"<{type(self).__name__} {where}, {len(self.requests)} requests>"

    def route(self, method: str, pattern: str, handler: Handler) -> None:
        self.routes.append(Route(method, re.compile(f"^{pattern}$"), handler))

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake server is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeServer:
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: nothing lingers at shutdown

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, payload = fake.dispatch(self.command, self.path, raw)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.timeout = 5
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    # ------------------------------------------------------------------ dispatch

    def dispatch(self, method: str, raw_path: str, raw_body: bytes) -> tuple[int, Any]:
        parts = urlsplit(raw_path)
        path = unquote(parts.path)
        # `keep_blank_values` and ';'-free parsing: Google's REST transport sends `$alt=json;enum-encoding=int`.
        query = {key: values[-1] for key, values in parse_qs(parts.query, keep_blank_values=True).items()}
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            body = raw_body.decode(errors="replace")
        with self.lock:
            self.requests.append(Request(method, path, query, body))
            for route in self.routes:
                if route.method == method and (match := route.pattern.match(path)):
                    try:
                        return route.handler(match, query, body)
                    except KeyError as exc:
                        return 404, {"error": {"code": 404, "message": f"not found: {exc}",
                                               "status": "NOT_FOUND"}}
        return 404, {"error": {"code": 404, "message": f"no route for {method} {path}", "status": "NOT_FOUND"}}

    # ------------------------------------------------------------------ for assertions

    def calls(self, method: str | None = None, contains: str = "") -> list[Request]:
        """Recorded requests, optionally of one method and with `contains` in the path."""
        with self.lock:
            return [r for r in self.requests if (method is None or r.method == method) and contains in r.path]

    def writes(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.is_write]

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()
