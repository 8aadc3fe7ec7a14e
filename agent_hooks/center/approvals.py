"""Approvals on the host's server: list and answer held requests, and hold the http hooks that wait.

* ``GET /api/approvals``: ``{"approvals": [...]}``, pending ones oldest first;
  ``?state=all`` for the history (newest 500), ``?session=ID`` for one session.
* ``POST /api/approvals/<id>``: ``{"decision": "allow" | "allow_always" | "deny",
  "message", "interrupt", "answers": {question: label}}``. 200 with the row; 409
  when it was answered, withdrawn or expired first (the body says how); 404 for
  no such request; 400 for an answer that does not fit it. Optional ``"via"``
  ("board", "remote") and ``"by"`` say who answered, for the record.
* Same authorization as cancel (server/access.py): the owner on loopback, else the fleet token.

An http hook whose handler asked to wait (features/approvals.Hold) is held by
:func:`hold`: it waits on an asyncio event, woken by an answer posted here or
by any commit to the store (the live hub's ``PRAGMA data_version`` poll sees a
CLI's answer), never blocking the loop or a pool thread. The client closing
the request (the person answered at the terminal) withdraws it at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from agent_hooks import fleet
from agent_hooks.center import contract, fleetdb, relay
from agent_hooks.center.hub import fleet_of
from agent_hooks.features import approvals
from agent_hooks.openclaw import service
from agent_hooks.output import render
from agent_hooks.server import access, peer
from agent_hooks.server.app import ServerState, stopping
from agent_hooks.server.body import read

# While held, the row is read again at least this often (a commit the hub's poll missed, a clock),
# and whether the server is stopping is looked at this often (it gives the client its answer then,
# well inside uvicorn's graceful shutdown, rather than a 500 when the request is cancelled).
RECHECK_S = 2.0
STOP_CHECK_S = 0.25
STOPPED = "the server stopped while the request waited"
MAX_BODY_BYTES = contract.MAX_BODY_BYTES  # an answer is small: the API's one limit (server/body.py)


def waiters(state: ServerState) -> dict[str, set[asyncio.Event]]:
    table = getattr(state, "approval_waiters", None)
    if table is None:
        table = state.approval_waiters = {}  # type: ignore[attr-defined]
    return table  # type: ignore[no-any-return]


def wake(state: ServerState, approval_id: str | None = None) -> None:
    """On the loop: held requests look at their rows again (one, or all of them)."""
    table = waiters(state)
    for aid, events in list(table.items()):
        if approval_id is None or aid == approval_id:
            for event in events:
                event.set()


def _read_state(state: ServerState, approval_id: str) -> str | None:
    row = state.store().conn.execute("SELECT state FROM approvals WHERE id = ?", (approval_id,)).fetchone()
    return row[0] if row else None


def _conclude(state: ServerState, hold: approvals.Hold, gone: str | None,
              why: str | None = None) -> approvals.Outcome | None:
    store = state.store()
    return approvals.conclude(store.conn, hold, gone=gone, write=store.write, why=why)


async def hold(state: ServerState, call: Any, receive: Any) -> None:
    """Wait for the answer to ``call.hold`` and put the client's answer in ``call.text``."""
    h: approvals.Hold = call.hold
    event = asyncio.Event()
    table = waiters(state)
    table.setdefault(h.approval_id, set()).add(event)
    disconnect = asyncio.ensure_future(receive())
    gone: str | None = None
    why: str | None = None
    try:
        next_read = time.monotonic() + RECHECK_S
        while True:
            left = h.left_s()
            if left <= 0:
                break
            if stopping(state):
                why = STOPPED
                break
            event.clear()
            woken = asyncio.ensure_future(event.wait())
            try:
                done, _ = await asyncio.wait({disconnect, woken}, timeout=min(left, STOP_CHECK_S),
                                             return_when=asyncio.FIRST_COMPLETED)
            finally:
                woken.cancel()
            if disconnect in done:
                message = disconnect.result()
                if message.get("type") == "http.disconnect":
                    gone = "the client closed the request (answered at the terminal)"
                    break
                disconnect = asyncio.ensure_future(receive())  # more body: not expected, keep listening
            if woken in done or time.monotonic() >= next_read:
                next_read = time.monotonic() + RECHECK_S
                if await state.run_blocking(_read_state, state, h.approval_id) != approvals.PENDING:
                    break
    except asyncio.CancelledError:
        # Cancelled (the server stopping past its grace): the row must not stay pending for good.
        state.pool.submit(_conclude, state, h, None, STOPPED)
        raise
    finally:
        disconnect.cancel()
        events = table.get(h.approval_id)
        if events is not None:
            events.discard(event)
            if not events:
                table.pop(h.approval_id, None)
    outcome = await state.run_blocking(_conclude, state, h, gone, why)
    call.text = render(call.event, outcome) if outcome is not None else None


def who_answered(state: ServerState, request: Request) -> tuple[str, str]:
    """(by, where) for the record: the caller's uid on loopback, else the fleet token and its host."""
    client = request.scope.get("client")
    address = client[0] if client else "?"
    if client and access.is_loopback(address) and access.same_user(state, request):
        uid = peer.scope_uid(request.scope)
        try:
            import pwd

            name = pwd.getpwuid(uid if uid is not None else os.geteuid()).pw_name
        except (KeyError, ImportError):
            name = "?"
        return f"uid {uid} ({name})", fleet.host_name(state.config)
    host = fleet.clean_host(request.headers.get(fleet.HOST_HEADER))
    return "fleet token", f"{host or '?'} ({address})"


def _answer(conn: Any, ref: str, body: dict[str, Any], by: str, via: str, where: str) -> fleetdb.Outcome:
    status, doc = approvals.answer(conn, ref, str(body.get("decision") or ""), message=body.get("message"),
                                   interrupt=bool(body.get("interrupt")), answers=body.get("answers"),
                                   by=by, via=via, where=where)
    out = fleetdb.Outcome(status, doc)
    row = doc.get("approval")
    if row is not None:
        if not row["host"]:
            out.changed.add(row["session_id"])
    return out


def routes(state: ServerState) -> list[BaseRoute]:
    hub = fleet_of(state)
    hub.change_listeners.append(lambda: wake(state))
    # A command center's answer, applied by this host's subscription: held requests look at once.
    state.wake_approvals = lambda: wake(state)  # type: ignore[attr-defined]

    async def listing(request: Request) -> Response:
        denied = access.check(state, request)
        if denied is not None:
            return denied
        which = request.query_params.get("state") or approvals.PENDING
        if which != "all" and which not in approvals.STATES:
            return JSONResponse({"error": f"state must be all or one of {', '.join(approvals.STATES)}"},
                                status_code=400)
        session = request.query_params.get("session")
        if which == approvals.PENDING and session is None:
            # The whole fleet's, each with its board card (center/relay.py).
            pending = await hub.submit(relay.pending, hub.own_host, time.time())
            return JSONResponse({"host": hub.own_host, "approvals": pending})
        rows = await hub.submit(lambda conn: approvals.listing(conn, which, session))
        return JSONResponse({"host": hub.own_host, "approvals": [approvals.public(r, hub.own_host) for r in rows]})

    async def answer(request: Request) -> Response:
        denied = access.check(state, request)
        if denied is not None:
            return denied
        try:  # the server's one bounded reader and parser (server/body.py): 413, or 400 saying why
            raw = await read(request.scope, request.receive, MAX_BODY_BYTES)
            body = contract.parse_json(raw, MAX_BODY_BYTES) if raw.strip() else {}
        except contract.BodyError as exc:
            return JSONResponse({"error": f"{exc}; the body is {{\"decision\": \"allow\" | \"allow_always\""
                                          " | \"deny\", \"message\", \"interrupt\", \"answers\"}"},
                                status_code=exc.status)
        by, where = who_answered(state, request)
        if isinstance(body.get("by"), str) and body["by"].strip():
            by = f"{body['by'].strip()[:100]} ({by})"
        via = body.get("via") if body.get("via") in ("board", "remote", "api") else "api"
        # An OpenClaw exec approval: answered through its gateway (openclaw/service.py).
        answered = await service.answer(state, request.path_params["id"], {**body, "via": via}, by, where)
        if answered is not None:
            return answered
        # Another host's request: answered there, down the channel cancels use (center/relay.py).
        routed = await hub.write(relay.route, request.path_params["id"], body, by, where, time.time())
        if routed is not None:
            return await relay.finish(hub, routed)
        out = await hub.write(_answer, request.path_params["id"], body, by, via, where)
        if out.status == 200:
            wake(state, out.body["approval"]["id"])
        doc = dict(out.body)
        if "approval" in doc:
            doc["approval"] = approvals.public(doc["approval"], hub.own_host)
        if out.status == 409:
            doc["already"] = True
        return JSONResponse(doc, status_code=out.status)

    return [
        Route("/api/approvals", listing, methods=["GET"]),
        Route("/api/approvals/{id}", answer, methods=["POST"]),
    ]
