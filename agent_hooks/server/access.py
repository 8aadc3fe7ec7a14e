"""Who may use the command center's routes (ingest, sessions, board, live, control).

* The server's own user on loopback: no authentication, as the seed says.
  "Own user" is the uid the kernel shows for the caller's socket
  (:mod:`agent_hooks.server.peer`), so another local user on the same loopback
  is not waved through: it is treated like a remote caller.
* Anyone else (another address, another local uid) must send the fleet token,
  ``Authorization: Bearer <token>``, else 401. Browsers on other hosts get
  the token once through ``/?token=...``, kept as a SameSite=Strict cookie.
* Browsers: a request carrying an ``Origin`` that is not this server's own
  is refused (403), so a web page the user happens to visit cannot post to
  loopback (a "simple" cross-site POST needs no preflight); and on loopback
  the ``Host`` must be a loopback name, which defeats DNS rebinding.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse

from agent_hooks import fleet
from agent_hooks.server import peer
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


def _origin_problem(conn: HTTPConnection) -> str | None:
    origin = conn.headers.get("origin")
    host = conn.headers.get("host", "")
    if origin and origin != "null":
        try:
            netloc = urlsplit(origin).netloc
        except ValueError:
            netloc = ""
        if netloc.lower() != host.lower():
            return f"cross-site request refused (Origin {origin[:100]} is not this server)"
    elif origin == "null":
        return "cross-site request refused (Origin null)"
    return None


def _host_problem(conn: HTTPConnection) -> str | None:
    host = conn.headers.get("host", "")
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if name.lower() not in LOOPBACK_NAMES:
        return f"Host {host[:100]!r} is not a loopback name (DNS rebinding?)"
    return None


def check(state: ServerState, conn: HTTPConnection) -> JSONResponse | None:
    """None when the caller may go on; else the answer (401 or 403)."""
    problem = _origin_problem(conn)
    if problem:
        return JSONResponse({"error": problem}, status_code=403)
    client = conn.scope.get("client")
    loopback = bool(client) and is_loopback(client[0])
    if loopback and same_user(state, conn):
        problem = _host_problem(conn)
        if problem:
            return JSONResponse({"error": problem}, status_code=403)
        return None
    if token_ok(state, presented_token(conn)):
        return None
    state.stats.count("unauthorized")
    why = ("another user's process on loopback" if loopback else "not on loopback")
    return JSONResponse({"error": f"a fleet token is required ({why}): Authorization: Bearer <token>"},
                        status_code=401, headers={"WWW-Authenticate": "Bearer"})
