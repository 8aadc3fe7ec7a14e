"""The board at ``/``: plain files shipped in the package (static/), and the JSON they read.

* ``GET /``: the board (``static/index.html``), for the owner and paired
  devices (a browser paired at ``/pair``, center/pairing.py); ``/?token=T``
  keeps the owner's fleet token as a SameSite=Strict cookie.
* ``GET /static/...``: its CSS and JavaScript. No CDN, no build step.
* ``GET /sw.js``: its service worker (static/sw.js), served from the root so
  that its scope is the whole board: it shows a Web Push and opens its request.
  For people, as the board is.
* ``GET /manifest.webmanifest`` and ``GET /icons/<file>``: what makes the board
  an app a phone installs. These answer anyone the front door lets in: a browser
  fetches a manifest and its icons without the page's cookies (a paired phone
  would get 401), and they hold nothing but the board's name and picture.
* ``GET /api/board``: every card, the states and which drags are allowed.
* ``GET /api/board/sessions/<id>``: a session's page (agent_hooks.center.cards.detail).

The board keeps itself current from ``/api/live`` (agent_hooks.center.hub).
"""

from __future__ import annotations

import os
import time
from typing import Any

from starlette.requests import HTTPConnection, Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from agent_hooks.center import cards, contract, fleetstore
from agent_hooks.center.hub import hub_of
from agent_hooks.server import access
from agent_hooks.server.app import ServerState, state_of
from agent_hooks.server.jsonout import JSONResponse

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
ICONS = {"icon.svg": "image/svg+xml", "icon-192.png": "image/png", "icon-512.png": "image/png"}
OWN_STATES = {
    "live": "working: hook calls are coming",
    "awaiting": "its turn ended (Stop): waiting for a prompt",
    "stalled": "live, but no hook call for heartbeat.stalled_after_s",
    "ended": "the session ended (SessionEnd)",
    "needs_input": "asked a person: a permission prompt or a question",
    "error": "its turn ended on an API error (StopFailure)",
}


def board_meta(state: ServerState) -> dict[str, Any]:
    """What the board needs besides the cards: names, states, allowed drags."""
    hub = hub_of(state)
    return {
        "host": hub.own_host,
        "states": list(contract.STATES),
        "own_states": OWN_STATES,
        "transitions": {s: contract.targets(s) for s in contract.STATES},
        "events": {e: {"from": sorted(src), "to": to, "means": contract.EVENT_MEANINGS[e]}
                   for e, (src, to) in contract.EVENTS.items()},
        "stalled_after_s": float(state.config["heartbeat"]["stalled_after_s"]),
        # The OpenClaw gateway's connection, when one is configured (center/channels.py).
        **state.channel_status(),
    }


async def index(request: Request) -> Response:
    state = state_of(request)
    token = request.query_params.get("token")
    if token is not None:
        if not access.token_ok(state, token):
            return JSONResponse({"error": "wrong fleet token"}, status_code=401)
        response: Response = RedirectResponse("/", status_code=303)
        response.set_cookie(access.COOKIE, token, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https", max_age=30 * 86400)
        if access.DEVICE_COOKIE in request.cookies:  # the owner's key from here on, not a device's
            response.delete_cookie(access.DEVICE_COOKIE, httponly=True, samesite="strict")
        return response
    await access.check(state, request, access.PEOPLE)
    return FileResponse(os.path.join(STATIC, "index.html"), headers={"Cache-Control": "no-cache"})


async def board(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    await access.check(state, request, access.PEOPLE)
    return JSONResponse({**board_meta(state), "seq": hub.seq, "now": time.time(),
                         "cards": cards.ordered(list(hub.cards.values())), "cost": hub.cost_view,
                         # Cards past board.max_sessions, not shown (center/hub.py, Hub._members).
                         "cards_left_out": hub.cards_left_out})


async def session_page(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    await access.check(state, request, access.PEOPLE)
    card_id = request.path_params["id"]
    env = dict(state.env)
    data = await state.run_blocking(_detail, state, env, hub.own_host, card_id)
    if data is None:
        return JSONResponse({"error": f"no session {card_id!r}"}, status_code=404)
    return JSONResponse(data)


async def service_worker(request: Request) -> Response:
    await access.check(state_of(request), request, access.PEOPLE)
    # no-cache: a phone picks up a new service worker at its next visit.
    return FileResponse(os.path.join(STATIC, "sw.js"), media_type="text/javascript",
                        headers={"Cache-Control": "no-cache"})


async def manifest(request: Request) -> Response:
    return FileResponse(os.path.join(STATIC, "manifest.webmanifest"), media_type="application/manifest+json",
                        headers={"Cache-Control": "no-cache"})


async def icon(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in ICONS:  # only the files named above: never a path from the request
        return JSONResponse({"error": f"no icon {name!r}"}, status_code=404)
    return FileResponse(os.path.join(STATIC, "icons", name), media_type=ICONS[name],
                        headers={"Cache-Control": "max-age=86400"})


class StaticBoard:
    """The board's CSS and JavaScript, behind the same check as its other routes."""

    def __init__(self) -> None:
        self.files = StaticFiles(directory=STATIC)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        conn = HTTPConnection(scope)
        try:
            await access.check(state_of(conn), conn, access.PEOPLE)
        except access.Refused as refused:
            await refused.response()(scope, receive, send)
            return
        await self.files(scope, receive, send)


def routes(state: ServerState) -> list[BaseRoute]:
    return [
        Route("/", index, methods=["GET"]),
        Route("/api/board", board, methods=["GET"]),
        Route("/api/board/sessions/{id}", session_page, methods=["GET"]),
        Route("/sw.js", service_worker, methods=["GET"]),
        Route("/manifest.webmanifest", manifest, methods=["GET"]),
        Route("/icons/{name}", icon, methods=["GET"]),
        Mount("/static", app=StaticBoard(), name="static"),
    ]


def _detail(state: ServerState, env: dict[str, str], own_host: str, card_id: str) -> dict[str, Any] | None:
    with fleetstore.borrowed(state) as store:
        return cards.detail(store.conn, state.config, env, own_host, card_id, time.time())
