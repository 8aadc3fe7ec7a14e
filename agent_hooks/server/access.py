"""Who may use the server's routes: the front door every request passes, then who the caller is.

The front door (:func:`front_door`, run by :class:`~agent_hooks.server.fastpath.FastPath`
before any route, hook routes, ``/status``, ``/health``, the board, its
WebSocket and static files alike) keeps browsers out:

* a request carrying an ``Origin`` that is not this server's own is refused
  (403), so a web page the user happens to visit cannot post to loopback (a
  "simple" cross-site POST needs no preflight);
* a request whose ``Host`` is not a loopback name is refused (403) when the
  caller would be let in for who it is (the server's own uid, or root) and
  shows no fleet token: a page whose name was rebound to our address (DNS
  rebinding) is same-origin to the browser, but it cannot choose ``Host``.

Then each route asks who the caller is. The command center's routes
(ingest, sessions, board, live, control) use :func:`check`:

* The server's own user on loopback: no authentication, as the ingest contract says.
  "Own user" is the uid the kernel shows for the caller's socket
  (:mod:`agent_hooks.server.peer`), so another local user on the same loopback
  is not waved through: it is treated like a remote caller.
* Anyone else (another address, another local uid) must send the fleet token,
  ``Authorization: Bearer <token>``, else 401. Browsers on other hosts get
  the token once through ``/?token=...``, kept as a SameSite=Strict cookie.

The hook routes and ``/status`` answer only the server's own uid; ``/health``
tells anyone that it is up.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse

from agent_hooks import fleet
from agent_hooks.server import peer

if TYPE_CHECKING:  # annotations only: app.py imports this module to build the front door
    from agent_hooks.server.app import ServerState

COOKIE = "agent_hooks_fleet"
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.startswith("127.") or host == "::1":  # the common case, without ipaddress's parser
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def same_user(state: ServerState, conn: HTTPConnection) -> bool:
    """The caller is a process of the server's own user (or root)."""
    # One lookup for the whole server (agent_hooks.server.peer: sock_diag, /proc as the fallback).
    uid = peer.scope_uid(conn.scope)
    return uid is not None and uid in (os.geteuid(), 0)


def presented_token(conn: HTTPConnection) -> str | None:
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return conn.cookies.get(COOKIE) or None


def token_ok(state: ServerState, presented: str | None) -> bool:
    expected = fleet.token(state.paths, state.config, state.env)
    return bool(expected and presented and hmac.compare_digest(expected.encode(), presented.encode()))


def _origin_problem(origin: bytes, host: bytes | None) -> str | None:
    """Why a request carrying ``Origin`` is not from this server's own pages, or None."""
    text = origin.decode("latin-1")
    if text == "null":
        return "cross-site request refused (Origin null)"
    try:
        netloc = urlsplit(text).netloc
    except ValueError:
        netloc = ""
    if host is None or netloc.lower() != host.decode("latin-1").lower():
        return f"cross-site request refused (Origin {text[:100]} is not this server)"
    return None


def loopback_host(host: bytes | None) -> bool:
    """True when a ``Host`` header names this machine's loopback (``127.0.0.1:47821``, ``localhost``, ``[::1]``)."""
    if host is None:
        return False
    name = host if host.endswith(b"]") else (host.rpartition(b":")[0] or host)  # without its port
    if name in _LOOPBACK_HOSTS:  # the common case: one set lookup
        return True
    text = name.decode("latin-1").lower()
    return text in LOOPBACK_NAMES or is_loopback(text.strip("[]"))


_LOOPBACK_HOSTS = frozenset(n.encode() for n in LOOPBACK_NAMES)


def front_door(state: ServerState, scope: Any) -> str | None:
    """Why the front door refuses this request (403), or None to let it on to its route.

    Every http and WebSocket request passes here first (see the module docstring). Cheap on the
    path Claude Code takes (no Origin, a loopback Host): one pass over the headers, one set lookup.
    """
    host: bytes | None = None
    origin: bytes | None = None
    origins = 0
    for key, value in scope["headers"]:
        if key == b"host":
            if host is None:
                host = value
        elif key == b"origin":
            origin = value
            origins += 1
    if origin is not None:
        if origins > 1:
            return "cross-site request refused (more than one Origin)"
        problem = _origin_problem(origin, host)
        if problem:
            return problem
    if loopback_host(host):
        return None
    # Another Host: a caller let in for who it is must show the token, which a rebound page cannot.
    if peer.scope_uid(scope) not in (os.geteuid(), 0):
        return None  # anyone else needs the token on every route that does anything anyway
    conn = HTTPConnection(scope)
    if token_ok(state, presented_token(conn) or conn.query_params.get("token")):
        return None
    shown = (host or b"").decode("latin-1")
    return (f"Host {shown[:100]!r} is not a loopback name (DNS rebinding?): "
            "call 127.0.0.1, or send the fleet token (Authorization: Bearer <token>)")


async def refuse(scope: Any, receive: Any, send: Any, problem: str) -> None:
    """The front door's answer: 403 with the reason (a WebSocket is closed before it is accepted)."""
    from agent_hooks.server import fastpath

    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 4403, "reason": problem[:120]})
        return
    await fastpath.send_json(send, 403, {"error": problem})


def check(state: ServerState, conn: HTTPConnection) -> JSONResponse | None:
    """None when the caller may go on; else the answer (401). Origin and Host were checked
    at the front door (:func:`front_door`), before any route."""
    client = conn.scope.get("client")
    loopback = client is not None and is_loopback(client[0])
    if loopback and same_user(state, conn):
        return None
    if token_ok(state, presented_token(conn)):
        return None
    state.stats.count("unauthorized")
    why = ("another user's process on loopback" if loopback else "not on loopback")
    return JSONResponse({"error": f"a fleet token is required ({why}): Authorization: Bearer <token>"},
                        status_code=401, headers={"WWW-Authenticate": "Bearer"})
