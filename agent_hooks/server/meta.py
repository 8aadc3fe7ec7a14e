"""The server about itself: ``GET /health`` (anyone on loopback; its user learns more) and ``GET /status`` (its user)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from agent_hooks.server.app import ServerState, state_of, unauthorized
from agent_hooks.server.jsonout import JSONResponse


async def health(request: Request) -> JSONResponse:
    # Enough for a probe to tell ours from another program, and stale from current. Another
    # user learns that it is up and its version, not our pid, store path or build.
    state = state_of(request)
    if not state.caller_allowed(request):
        return JSONResponse({"ok": True, "service": "agent-hooks", "version": state.version})
    return JSONResponse({"ok": True, "service": "agent-hooks", **state.info()})


async def status(request: Request) -> JSONResponse:
    state = state_of(request)
    if not state.caller_allowed(request):
        return unauthorized()
    return JSONResponse({**state.info(), **state.stats.snapshot(), "store_state": state.watch.snapshot(),
                         # The command center's fleet store ([center] database), its listener's state included.
                         "fleet_store": state.hub.store_status() if state.hub is not None else None,
                         **state.channel_status(), "centers": state.centers_status()})


def routes(state: ServerState) -> list[BaseRoute]:
    return [Route("/health", health, methods=["GET"]), Route("/status", status, methods=["GET"])]
