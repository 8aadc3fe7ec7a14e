"""Requests for a person, listed and answered: this host's, and through a command center the fleet's.

* ``GET /api/approvals``: ``{"approvals": [...]}``, pending ones oldest first;
  ``?state=all`` for the history (newest 500), ``?session=ID`` for one session.
  Each with its board card (``card``) and the ``agent`` and ``tmux_session`` that ask.
* ``POST /api/approvals/<id>``: ``{"decision": "allow" | "allow_always" | "deny",
  "message", "interrupt", "answers": {question: label}}``. 200 with the row; 409
  when it was answered, withdrawn or expired first (the body says how); 404 for
  no such request; 400 for an answer that does not fit it. Optional ``"via"``
  ("board", "remote"); ``"by"`` is a display note kept with the answer.
* Who answered is the caller (server/access.py), never the body: a paired
  device's name, ``host NAME``, or the owner (``uid 1000 (alice)``, ``fleet
  token``). A paired host lists and answers only its own requests.

An answer here wakes the http hook that waits for it on this host (server/held.py).
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_hooks import fleet
from agent_hooks.center import contract, fleetdb, relay
from agent_hooks.center.hub import hub_of
from agent_hooks.features import approvals
from agent_hooks.server import access
from agent_hooks.server.app import ServerState, state_of
from agent_hooks.server.body import read
from agent_hooks.server.jsonout import JSONResponse

MAX_BODY_BYTES = contract.MAX_BODY_BYTES  # an answer is small: the API's one limit (server/body.py)


def who_answered(state: ServerState, caller: access.Caller) -> tuple[str, str]:
    """(by, where) for the record, from the caller as its credential showed it: a device's name,
    ``host NAME``, the owner's uid on loopback (where: this host), or ``fleet token``; where: its address."""
    if caller.loopback_uid:
        return caller.label, fleet.host_name(state.config)
    return caller.label, caller.address


def display_note(body: dict[str, Any]) -> str | None:
    """The body's ``by``: a note shown with the answer (never who answered)."""
    by = body.get("by")
    return by.strip()[:100] if isinstance(by, str) and by.strip() else None


def _answer(conn: Any, ref: str, body: dict[str, Any], by: str, via: str, where: str,
            caller: access.Caller) -> fleetdb.Result:
    at = time.time()
    result = approvals.answer(conn, ref, str(body.get("decision") or ""), message=body.get("message"),
                              interrupt=bool(body.get("interrupt")), answers=body.get("answers"),
                              by=by, via=via, where=where, note=display_note(body), at=at)
    out = fleetdb.answer_outcome(result)
    if result.row is not None and not result.row["host"]:
        out.changed.add(result.row["session_id"])
    if result.answered and result.row is not None:
        caller.record(conn, at=at, action=f"answer: {result.row['decision']}", target=result.row["id"],
                      status=200, card=result.row["session_id"], host=result.row["host"], note=display_note(body))
    return out


def _route(conn: Any, ref: str, body: dict[str, Any], by: str, where: str, at: float,
           caller: access.Caller) -> fleetdb.Result | None:
    """:func:`relay.route`, and who answered, in one transaction."""
    out = relay.route(conn, ref, body, by, where, at, display_note(body))
    if out is not None and out.status == 202:
        row = approvals.find(conn, ref)
        caller.record(conn, at=at, action=f"answer: {body.get('decision')}", target=out.body["id"], status=202,
                      card=row["session_id"] if row else None, host=out.body["host"], note=display_note(body))
    return out


def _request_host(conn: Any, ref: str) -> str | None:
    row = approvals.find(conn, ref)
    return None if row is None else str(row["host"] or "")


def with_names(conn: Any, rows: list[dict[str, Any]], config: dict[str, Any], own_host: str,
               now: float) -> list[dict[str, Any]]:
    """Each request with the agent and tmux session that ask, as their board card shows them (None without a
    card here): `approvals --server` names them as the local listing does. Built on a GET only; the
    board's own list (the hub's, every flush) reads them from its cards."""
    from agent_hooks.center import cards

    for row in rows:
        if not row.get("card") and row["host"] != own_host:  # the history's rows of other hosts
            card = fleetdb.find(conn, row["session_id"], None, row["host"])
            row["card"] = card["id"] if card is not None and card["host"] == row["host"] else None
    ids = list(dict.fromkeys(str(r["card"]) for r in rows if r.get("card")))
    built = cards.build(conn, config, own_host, now, ids=ids) if ids else {}
    for row in rows:
        card = built.get(str(row.get("card") or ""))
        row["agent"] = card.get("agent") if card else None
        row["tmux_session"] = card.get("tmux_session") if card else None
    return rows


async def listing(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    caller = await access.check(state, request)
    which = request.query_params.get("state") or approvals.PENDING
    if which != "all" and which not in approvals.STATES:
        return JSONResponse({"error": f"state must be all or one of {', '.join(approvals.STATES)}"},
                            status_code=400)
    session = request.query_params.get("session")
    if which == approvals.PENDING and session is None:
        # The whole fleet's, each with its board card (center/relay.py).
        pending, listed_out = await hub.submit(relay.pending, hub.own_host, time.time())
        # How many of each host's requests are not listed: past its fair share, or past its cap.
        left_out = hub.left_out_of(listed_out)
        if caller.kind == access.HOST:  # a paired host sees its own requests only
            pending = [p for p in pending if p["host"] == caller.name]
            left_out = {h: n for h, n in left_out.items() if h == caller.name}
        pending = await hub.submit(with_names, pending, state.config, hub.own_host, time.time())
        return JSONResponse({"host": hub.own_host, "approvals": pending, "left_out": left_out})
    from agent_hooks.notify.outbox import attach

    def rows_of(conn: Any) -> list[dict[str, Any]]:
        rows = approvals.listing(conn, which, session)
        if caller.kind == access.HOST:
            rows = [r for r in rows if r["host"] == caller.name]
        listed = attach(conn, [approvals.public(r, hub.own_host) for r in rows])  # with each one's delivery
        return with_names(conn, listed, state.config, hub.own_host, time.time())

    return JSONResponse({"host": hub.own_host, "approvals": await hub.submit(rows_of)})


async def answer(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    caller = await access.check(state, request)
    if caller.kind == access.HOST:  # a paired host answers only its own requests
        host = await hub.submit(_request_host, request.path_params["id"])
        if host is None:
            return JSONResponse({"error": f"no approval request {request.path_params['id']!r}"}, status_code=404)
        caller.may_act_on(host)
    try:  # the server's one bounded reader and parser (server/body.py): 413, or 400 saying why
        raw = await read(request.scope, request.receive, MAX_BODY_BYTES)
        body = contract.parse_json(raw, MAX_BODY_BYTES) if raw.strip() else {}
    except contract.BodyError as exc:
        return JSONResponse({"error": f"{exc}; the body is {{\"decision\": \"allow\" | \"allow_always\""
                                      " | \"deny\", \"message\", \"interrupt\", \"answers\"}"},
                            status_code=exc.status)
    by, where = who_answered(state, caller)
    via = body.get("via") if body.get("via") in ("board", "remote", "api") else "api"
    # An OpenClaw exec approval: answered through its gateway (center/channels.py).
    for channel in state.channels:
        answered = await channel.answer(request.path_params["id"], {**body, "via": via}, by, where, caller)
        if answered is not None:
            return answered
    # Another host's request: answered there, down the channel cancels use (center/relay.py).
    routed = await hub.write(_route, request.path_params["id"], body, by, where, time.time(), caller)
    if routed is not None:
        return await relay.finish(hub, routed)
    out = await hub.write(_answer, request.path_params["id"], body, by, via, where, caller)
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
