"""Every route the server's app registers, as requests a test can send, and a raw HTTP client that
sends any Host, any Content-Length and any body (http.client and httpx fix the first two).

The routes come from the app itself (``create_app(...).app.routes``), never from a list kept here,
so a route added later is walked too."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What a route's path parameters are filled with: names the routes give meaning to, else a plain id.
PARAMS = {"event": "PostToolUse", "action": "cancel"}
PLAIN_PARAM = "x-route"
# Methods that carry a body.
BODY_METHODS = ("POST", "PATCH", "PUT")


@dataclass(frozen=True)
class AppRoute:
    """One route: ``kind`` http | websocket | mount, its path template and methods (no HEAD)."""

    kind: str
    template: str
    methods: tuple[str, ...]

    def path(self, **params: str) -> str:
        """A concrete path: each ``{name}`` / ``{name:conv}`` filled (``params`` first, then PARAMS)."""
        if self.kind == "mount":
            return self.template + "/board.js"
        return re.sub(r"\{(\w+)(?::\w+)?\}",
                      lambda m: params.get(m.group(1), PARAMS.get(m.group(1), PLAIN_PARAM)), self.template)

    @property
    def hook(self) -> bool:
        """One of Claude Code's hook routes (bad input there is 200 with a problem header, by design)."""
        return self.template == "/hooks" or self.template.startswith("/hooks/")

    @property
    def param_names(self) -> list[str]:
        return re.findall(r"\{(\w+)(?::\w+)?\}", self.template)


def app_routes(home: Path) -> list[AppRoute]:
    """Every route of the server's app, read from the app built as `agent-hook server` builds it."""
    from starlette.routing import Mount, Route, WebSocketRoute

    from agent_hooks import config as config_mod
    from agent_hooks.paths import Paths
    from agent_hooks.server.app import create_app

    env = {"AGENT_HOOKS_HOME": str(home), "HOME": str(home.parent / "routes-home"),
           "AGENT_HOOKS__FORWARD__ENABLED": "false"}
    paths = Paths(env)
    config, _ = config_mod.load_lenient(paths, env)
    app = create_app(paths, config, env, port=1)
    try:
        out = []
        for route in app.app.routes:
            if isinstance(route, WebSocketRoute):
                out.append(AppRoute("websocket", route.path, ("GET",)))
            elif isinstance(route, Mount):
                out.append(AppRoute("mount", route.path, ("GET",)))
            elif isinstance(route, Route):
                out.append(AppRoute("http", route.path, tuple(sorted(set(route.methods or ["GET"]) - {"HEAD"}))))
            else:
                raise AssertionError(f"a route of a kind this walk does not know: {route!r}")
        return out
    finally:
        app.state.server.pool.shutdown(wait=False)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(port: int, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"",
            host: str | None = None, timeout: float = 30) -> Answer:
    """One request on a new connection; ``host`` replaces the Host header (default: 127.0.0.1:port)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host if host is not None else f"127.0.0.1:{port}")
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        if body or method in BODY_METHODS:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body or None)
        resp = conn.getresponse()
        return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def headers_only(port: int, method: str, path: str, length: int, timeout: float = 10,
                 extra: str = "") -> tuple[int, dict[str, str], bytes, float]:
    """Send a request's headers declaring ``length`` bytes of body, send none of it, and read the
    answer: (status, headers, body, seconds it took). The server must answer unread."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        began = time.monotonic()
        sock.sendall((f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                      f"{extra}Content-Length: {length}\r\n\r\n").encode())
        return (*_read_answer(sock), time.monotonic() - began)


def chunked_without_end(port: int, method: str, path: str, sent: int, timeout: float = 10) -> tuple[int, bytes]:
    """Send a chunked body of ``sent`` bytes and never its last chunk: the server must answer at the
    limit, without waiting for an end that does not come."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall((f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n").encode())
        chunk = b"x" * 8192
        for _ in range(sent // len(chunk)):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        status, _headers, body = _read_answer(sock)
        return status, body


def _read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            raise AssertionError(f"the server closed the connection without an answer: {data[:200]!r}")
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    want = int(headers.get("content-length", "0"))
    while len(rest) < want:
        more = sock.recv(65536)
        if not more:
            break
        rest += more
    return int(lines[0].split()[1]), headers, rest


def ws_handshake(port: int, path: str, origin: str | None = None, host: str | None = None) -> int:
    """The status a WebSocket handshake gets (101: accepted)."""
    lines = [f"GET {path} HTTP/1.1", f"Host: {host or f'127.0.0.1:{port}'}", "Upgrade: websocket",
             "Connection: Upgrade", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13"]
    if origin:
        lines.append(f"Origin: {origin}")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n" not in data:
            more = sock.recv(4096)
            if not more:
                raise AssertionError(f"no answer to the handshake: {data!r}")
            data += more
        return int(data.split(b" ", 2)[1])


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024
