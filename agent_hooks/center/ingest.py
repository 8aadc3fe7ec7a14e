"""The ingest contract's hook endpoints, exactly: ``/api/hooks/ingest`` and ``/api/hooks/sessions``.

* ``POST /api/hooks/ingest`` ``{tmux_session | session_id, event, metadata?, agent_type?}``:
  200 ``{"ok", "session", "state", "ignored"}``; 400 invalid JSON, a missing or
  unknown event, neither id; 404 an unknown session that cannot be
  auto-registered. An ``Idempotency-Key`` seen before is answered 200 and not
  applied again (our drainers deliver at least once).
* ``GET /api/hooks/sessions``: every session (a JSON list).
* ``POST /api/hooks/sessions``: register; 201 ``{"created": true, "session"}``,
  or 200 with the existing session for a known tmux name.
* ``PATCH /api/hooks/sessions/:id`` ``{"state"}`` or ``{"event"}``: 200; 409
  when no event moves the session to that state; 404.
* ``DELETE /api/hooks/sessions/:id``: 200, then 404.

The host a session belongs to is the caller's (server/access.py): a paired
host's name comes from its credential (a header naming another host is 403).
The owner (its uid on loopback, or the shared fleet token) may name one in the
``X-Agent-Hooks-Host`` header, else its address is the name; loopback without
a header is this host. A host sees and changes only its own sessions here;
a device (a person's browser) does not ingest or register.

Bodies are read by agent_hooks.server.body (bounded before they are read; bad
input is a 4xx, never a 500). Over 64 KiB: 413 on register and PATCH, 400 on
ingest (the ingest contract answers every body it refuses with 400).
"""

from __future__ import annotations

import functools
import sqlite3
import time

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_hooks import fleet
from agent_hooks.center import contract, fleetdb, limits
from agent_hooks.center.hub import hub_of
from agent_hooks.server import access, fastpath
from agent_hooks.server.app import ServerState, state_of
from agent_hooks.server.body import read_json
from agent_hooks.server.jsonout import JSONResponse

# When a sender refused for the center's limits (429) may try again, in seconds.
RETRY_AFTER = b"60"


def origin_host(state: ServerState, request: HTTPConnection, caller: access.Caller) -> str:
    """The host a request speaks for ("" = this host): a paired host's own name (another named in the
    header: 403); for the owner the header's, else the caller's address (loopback: this host)."""
    named = caller.speaks_for(access.named_host(request))
    if caller.kind == access.HOST and named:
        return named
    if named and fleet.clean_host(named):
        return fleetdb.THIS_HOST if named == hub_of(state).own_host else named
    client = request.scope.get("client")
    if not client or access.is_loopback(client[0]):
        return fleetdb.THIS_HOST
    return str(client[0])


def _not_its_own(conn: sqlite3.Connection, session_id: str | None, tmux: str | None,
                 host: str) -> fleetdb.Result | None:
    """403 when a paired host's event or registration names a session of another host (by its card or
    session id: the contract looks those up across hosts), else None."""
    card = fleetdb.find(conn, session_id, tmux, host)
    if card is not None and card["host"] != host:
        return fleetdb.Result(403, {"error": f"session {session_id!r} is not host {host!r}'s: a host speaks"
                                              " only for its own sessions"})
    return None


def ingest_for(conn: sqlite3.Connection, body: contract.IngestBody, host: str, at: float, key: str | None,
               paired: bool, caps: limits.Limits | None = None) -> fleetdb.Result:
    """:func:`fleetdb.ingest`; for a paired host (``paired``) only on its own sessions."""
    refused = _not_its_own(conn, body.session_id, body.tmux_session, host) if paired else None
    return refused or fleetdb.ingest(conn, body, host, at, key, caps)


def register_for(conn: sqlite3.Connection, reg: contract.Registration, host: str, at: float,
                 paired: bool, caps: limits.Limits | None = None) -> fleetdb.Result:
    """:func:`fleetdb.register`; for a paired host only on its own sessions."""
    refused = _not_its_own(conn, reg.session_id, reg.tmux_session, host) if paired else None
    return refused or fleetdb.register(conn, reg, host, at, caps)


async def own_card(state: ServerState, caller: access.Caller, card_id: str) -> None:
    """A paired host touches only its own cards (403 for another host's; an unknown id goes on to 404)."""
    if caller.kind != access.HOST:
        return
    row = await hub_of(state).submit(fleetdb.get, card_id)
    if row is not None:
        caller.may_act_on(row["host"])


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _answer_body(out: fleetdb.Result, own_host: str) -> dict[str, object]:
    body = dict(out.body)
    if isinstance(body.get("session"), dict):
        body["session"] = fleetdb.public(body["session"], own_host)
    return body


def answer(out: fleetdb.Result, own_host: str) -> JSONResponse:
    headers = {"Retry-After": RETRY_AFTER.decode()} if out.status == 429 else None
    return JSONResponse(_answer_body(out, own_host), status_code=out.status, headers=headers)


async def ingest(state: ServerState, scope: fastpath.Scope, receive: fastpath.Receive, send: fastpath.Send) -> None:
    # Raw ASGI (agent_hooks.server.fastpath): the route that carries the fleet's traffic.
    hub = hub_of(state)
    conn = HTTPConnection(scope)
    try:
        caller = await access.check(state, conn, access.HOSTS)
        host = origin_host(state, conn, caller)
    except access.Refused as refused:
        await refused.response()(scope, receive, send)
        return
    try:
        body = await read_json(scope, receive, contract.parse_ingest)
    except contract.BodyError as exc:
        # The ingest contract answers every body it refuses with 400, a too large one included.
        state.stats.count("ingest_400")
        await fastpath.send_json(send, 400, {"error": str(exc)})
        return
    key = conn.headers.get("idempotency-key") or None
    if key is not None and len(key) > 200:
        await fastpath.send_json(send, 400, {"error": "Idempotency-Key is too long (at most 200 characters)"})
        return
    out = await hub.write(ingest_for, body, host, time.time(), key, caller.kind == access.HOST,
                          limits.Limits.of(state.config))
    state.stats.count(f"ingest_{out.status}")
    if out.status == 429:  # a new host or card past the center's limits: the sender keeps it and tries later
        hub.note_refused(host, str(out.body.get("error")))
        await fastpath.send_bytes(send, 429, fastpath.json_bytes(out.body), [(b"retry-after", RETRY_AFTER)])
        return
    await fastpath.send_json(send, out.status, _answer_body(out, hub.own_host))


async def list_sessions(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    caller = await access.check(state, request)
    rows = await hub.submit(lambda conn: fleetdb.list_cards(conn))
    if caller.kind == access.HOST:  # a host sees its own sessions only
        rows = [r for r in rows if r["host"] == caller.name]
    return JSONResponse([fleetdb.public(r, hub.own_host) for r in rows])


async def register(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    caller = await access.check(state, request, access.HOSTS)
    host = origin_host(state, request, caller)
    try:
        reg = await read_json(request.scope, request.receive, contract.parse_registration)
    except contract.BodyError as exc:
        return error(exc.status, str(exc))
    out = await hub.write(register_for, reg, host, time.time(), caller.kind == access.HOST,
                          limits.Limits.of(state.config))
    if out.status == 429:
        hub.note_refused(host, str(out.body.get("error")))
    return answer(out, hub.own_host)


async def one(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    caller = await access.check(state, request)
    card_id = request.path_params["id"]
    await own_card(state, caller, card_id)
    if request.method == "GET":
        row = await hub.submit(fleetdb.get, card_id)
        if row is None:
            return error(404, f"no session {card_id!r}")
        return JSONResponse(fleetdb.public(row, hub.own_host))
    if request.method == "DELETE":
        out = await hub.write(fleetdb.delete, card_id)
        return answer(out, hub.own_host)
    try:
        kind, value = await read_json(request.scope, request.receive, contract.parse_patch)
    except contract.BodyError as exc:
        return error(exc.status, str(exc))
    out = await hub.write(fleetdb.patch, card_id, kind, value, time.time())
    return answer(out, hub.own_host)


def routes(state: ServerState) -> list[BaseRoute]:
    return [
        state.fast_route("/api/hooks/ingest", functools.partial(ingest, state)),
        Route("/api/hooks/sessions", list_sessions, methods=["GET"]),
        Route("/api/hooks/sessions", register, methods=["POST"]),
        Route("/api/hooks/sessions/{id}", one, methods=["GET", "PATCH", "DELETE"]),
    ]
