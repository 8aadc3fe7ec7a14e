"""The fleet's cost over HTTP: hosts send their priced messages, people read the fleet's totals.

* ``POST /api/fleet/cost``: a host's messages for the ledger (center/ledger.py), as its Reporter
  sends them; the caller is the host (a paired host speaks for itself only, as for a report).
* ``GET /api/fleet/cost?since=EPOCH&by=host|agent|task|session|day``: the fleet's totals, per host,
  with the current window, the week, the burn rate and the forecasts (what ``agent-hook cost
  --fleet --json`` prints).
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_hooks import fleet
from agent_hooks.center import contract, ledger, limits, numbers
from agent_hooks.center.hub import hub_of
from agent_hooks.server import access
from agent_hooks.server.app import ServerState, state_of
from agent_hooks.server.body import read
from agent_hooks.server.jsonout import JSONResponse

BY = ("host", "agent", "task", "session", "day", "model")


async def receive(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    caller = await access.check(state, request, access.HOSTS)
    host = caller.speaks_for(access.named_host(request))
    try:
        doc = contract.parse_json(await read(request.scope, request.receive))
        if doc.get("host") is not None:
            if not isinstance(doc["host"], str):
                raise contract.BodyError('"host" must be the reporting host\'s name (a string)')
            caller.speaks_for(doc["host"])  # a body naming another host than the credential's: 403
            host = host or doc["host"]
        rows, sessions = ledger.check_rows(doc.get("rows"), doc.get("sessions"))
    except contract.BodyError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    host = fleet.clean_host(host)
    if not host:
        return JSONResponse({"error": f"the {fleet.HOST_HEADER} header names the reporting host"}, status_code=400)
    if host == hub.own_host:
        return JSONResponse({"error": "this host's own cost comes from its store, not from a report"},
                            status_code=409)
    refused = await hub.submit(limits.refuse_host, host, limits.Limits.of(state.config), time.time())
    if refused is not None:
        state.stats.count("fleet_refused")
        return JSONResponse({"error": refused}, status_code=429, headers={"Retry-After": "60"})
    out = await hub.write(ledger.store, host, rows, sessions, time.time())
    return JSONResponse({**out.body, "epoch": hub.epoch}, status_code=out.status)


async def totals(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    await access.check(state, request, access.PEOPLE)
    q = request.query_params
    by = q.get("by") or None
    if by is not None and by not in BY:
        return JSONResponse({"error": f"by must be one of {', '.join(BY)}"}, status_code=400)
    try:
        since = numbers.parse(q.get("since"), "time", "since")
    except contract.BodyError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    out = await hub.submit(ledger.summary, state.config, hub.own_host, time.time(), since, by)
    return JSONResponse(out)


def routes(state: ServerState) -> list[BaseRoute]:
    return [Route("/api/fleet/cost", receive, methods=["POST"]), Route("/api/fleet/cost", totals, methods=["GET"])]
