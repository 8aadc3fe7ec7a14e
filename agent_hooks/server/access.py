"""Who may use the server's routes: the front door every request passes, then who the caller is.

The front door (:func:`front_door`, run by :class:`~agent_hooks.server.fastpath.FastPath`
before any route, hook routes, ``/status``, ``/health``, the board, its
WebSocket and static files alike) keeps browsers out:

* a request carrying an ``Origin`` that is not this server's own is refused
  (403), so a web page the user happens to visit cannot post to loopback (a
  "simple" cross-site POST needs no preflight);
* a request whose ``Host`` is not this server's own name is refused (403). Its own names
  are the loopback literals ``127.0.0.1``, ``localhost`` and ``[::1]`` with the server's own
  port (:attr:`ServerState.door_hosts`, one set lookup), and the names configured for serving
  other hosts (``[fleet] names``), for which a caller let in for who it is (the server's own
  uid, or root) must also show the fleet token. Nothing else: a page whose name was rebound
  to our address (DNS rebinding: ``127.0.0.1.evil.example``, ``127.evil.example``) is
  same-origin to the browser, but it cannot choose ``Host``, and it has no token.

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

from agent_hooks import fleet
from agent_hooks.server import peer
from agent_hooks.server.jsonout import JSONResponse

if TYPE_CHECKING:  # annotations only: app.py imports this module to build the front door
    from agent_hooks.server.app import ServerState

COOKIE = "agent_hooks_fleet"
# The loopback literals a Host header may name (with the server's own port): never a name that merely
# starts like one (``127.0.0.1.evil.example``, ``localhost.evil.example``).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(address: str | None) -> bool:
    """True when ``address`` is a loopback IP address (``127.0.0.1``, ``127.0.0.2``, ``::1``): an address
    literal, never a name (``127.evil.example`` is a name, whatever it starts with)."""
    if not address:
        return False
    if address == "127.0.0.1" or address == "::1":  # the common case, without ipaddress's parser
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1, from a dual-stack socket
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def door_hosts(port: int) -> frozenset[bytes]:
    """The ``Host`` values that name this server on loopback: each loopback literal with ``port``
    (and without one only when ``port`` is 80, as a client then sends it)."""
    hosts = {f"{name}:{port}".encode() for name in LOOPBACK_NAMES}
    if port == 80:
        hosts |= {name.encode() for name in LOOPBACK_NAMES}
    return frozenset(hosts)


def host_name_of(host: str) -> str:
    """A ``Host`` header's name without its port, in lower case (``[::1]`` keeps its brackets). A value
    that is not ``name[:port]`` comes back whole, and so matches no configured name."""
    text = host.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        name, rest = (text[: end + 1], text[end + 1:]) if end > 0 else (text, "")
    else:
        name, sep, port = text.rpartition(":")
        name, rest = (name, sep + port) if sep else (text, "")
    if rest and not (rest[0] == ":" and rest[1:].isdigit()):
        return text
    return name


def fleet_names(config: dict[str, Any]) -> frozenset[str]:
    """``[fleet] names``: the names (or addresses) other hosts call this server by, as
    :func:`host_name_of` gives them (an IPv6 address in brackets)."""
    names = config["fleet"].get("names")
    if not isinstance(names, list):
        return frozenset()
    out = set()
    for entry in names:
        if not isinstance(entry, str) or not entry.strip():
            continue
        try:
            if ipaddress.ip_address(entry.strip()).version == 6:
                entry = f"[{entry.strip()}]"
        except ValueError:
            pass
        out.add(host_name_of(entry))
    return frozenset(out)


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
    if host in state.door_hosts:  # the common case: one set lookup
        return None
    return _other_host(state, scope, host)


def _other_host(state: ServerState, scope: Any, host: bytes | None) -> str | None:
    """The front door's answer for a ``Host`` that is not, byte for byte, a loopback literal with our port."""
    text = (host or b"").decode("latin-1")
    if text.strip().lower().encode("latin-1") in state.door_hosts:
        return None  # the same, spelt in capitals ("LOCALHOST:24817")
    name = host_name_of(text)
    if not name or name not in fleet_names(state.config):
        return (f"Host {text[:100]!r} is not this server's name (DNS rebinding?): call 127.0.0.1:{state.port},"
                " or name it in [fleet] names to serve other hosts by that name")
    # A configured name: a caller let in for who it is must show the token, which a rebound page cannot.
    if peer.scope_uid(scope) not in (os.geteuid(), 0):
        return None  # anyone else needs the token on every route that does anything anyway
    conn = HTTPConnection(scope)
    if token_ok(state, presented_token(conn) or conn.query_params.get("token")):
        return None
    return (f"Host {text[:100]!r} is a name for other hosts ([fleet] names): send the fleet token"
            f" (Authorization: Bearer <token>), or call 127.0.0.1:{state.port}")


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
