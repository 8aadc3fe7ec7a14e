"""Start sessions from the command center: ``POST /api/sessions`` and ``GET /api/launch``.

* ``POST /api/sessions`` ``{"host", "cwd", "prompt", "task_id", "agent", "label",
  "permission_mode"}``: a person's act (the owner, or a paired device; a host's
  credential is refused). The card is made at once, ``starting``, with the
  session's own id (the client is started with ``--session-id``), so the
  session's hooks move that very card. On this host the launch runs here
  (center/launch.py); on another, a ``launch`` control goes down that host's long
  poll (center/control.py), the host decides from its own ``[launch]``
  configuration, starts it or refuses, and says which (``POST
  /api/fleet/replies``). The answer: 201 started, 409 refused (with the host's
  reason), 202 sent but not confirmed yet (the card says what the host says later).
* ``GET /api/launch``: what each host may launch (its roots and permission modes,
  from its reports), for the board's "New session" form.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_hooks import fleet
from agent_hooks.center import contract, fleetdb, launch
from agent_hooks.center.hub import hub_of
from agent_hooks.server import access
from agent_hooks.server.app import ServerState, state_of
from agent_hooks.server.body import read
from agent_hooks.server.jsonout import JSONResponse

# How long POST /api/sessions waits for another host to say it started the session (or why not).
LAUNCH_WAIT_S = 10.0
STARTING, STARTED, REFUSED = "starting", "started", "refused"
MAX_ROOTS = 50


def record(conn: sqlite3.Connection, item: launch.Launch, host: str, own_host: str, at: float,
           caller: access.Caller) -> fleetdb.Result:
    """The launch's card (starting), its row, and for another host its control; who asked, in one transaction."""
    shown = host or own_host
    if host != fleetdb.THIS_HOST and conn.execute("SELECT 1 FROM fleet_hosts WHERE host = ?", (host,)).fetchone() is None:
        return fleetdb.Result(404, {"error": f"no host {host!r} subscribes to this command center (its server must run"
                                              " with forward.url naming this one)"})
    taken = conn.execute(
        "SELECT f.id FROM fleet_sessions f LEFT JOIN fleet_launches l ON l.card_id = f.id WHERE f.host = ?"
        " AND f.tmux_session = ? AND f.state NOT IN ('completed', 'failed') AND coalesce(l.state, '') != ?",
        (host, item.tmux, REFUSED)).fetchone()
    if taken is not None:
        return fleetdb.Result(409, {"error": f"a session named {item.tmux} is on the board for host {shown} already"
                                              f" (card {taken[0]}): give another label", "host": shown})
    card = fleetdb.create(conn, host=host, at=at, session_id=item.session_id, tmux=item.tmux,
                          local=host == fleetdb.THIS_HOST, card_id=item.session_id, label=item.label,
                          prompt=item.prompt, task_id=item.task_id)
    seq = None
    if host != fleetdb.THIS_HOST:
        seq = fleetdb.add_control(conn, host=host, kind="session", action="launch", at=at, fleet_id=card["id"],
                                  session_id=item.session_id, tmux=item.tmux, task_id=item.task_id,
                                  reason=json.dumps(item.spec()))
    conn.execute("INSERT INTO fleet_launches (card_id, host, seq, state, cwd, permission_mode, at)"
                 " VALUES (?, ?, ?, ?, ?, ?, ?)", (card["id"], host, seq, STARTING, item.cwd, item.permission_mode, at))
    caller.record(conn, at=at, action="launch", target=item.tmux, status=202, card=card["id"], host=shown,
                  note=f"{item.cwd}: {item.prompt}")
    out = fleetdb.Result(202, {"ok": True, "id": card["id"], "host": shown, "tmux_session": item.tmux,
                                "state": STARTING},
                         [{"id": card["id"], "event": "register", "from": None, "to": card["state"], "ignored": False,
                           "source": "launch", "at": at}], {card["id"]})
    if seq is not None:
        out.body["seq"] = seq
    return out


def settle(conn: sqlite3.Connection, card_id: str, error: str | None, at: float) -> fleetdb.Result:
    """What became of a launch on this host: started, or refused and why."""
    conn.execute("UPDATE fleet_launches SET state = ?, error = ?, settled_at = ? WHERE card_id = ? AND state = ?",
                 (REFUSED if error else STARTED, error[:500] if error else None, at, card_id, STARTING))
    return fleetdb.Result(200, {}, changed={card_id})


def settle_results(conn: sqlite3.Connection, host: str, results: list[tuple[int, str | None]],
                   at: float) -> fleetdb.Result:
    """A host's word on the launch controls sent to it (others' seqs, and other controls, change nothing)."""
    out = fleetdb.Result(200, {})
    for seq, error in results:
        row = conn.execute("SELECT card_id FROM fleet_launches WHERE seq = ? AND host = ? AND state = ?",
                           (seq, host, STARTING)).fetchone()
        if row is not None:
            out.changed |= settle(conn, row[0], error, at).changed
    return out


def offers(conn: sqlite3.Connection) -> list[tuple[str, str | None]]:
    return [(r[0], r[1]) for r in conn.execute("SELECT host, launch FROM fleet_hosts ORDER BY host")]


def keep_offer(conn: sqlite3.Connection, host: str, offer: dict[str, Any], at: float) -> None:
    """What a host says it may launch (its report), for the board's form."""
    conn.execute("INSERT INTO fleet_hosts (host, last_seen_at, launch) VALUES (?, ?, ?) ON CONFLICT (host)"
                 " DO UPDATE SET launch = excluded.launch", (host, at, json.dumps(offer)))


def clean_offer(value: Any) -> dict[str, Any] | None:
    """A reported offer with only what we know, of the right types (None: not one)."""
    if not isinstance(value, dict):
        return None
    roots = [r[:launch.MAX_PATH_CHARS] for r in value.get("roots") or [] if isinstance(r, str) and r][:MAX_ROOTS] \
        if isinstance(value.get("roots"), list) else []
    modes = [m for m in value.get("permission_modes") or [] if m in launch.CLIENT_MODES] \
        if isinstance(value.get("permission_modes"), list) else []
    default = value.get("default_mode") if value.get("default_mode") in modes else launch.default_mode(modes)
    return {"roots": roots, "permission_modes": modes, "default_mode": default}


async def start_session(request: Request) -> Response:
    """POST /api/sessions: start a Claude Code session on a host (see the module docstring)."""
    state = state_of(request)
    hub = hub_of(state)
    # A person's act: a paired host's credential is for its own traffic (403), and says so.
    caller = await access.check(state, request, access.PEOPLE)
    try:
        doc = contract.parse_json(await read(request.scope, request.receive))
        # The session's id is this center's to choose (it is the card's); the tmux name comes from the label.
        item = launch.parse({k: v for k, v in doc.items() if k not in ("session_id", "tmux")}, str(uuid.uuid4()))
    except contract.BodyError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    except launch.LaunchError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    named = doc.get("host")
    if named is not None and named != "" and (not isinstance(named, str) or fleet.clean_host(named) is None):
        return JSONResponse({"error": '"host" must be a host name on this board'}, status_code=400)
    host = fleetdb.THIS_HOST if not named or named == hub.own_host else named
    out = await hub.write(record, item, host, hub.own_host, time.time(), caller)
    body = dict(out.body)
    if out.status != 202:
        return JSONResponse(body, status_code=out.status)
    if host == fleetdb.THIS_HOST:
        problem = await state.run_blocking(launch.run, item, state.config, state.env, state.paths.data_dir,
                                           hub.own_host)
        await hub.write(settle, item.session_id, problem, time.time())
        return _answer(body, problem)
    result = await hub.host_word(body.pop("seq"), LAUNCH_WAIT_S, host)
    if result is None:
        body["applied"] = "sent, not confirmed yet"
        return JSONResponse(body, status_code=202)
    return _answer(body, result.get("error") if isinstance(result.get("error"), str) else None)


def _answer(body: dict[str, Any], problem: str | None) -> Response:
    if problem:
        return JSONResponse({**body, "state": REFUSED, "error": problem}, status_code=409)
    return JSONResponse({**body, "state": STARTED}, status_code=201)


async def launch_hosts(request: Request) -> Response:
    """GET /api/launch: each host's roots and permission modes (null: it has not said)."""
    state = state_of(request)
    hub = hub_of(state)
    await access.check(state, request, access.PEOPLE)
    hosts = [{"host": hub.own_host, "here": True, **launch.offer(state.config)}]
    for host, raw in await hub.submit(offers):
        if host == hub.own_host:
            continue
        try:
            offer = clean_offer(json.loads(raw)) if raw else None
        except ValueError:
            offer = None
        hosts.append({"host": host, "here": False, **(offer or {"roots": None, "permission_modes": None,
                                                                  "default_mode": None})})
    return JSONResponse({"hosts": hosts, "modes": list(launch.CLIENT_MODES)})


def routes(state: ServerState) -> list[BaseRoute]:
    return [
        Route("/api/sessions", start_session, methods=["POST"]),
        Route("/api/launch", launch_hosts, methods=["GET"]),
    ]
