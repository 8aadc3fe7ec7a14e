"""A command-center ingest server on 127.0.0.1 that enforces the contract.

Implements ``POST /api/hooks/ingest`` with the OptimalOS contract's validation (400 on bad
JSON, a missing or unknown event), its lookup (session_id first, then
tmux_session), auto-registration (``start`` for an unknown tmux name; any event
from an ``agent-`` tmux name registers and moves to running), 404 otherwise,
and its state machine (a transition the table does not allow leaves the
state as it is and still answers 200, as a state hub that ignores it would).
``GET /api/hooks/sessions`` lists the sessions.

Every request is recorded with its Idempotency-Key. The server can be down
(port closed, reopened on the same port), answer 5xx / 429 / 400, or hang.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from support.ports import free_port
from support.waiting import wait_for

EVENTS = {
    "start": ({"idle"}, "running"),
    "running": ({"awaiting_review"}, "running"),
    "to_in_progress": ({"awaiting_review"}, "running"),
    "tool_use": ({"awaiting_review"}, "running"),
    "prompt_ready": ({"running"}, "awaiting_review"),
    "to_review": ({"running"}, "awaiting_review"),
    "awaiting_review": ({"running"}, "awaiting_review"),
    "exit": ({"running", "awaiting_review"}, "completed"),
    "completed": ({"running", "awaiting_review"}, "completed"),
    "exit_error": ({"running", "awaiting_review"}, "failed"),
    "failed": ({"running", "awaiting_review"}, "failed"),
    "requeue": ({"completed", "failed"}, "idle"),
}
STATES = ["idle", "running", "awaiting_review", "completed", "failed"]
AGENT_TYPES = {"claude-code", "openclaw", "shell"}
INGEST = "/api/hooks/ingest"
SESSIONS = "/api/hooks/sessions"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real server would
    disable_nagle_algorithm = True  # headers and body go out in two writes
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.server.owner._connected(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._disconnected(self.connection)

    def _reply(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:  # noqa: N802
        if self.path == SESSIONS:
            self._reply(200, self.server.owner.session_list())
        else:
            self._reply(404, {"error": "not found"})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        owner = self.server.owner
        if len(raw) < length:  # the client died mid-request (kill -9): nothing was sent
            self.close_connection = True
            return
        if self.path != INGEST:
            self._reply(404, {"error": "not found"})
            return
        status, data, headers = owner.ingest(raw, self.headers.get("Idempotency-Key"))
        if status is None:  # hang: hold the connection until released, then drop it
            owner.release.wait()
            self.close_connection = True
            return
        self._reply(status, data, headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: IngestServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client killed mid-request resets the connection; that is the test, not an error


class IngestServer:
    """The contract server. ``mode``: ok | 500 | 429 | 400 | hang."""

    def __init__(self, port: int | None = None, register_session_ids: bool = False, delay_s: float = 0.0) -> None:
        self.port = port or free_port()
        self.register_session_ids = register_session_ids
        self.delay_s = delay_s
        self.mode = "ok"
        self.requests: list[dict[str, Any]] = []
        self.sessions: dict[str, dict[str, Any]] = {}
        self.connections = 0
        self.open_connections: set[socket.socket] = set()
        self.hanging = 0
        self.release = threading.Event()
        self.lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{INGEST}"

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> IngestServer:
        self.release.clear()
        server = _Server(("127.0.0.1", self.port), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the port and every open connection: the server is down."""
        self.release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self.lock:
            conns = list(self.open_connections)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    @property
    def up(self) -> bool:
        return self._server is not None

    def _connected(self, conn: socket.socket) -> None:
        with self.lock:
            self.connections += 1
            self.open_connections.add(conn)

    def _disconnected(self, conn: socket.socket) -> None:
        with self.lock:
            self.open_connections.discard(conn)

    # -- the contract --------------------------------------------------------

    def _find(self, body: dict[str, Any]) -> dict[str, Any] | None:
        sid = body.get("session_id")
        if sid and sid in self.sessions:
            return self.sessions[sid]
        tmux = body.get("tmux_session")
        if tmux:
            for s in self.sessions.values():
                if s["tmux_session"] == tmux:
                    return s
        return None

    def _register(self, tmux: str | None, sid: str | None, agent_type: str) -> dict[str, Any]:
        key = sid or f"s{len(self.sessions) + 1}"
        s = {"id": key, "tmux_session": tmux, "agent_type": agent_type, "state": "idle", "history": []}
        self.sessions[key] = s
        return s

    def ingest(self, raw: bytes, key: str | None) -> tuple[int | None, Any, dict[str, str] | None]:
        if self.delay_s:
            time.sleep(self.delay_s)
        with self.lock:
            rec: dict[str, Any] = {"key": key, "raw": raw, "at": time.time(), "status": None}
            self.requests.append(rec)
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            rec["body"] = body
            mode = self.mode
            if mode == "hang":
                self.hanging += 1
                return None, None, None
            if mode == "500":
                rec["status"] = 500
                return 500, {"error": "boom"}, None
            if mode == "429":
                rec["status"] = 429
                return 429, {"error": "slow down"}, {"Retry-After": "0"}
            if mode == "400":
                rec["status"] = 400
                return 400, {"error": "refused"}, None
            status, data = self._apply(body)
            rec["status"] = status
            return status, data, None

    def _apply(self, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict):
            return 400, {"error": "invalid JSON"}
        event = body.get("event")
        if not isinstance(event, str) or not event:
            return 400, {"error": "missing event"}
        if event not in EVENTS:
            return 400, {"error": f"unknown event {event!r}"}
        tmux, sid = body.get("tmux_session"), body.get("session_id")
        if not tmux and not sid:
            return 400, {"error": "tmux_session or session_id required"}
        for field in ("tmux_session", "session_id", "metadata", "agent_type"):
            if field in body and not isinstance(body[field], str):
                return 400, {"error": f"{field} must be a string"}
        agent_type = body.get("agent_type", "claude-code")
        if agent_type not in AGENT_TYPES:
            return 400, {"error": f"unknown agent_type {agent_type!r}"}
        session = self._find(body)
        if session is None:
            if tmux and event == "start":
                session = self._register(tmux, None, agent_type)
            elif tmux and tmux.startswith("agent-"):
                session = self._register(tmux, None, agent_type)
                session["state"] = "running"
                session["history"].append(("register", "running"))
            elif sid and self.register_session_ids and event == "start":
                session = self._register(None, sid, agent_type)
            else:
                return 404, {"error": "session not found"}
        allowed, target = EVENTS[event]
        if session["state"] in allowed:
            session["state"] = target
            session["history"].append((event, target))
            return 200, {"ok": True, "session": session["id"], "state": target}
        session["history"].append((event, None))
        return 200, {"ok": True, "session": session["id"], "state": session["state"], "ignored": True}

    # -- what tests read -----------------------------------------------------

    def session_list(self) -> list[dict[str, Any]]:
        with self.lock:
            return [{k: v for k, v in s.items() if k != "history"} for s in self.sessions.values()]

    def accepted(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["status"] == 200]

    def wait_for(self, predicate: Any, timeout: float = 20.0, what: str = "condition") -> None:
        wait_for(predicate, timeout, what, show=lambda: f"{len(self.requests)} requests so far", step=0.02)
