"""Requests for a person, listed and answered: this host's, and through a command center the fleet's.

* ``GET /api/approvals``: ``{"approvals": [...]}``, pending ones oldest first;
  ``?state=all`` for the history (newest 500), ``?session=ID`` for one session.
* ``POST /api/approvals/<id>``: ``{"decision": "allow" | "allow_always" | "deny",
  "message", "interrupt", "answers": {question: label}}``. 200 with the row; 409
  when it was answered, withdrawn or expired first (the body says how); 404 for
  no such request; 400 for an answer that does not fit it. Optional ``"via"``
  ("board", "remote") and ``"by"`` say who answered, for the record.
* Same authorization as cancel (server/access.py): the owner on loopback, else the fleet token.

An answer here wakes the http hook that waits for it on this host (server/held.py).
"""

from __future__ import annotations

import os
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_hooks import fleet
from agent_hooks.center import contract, fleetdb, relay
from agent_hooks.center.hub import hub_of
from agent_hooks.features import approvals
from agent_hooks.server import access, peer
from agent_hooks.server.app import ServerState, state_of
from agent_hooks.server.body import read
from agent_hooks.server.jsonout import JSONResponse

MAX_BODY_BYTES = contract.MAX_BODY_BYTES  # an answer is small: the API's one limit (server/body.py)


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


def _answer(conn: Any, ref: str, body: dict[str, Any], by: str, via: str, where: str) -> fleetdb.Result:
    result = approvals.answer(conn, ref, str(body.get("decision") or ""), message=body.get("message"),
                              interrupt=bool(body.get("interrupt")), answers=body.get("answers"),
                              by=by, via=via, where=where)
    out = fleetdb.answer_outcome(result)
    if result.row is not None and not result.row["host"]:
        out.changed.add(result.row["session_id"])
    return out


async def listing(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
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
        pending, listed_out = await hub.submit(relay.pending, hub.own_host, time.time())
        # How many of each host's requests are not listed: past its fair share, or past its cap.
        return JSONResponse({"host": hub.own_host, "approvals": pending, "left_out": hub.left_out_of(listed_out)})
    rows = await hub.submit(lambda conn: approvals.listing(conn, which, session))
    return JSONResponse({"host": hub.own_host, "approvals": [approvals.public(r, hub.own_host) for r in rows]})


async def answer(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
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
    # An OpenClaw exec approval: answered through its gateway (center/channels.py).
    for channel in state.channels:
        answered = await channel.answer(request.path_params["id"], {**body, "via": via}, by, where)
        if answered is not None:
            return answered
    # Another host's request: answered there, down the channel cancels use (center/relay.py).
    routed = await hub.write(relay.route, request.path_params["id"], body, by, where, time.time())
    if routed is not None:
        return await relay.finish(hub, routed)
    out = await hub.write(_answer, request.path_params["id"], body, by, via, where)
    if out.status == 200:
        state.holds.wake(out.body["approval"]["id"])
    doc = dict(out.body)
    if "approval" in doc:
        doc["approval"] = approvals.public(doc["approval"], hub.own_host)
    if out.status == 409:
        doc["already"] = True
    return JSONResponse(doc, status_code=out.status)


def routes(state: ServerState) -> list[BaseRoute]:
    hub = hub_of(state)
    hub.change_listeners.append(state.holds.wake)

    return [
        Route("/api/approvals", listing, methods=["GET"]),
        Route("/api/approvals/{id}", answer, methods=["POST"]),
    ]
