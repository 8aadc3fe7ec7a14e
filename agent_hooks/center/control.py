"""Control across hosts: cancel and uncancel, issued on a command center, decided locally everywhere.

On the command center:

* ``POST /api/sessions/<ref>/cancel`` ``{"reason"}`` and ``/uncancel``: ``ref``
  is a card id, a session id or a tmux name (``?host=`` narrows a tmux name).
  This host's sessions are marked in the store at once, exactly as
  ``agent-hook cancel`` does; another host's session gets a control row
  for that host.
* ``POST /api/tasks/<id>/cancel`` ``{"reason"}`` and ``/uncancel``: the task
  here, and a control for every host ("*").
* ``GET /api/fleet/controls?host=H&after=N&epoch=E&wait=S``: a host's long
  poll. It answers at once when controls are pending, else when one is issued
  (or after ``wait`` seconds). Asking for ``after=N`` confirms everything up
  to N was applied; the board shows a cancel as delivered from then on.

On every other host, :class:`Subscriber` (in that host's own server) keeps the
long poll open to the command center its ``forward.url`` names (the current
one of several: center/failover.py), and writes each control into its own
store in one transaction with its cursor. The cursor is kept per store (the
center's epoch): a center on the same store goes on from the same control,
and a control already applied is never applied twice when the host comes back
to a center it polled before. So
PreToolUse still decides from the local store, with no network on its path,
and keeps working while the command center is down.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import sqlite3
import time
from typing import Any

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_hooks import __version__, fleet
from agent_hooks.center import contract, credentials, failover, fleetdb, fleetstore, launch, limits, numbers, reply
from agent_hooks.center.hub import Hub, hub_of
from agent_hooks.forward import centers
from agent_hooks.forward.urls import url_problem
from agent_hooks.server import access, fastpath
from agent_hooks.server.app import ServerState, state_of, stop_background
from agent_hooks.server.body import read
from agent_hooks.server.jsonout import JSONResponse
from agent_hooks.server.recovery import StoreUnavailable

log = logging.getLogger("agent_hooks.center.control")
MAX_WAIT_S = 30.0
# How long a reply to another host's session waits for that host to say it was typed.
REPLY_WAIT_S = 5.0
# A host's word on a control larger than this goes to the other centers through fleet_replies (their
# notification carries its id), kept this long: its waiter has given up well before.
REPLY_NOTIFY_BYTES = 7000
REPLY_KEPT_S = 300.0
# While the center answers, the store hears so at least this often (the budget guard's "last known").
SYNC_EVERY_S = 10.0

# -- the store side: the same marks `agent-hook cancel` writes ---------------------


def ensure_task(conn: sqlite3.Connection, task_id: str, at: float) -> None:
    conn.execute("INSERT INTO tasks (task_id, state, created_at, updated_at) VALUES (?, 'open', ?, ?)"
                 " ON CONFLICT (task_id) DO NOTHING", (task_id, at, at))


def mark_task(conn: sqlite3.Connection, task_id: str, cancel: bool, reason: str | None, at: float) -> bool:
    """Cancel (creating the task) or uncancel a task; True when something changed."""
    if cancel:
        ensure_task(conn, task_id, at)
        return conn.execute("UPDATE tasks SET state = 'cancelled', cancel_reason = ?, cancelled_at = ?,"
                            " updated_at = ? WHERE task_id = ?", (reason, at, at, task_id)).rowcount > 0
    return conn.execute("UPDATE tasks SET state = 'open', cancel_reason = NULL, cancelled_at = NULL, updated_at = ?"
                        " WHERE task_id = ? AND state = 'cancelled'", (at, task_id)).rowcount > 0


def mark_session(conn: sqlite3.Connection, session_id: str, cancel: bool, reason: str | None, at: float) -> bool:
    """Set or clear a recorded session's cancel mark (what PreToolUse reads)."""
    if cancel:
        return conn.execute("UPDATE sessions SET cancelled_at = ?, cancel_reason = ? WHERE session_id = ?",
                            (at, reason, session_id)).rowcount > 0
    return conn.execute("UPDATE sessions SET cancelled_at = NULL, cancel_reason = NULL WHERE session_id = ?",
                        (session_id,)).rowcount > 0


def _local_targets(conn: sqlite3.Connection, control: dict[str, Any], cancel: bool) -> list[str]:
    """The recorded sessions a session control names: by id, else the (live, for a cancel) ones of its tmux."""
    sid = control.get("session_id")
    if sid and conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (sid,)).fetchone():
        return [sid]
    tmux = control.get("tmux_session")
    if not tmux:
        return []
    live = " AND state != 'ended'" if cancel else ""
    return [r[0] for r in conn.execute(f"SELECT session_id FROM sessions WHERE tmux_session = ?{live}", (tmux,))]


# The subscription's cursor in the host's store (once one per center: "fleet.subscription:<base>").
CURSOR_KEY = "fleet.subscription"
# Stores (epochs) whose cursor a host keeps: the centers of its forward.url list, and some it left.
CURSORS_KEPT = 16


def cursor_doc(epoch: str, seq: int, seen: dict[str, int]) -> str:
    """The subscription's cursor as the store keeps it: the current store's (``epoch``, ``seq``), and the
    last control applied from every store polled lately (``seen``)."""
    seen = {**seen, epoch: max(seq, int(seen.get(epoch) or 0))} if epoch else dict(seen)
    kept = dict(list(seen.items())[-CURSORS_KEPT:])
    return json.dumps({"epoch": epoch, "seq": seq, "seen": kept})


def apply_controls(conn: sqlite3.Connection, controls: list[dict[str, Any]], cursor_key: str,
                   epoch: str, at: float, center: str = "", seen: dict[str, int] | None = None) -> fleetdb.Result:
    """A subscriber writes the controls it received, and its cursor, in one transaction."""
    out = fleetdb.Result(200, {"applied": [], "results": []})
    last = 0
    for c in controls:
        last = max(last, int(numbers.clean(c.get("seq"), "seq") or 0))
        if c.get("action") == "reply":
            # Typed after the commit, by the subscriber: at most once (the cursor moves past it here).
            out.replies.append((c, _reply_target(conn, c)))
            continue
        if c.get("action") == "launch":
            # Started after the commit, by the subscriber: at most once (the cursor moves past it here).
            out.launches.append(c)
            continue
        if c.get("kind") == "approval" and c.get("action") == "answer":
            # Answered here, in the transaction that moves the cursor: the first answer wins.
            from agent_hooks.center import relay

            result = relay.answer_control(conn, c, center)
            out.body["results"].append(result)
            if result.get("approval"):
                out.changed.add(result["approval"]["session_id"])
            continue
        if c.get("action") not in ("cancel", "uncancel"):
            continue  # an action this version does not know: skipped, never taken for an uncancel
        cancel = c.get("action") == "cancel"
        reason = c.get("reason")
        if c.get("kind") == "task" and c.get("task_id"):
            mark_task(conn, str(c["task_id"]), cancel, reason, at)
            targets = [r[0] for r in conn.execute("SELECT session_id FROM sessions WHERE task_id = ?", (c["task_id"],))]
        else:
            targets = _local_targets(conn, c, cancel)
            for sid in targets:
                mark_session(conn, sid, cancel, reason, at)
        out.changed.update(targets)
        out.body["applied"].append({"seq": c.get("seq"), "sessions": targets})
    fleetdb.meta_set(conn, cursor_key, cursor_doc(epoch, last, seen or {}))
    return out


def _reply_target(conn: sqlite3.Connection, control: dict[str, Any]) -> reply.Target:
    """The session a reply control names on this host (by id, else its tmux session's live one)."""
    found = _local_targets(conn, control, True)
    if not found:
        return reply.Target(str(control.get("session_id") or control.get("tmux_session") or "?"),
                            refused="no such session recorded on this host")
    return reply.target(conn, found[0])


def send_replies(replies: list[tuple[dict[str, Any] | None, reply.Target]], max_age_s: float, max_chars: int,
                 now: float) -> list[dict[str, Any]]:
    """Type the replies a command center sent (blocking: tmux); each one's outcome ({"seq", "error"}).
    The host checks each one itself, as if it had been posted here: what is typed is its decision."""
    results = []
    for carried, t in replies:
        control = carried or {}
        problem: str | None = None
        if now - float(control.get("at") or 0) > max_age_s:
            problem = f"older than fleet.reply_max_age_s ({max_age_s:g} s): not typed"
        else:
            try:
                problem = reply.send(t, reply.clean_text(control.get("reason"), max_chars))
            except reply.ReplyError as exc:
                problem = str(exc)
        if problem:
            log.warning("reply %s to session %s refused: %s", control.get("seq"), t.session_id, problem)
        results.append({"seq": int(control.get("seq") or 0), "error": problem})
    return results


# -- the command center's side ---------------------------------------------------------


def plan_reply(conn: sqlite3.Connection, ref: str, host: str | None, text: str, own_host: str,
               at: float) -> fleetdb.Result:
    """Where a reply goes: this host's session (typed by the caller, after this transaction), or a
    ``reply`` control for the host a remote session runs on. 404 / 409 with the reason otherwise."""
    cards = resolve(conn, ref, host)
    if not cards and conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (ref,)).fetchone():
        cards = [{"id": ref, "host": "", "local": 1, "session_id": ref, "tmux_session": None, "details": None}]
    if not cards:
        return fleetdb.Result(404, {"error": f"no session {ref!r} (a card id, session id or tmux name)"})
    if len(cards) > 1:
        return fleetdb.Result(409, {"error": f"{ref!r} names {len(cards)} sessions; reply by card id"})
    card = cards[0]
    name = card["host"] or own_host
    if card["local"]:
        t = reply.target(conn, card["id"])
        if t.refused:
            return fleetdb.Result(409, {"error": t.refused, "host": name})
        out = fleetdb.Result(200, {"ok": True, "host": name, "applied": "here"})
        out.replies.append((None, t))  # typed by the route, after the commit
        return out
    if card["host"] == fleetdb.THIS_HOST:
        return fleetdb.Result(409, {"error": "this session is not recorded by this host's hooks: its terminal"
                                              " cannot be reached", "host": name})
    row = conn.execute("SELECT details FROM fleet_sessions WHERE id = ?", (card["id"],)).fetchone()
    try:
        details = json.loads(row[0]) if row and row[0] else None
    except ValueError:
        details = None
    if not isinstance(details, dict):
        return fleetdb.Result(409, {"error": f"host {name} has not reported this session (its server must run and"
                                              " subscribe to this command center)", "host": name})
    if not details.get("in_tmux"):
        return fleetdb.Result(409, {"error": "the session does not run in tmux on its host: nothing can type"
                                              " into its terminal", "host": name})
    if not details.get("reply"):
        return fleetdb.Result(409, {"error": "the session is not awaiting its next prompt (it is"
                                              f" {details.get('own_state') or 'working'})", "host": name})
    seq = fleetdb.add_control(conn, host=card["host"], kind="session", action="reply", at=at, fleet_id=card["id"],
                              session_id=details.get("session_id") or card["session_id"],
                              tmux=card["tmux_session"], reason=text)
    return fleetdb.Result(202, {"ok": True, "host": name, "applied": "sent", "seq": seq})


def resolve(conn: sqlite3.Connection, ref: str, host: str | None) -> list[dict[str, Any]]:
    """Cards a reference names: a card id, else a session id, else a tmux name (of ``host`` if given)."""
    card = fleetdb.get(conn, ref)
    if card is not None:
        return [card]
    cols = ", ".join(fleetdb.SESSION_COLUMNS)
    cur = conn.execute(f"SELECT {cols} FROM fleet_sessions WHERE session_id = ?", (ref,))
    rows = cur.fetchall()
    if not rows:
        if host is None:
            cur = conn.execute(f"SELECT {cols} FROM fleet_sessions WHERE tmux_session = ?", (ref,))
        else:
            cur = conn.execute(f"SELECT {cols} FROM fleet_sessions WHERE tmux_session = ? AND host = ?", (ref, host))
        rows = cur.fetchall()
    return [fleetdb.row_dict(cur, r) for r in rows]  # type: ignore[misc]


def cancel_sessions(conn: sqlite3.Connection, ref: str, host: str | None, cancel: bool, reason: str | None,
                    own_host: str, at: float) -> fleetdb.Result:
    """Cancel / uncancel the sessions ``ref`` names: here in the store, elsewhere by a control."""
    cards = resolve(conn, ref, host)
    if not cards and conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (ref,)).fetchone():
        cards = [{"id": ref, "host": "", "local": 1, "session_id": ref, "tmux_session": None}]  # card deleted
    if not cards:
        return fleetdb.Result(404, {"error": f"no session {ref!r} (a card id, session id or tmux name)"})
    hosts = {c["host"] for c in cards}
    if len(hosts) > 1:
        names = sorted(h or own_host for h in hosts)
        return fleetdb.Result(409, {"error": f"{ref!r} names sessions on several hosts ({', '.join(names)});"
                                              " add ?host=NAME", "hosts": names})
    out = fleetdb.Result(200, {"ok": True, "action": "cancel" if cancel else "uncancel", "sessions": []})
    for card in cards:
        entry: dict[str, Any] = {"id": card["id"], "host": card["host"] or own_host}
        if card["local"]:
            mark_session(conn, card["id"], cancel, reason, at)
            entry["applied"] = "here"
        elif card["host"] == fleetdb.THIS_HOST:
            entry["applied"] = "board only (this host's store does not record it)"
        else:
            seq = fleetdb.add_control(conn, host=card["host"], kind="session", action="cancel" if cancel else "uncancel",
                                      at=at, fleet_id=card["id"], session_id=card["session_id"],
                                      tmux=card["tmux_session"], reason=reason)
            entry["applied"] = "sent"
            entry["seq"] = seq
            out.body.setdefault("seq", seq)
        if not card["local"]:
            conn.execute("UPDATE fleet_sessions SET cancelled_at = ?, cancel_reason = ?, cancel_seq = ? WHERE id = ?",
                         (at if cancel else None, reason if cancel else None,
                          entry.get("seq") if cancel else None, card["id"]))
        out.body["sessions"].append(entry)
        out.changed.add(card["id"])
    return out


def cancel_task(conn: sqlite3.Connection, task_id: str, cancel: bool, reason: str | None, at: float) -> fleetdb.Result:
    """Cancel / uncancel a task here and, by a control for every host, everywhere."""
    changed = mark_task(conn, task_id, cancel, reason, at)
    if not cancel and not changed:
        return fleetdb.Result(409, {"error": f"task {task_id!r} is not cancelled"})
    seq = fleetdb.add_control(conn, host="*", kind="task", action="cancel" if cancel else "uncancel", at=at,
                              task_id=task_id, reason=reason)
    out = fleetdb.Result(200, {"ok": True, "action": "cancel" if cancel else "uncancel", "task_id": task_id,
                                "seq": seq})
    out.changed.update(r[0] for r in conn.execute(
        "SELECT f.id FROM fleet_sessions f LEFT JOIN sessions s ON f.local = 1 AND s.session_id = f.id"
        " WHERE coalesce(s.task_id, f.task_id) = ?", (task_id,)))
    return out


def poll_controls(conn: sqlite3.Connection, host: str, after: int, at: float,
                  auth: str | None = None) -> list[dict[str, Any]]:
    fleetdb.host_seen(conn, host, after, at, auth)
    return fleetdb.controls_after(conn, host, after)


def _cancel_recorded(conn: sqlite3.Connection, ref: str, host: str | None, cancel: bool, reason: str | None,
                     own_host: str, at: float, caller: access.Caller) -> fleetdb.Result:
    """:func:`cancel_sessions`, and who did it (``fleet_actions``), in one transaction."""
    out = cancel_sessions(conn, ref, host, cancel, reason, own_host, at)
    if out.status == 200:
        for entry in out.body["sessions"]:
            caller.record(conn, at=at, action="cancel" if cancel else "uncancel", target=ref, status=out.status,
                          card=entry["id"], host=entry["host"], note=reason)
    return out


def _task_recorded(conn: sqlite3.Connection, task_id: str, cancel: bool, reason: str | None, at: float,
                   caller: access.Caller) -> fleetdb.Result:
    """:func:`cancel_task`, and who did it, in one transaction."""
    out = cancel_task(conn, task_id, cancel, reason, at)
    if out.status == 200:
        caller.record(conn, at=at, action="cancel task" if cancel else "uncancel task", target=task_id,
                      status=out.status, note=reason)
    return out


def _reply_recorded(conn: sqlite3.Connection, ref: str, host: str | None, text: str, own_host: str, at: float,
                    caller: access.Caller) -> fleetdb.Result:
    """:func:`plan_reply`, and who sent the reply, in one transaction."""
    out = plan_reply(conn, ref, host, text, own_host, at)
    if out.status in (200, 202):
        card = out.replies[0][1].session_id if out.replies else None
        if card is None:
            found = resolve(conn, ref, host)
            card = found[0]["id"] if found else None
        caller.record(conn, at=at, action="reply", target=ref, status=out.status, card=card,
                      host=out.body.get("host"), note=text)
    return out


async def _only_own(hub: Hub, caller: access.Caller, ref: str, host: str | None) -> None:
    """A paired host acts only on its own sessions: 403 when ``ref`` names another host's (or the
    command center's own). The owner and devices act on any."""
    if caller.kind != access.HOST:
        return

    def hosts(conn: sqlite3.Connection) -> list[str]:
        cards = resolve(conn, ref, host)
        if not cards and conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (ref,)).fetchone():
            return [fleetdb.THIS_HOST]
        return [c["host"] for c in cards]

    for named in await hub.submit(hosts):
        caller.may_act_on(named)


async def _action(request: Request, allow: frozenset[access.CallerKind]
                  ) -> Response | tuple[access.Caller, bool, str | None]:
    """What both control routes check first: the caller, the action, and its reason
    (required to cancel). An answer to send back, or (caller, cancel?, reason)."""
    state = state_of(request)
    caller = await access.check(state, request, allow)
    if request.path_params["action"] not in ("cancel", "uncancel"):
        return JSONResponse({"error": "not found"}, status_code=404)
    cancel = request.path_params["action"] == "cancel"
    try:
        raw = await read(request.scope, request.receive)
        return caller, cancel, contract.parse_reason(raw, cancel)
    except contract.BodyError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)


async def session_action(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    parsed = await _action(request, access.ANYONE)
    if isinstance(parsed, Response):
        return parsed
    caller, cancel, reason = parsed
    host = request.query_params.get("host")
    if caller.kind == access.HOST:
        host = caller.speaks_for(host)  # ?host= naming another host: 403
        await _only_own(hub, caller, request.path_params["ref"], host)
    if host is not None:
        host = fleetdb.THIS_HOST if host == hub.own_host else host
    # An OpenClaw session: its run is aborted through the gateway, or the cancel refused (openclaw/service.py).
    for channel in state.channels:
        aborted = await channel.cancel(request.path_params["ref"], cancel, reason, caller)
        if aborted is not None:
            return aborted
    out = await hub.write(_cancel_recorded, request.path_params["ref"], host, cancel, reason, hub.own_host,
                          time.time(), caller)
    for entry in out.body.get("sessions") or ():
        if "seq" in entry:
            hub.wake_controls(entry["host"])  # that host's long poll only
    return JSONResponse(out.body, status_code=out.status)


async def reply_action(request: Request) -> Response:
    """POST /api/sessions/<ref>/reply {"text"}: typed into the session's tmux pane by its own host."""
    state = state_of(request)
    hub = hub_of(state)
    caller = await access.check(state, request)
    try:
        doc = contract.parse_json(await read(request.scope, request.receive))
        text = reply.clean_text(doc.get("text"), int(state.config["fleet"]["reply_max_chars"]))
    except contract.BodyError as exc:  # too large (413), not a JSON object (400)
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    except reply.ReplyError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    host = request.query_params.get("host")
    if caller.kind == access.HOST:
        host = caller.speaks_for(host)
        await _only_own(hub, caller, request.path_params["ref"], host)
    if host is not None:
        host = fleetdb.THIS_HOST if host == hub.own_host else host
    out = await hub.write(_reply_recorded, request.path_params["ref"], host, text, hub.own_host, time.time(), caller)
    body = dict(out.body)
    if out.replies:
        _, t = out.replies[0]
        problem = await state.run_blocking(reply.send, t, text)
        if problem:
            return JSONResponse({"error": problem, "host": body["host"]}, status_code=409)
        body["session"] = t.session_id
        return JSONResponse(body)
    if out.status != 202:
        return JSONResponse(body, status_code=out.status)
    # Sent down the host's long poll: wait a little for its word (typed, or why not).
    result = await host_word(hub, body["seq"], REPLY_WAIT_S, body["host"])
    if result is None:
        body["applied"] = "sent, not confirmed yet"
        return JSONResponse(body, status_code=202)
    problem = result.get("error")
    if problem:
        return JSONResponse({"error": problem, "host": body["host"]}, status_code=409)
    body["applied"] = "typed"
    return JSONResponse(body)


async def reply_results(request: Request) -> Response:
    """POST /api/fleet/replies {"results": [{"seq", "error"}]}: a host says what became of replies.
    A paired host speaks only of the controls sent to it (another host's: 403)."""
    state = state_of(request)
    hub = hub_of(state)
    caller = await access.check(state, request, access.HOSTS)
    sender = caller.speaks_for(access.named_host(request))
    try:
        results = contract.parse_json(await read(request.scope, request.receive))["results"]
        seqs = []
        for i, r in enumerate(results):  # every number checked before any waiter hears a word
            seq = numbers.check(r["seq"], "seq", f"results[{i}].seq")
            if seq is None:
                raise contract.BodyError(f"results[{i}].seq is required")
            if isinstance(r.get("approval"), dict):
                numbers.check_fields(r["approval"], numbers.REQUEST_FIELDS, f"results[{i}].approval")
            seqs.append(int(seq))
        if caller.kind == access.HOST:
            for seq, host in await hub.submit(_control_hosts, seqs):
                if host not in (caller.name, "*"):
                    raise access.Refused(403, f"control {seq} was sent to another host than {caller.name!r}:"
                                              " a host speaks only of its own")
        if sender is not None:
            # A launch's outcome is kept on its card whether or not anyone still waits for it.
            from agent_hooks.center import launcher

            said = [(seq, r.get("error") if isinstance(r.get("error"), str) else None)
                    for r, seq in zip(results, seqs, strict=True)]
            await hub.write(launcher.settle_results, sender, said, time.time())
        for r, seq in zip(results, seqs, strict=True):
            # Only the host the control went to says what became of it: another host's word would
            # tell the person a reply was typed, or settle our copy of a request with its own row.
            if not hub.settle_reply(seq, sender, dict(r)) and hub.postgres and sender is not None:
                # The request that waits for it may be held by another center: told through PostgreSQL.
                await hub.write(_tell_centers, seq, sender, dict(r), time.time())
    except contract.BodyError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return JSONResponse({"error": f'expected {{"results": [{{"seq", "error"}}]}}: {exc}'}, status_code=400)
    return JSONResponse({"ok": True})


def _tell_centers(conn: Any, seq: int, host: str, result: dict[str, Any], now: float) -> None:
    """Every center hears a host's word on control ``seq`` (the one holding its waiter answers with it). A
    word too large for a notification (NOTIFY's payload is under 8000 bytes) is kept in ``fleet_replies``, and
    the notification carries its id: the center that waits for it reads it there (Hub._remote_reply)."""
    text = json.dumps({"seq": seq, "host": host, "result": result}, default=str)
    if len(text.encode()) > REPLY_NOTIFY_BYTES:
        conn.execute("DELETE FROM fleet_replies WHERE at < ?", (now - REPLY_KEPT_S,))
        ref = conn.execute("INSERT INTO fleet_replies (seq, host, doc, at) VALUES (?, ?, ?, ?) RETURNING id",
                           (seq, host, text, now)).fetchone()[0]
        text = json.dumps({"seq": seq, "host": host, "ref": int(ref)})
    fleetstore.notify(conn, "reply", text)


def _control_hosts(conn: sqlite3.Connection, seqs: list[int]) -> list[tuple[int, str]]:
    """(seq, host) of each control named (unknown ones left out)."""
    out = []
    for seq in seqs[:1000]:
        row = conn.execute("SELECT host FROM fleet_controls WHERE seq = ?", (seq,)).fetchone()
        if row is not None:
            out.append((seq, str(row[0])))
    return out


async def task_action(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    # A task spans hosts: a person's act (a paired host acts only on its own sessions).
    parsed = await _action(request, access.PEOPLE)
    if isinstance(parsed, Response):
        return parsed
    caller, cancel, reason = parsed
    out = await hub.write(_task_recorded, request.path_params["task_id"], cancel, reason, time.time(), caller)
    if out.status == 200:
        hub.wake_controls()
    return JSONResponse(out.body, status_code=out.status)


async def controls(state: ServerState, scope: fastpath.Scope, receive: fastpath.Receive,
                   send: fastpath.Send) -> None:
    """GET /api/fleet/controls: a host's long poll. Raw ASGI (agent_hooks.server.fastpath): every host
    holds one open and asks again after each answer."""
    hub = hub_of(state)
    request = HTTPConnection(scope)
    try:
        caller = await access.check(state, request, access.HOSTS)
        q = request.query_params
        if caller.kind == access.HOST:
            caller.speaks_for(access.named_host(request))  # a header naming another host: 403
        named = caller.speaks_for(q.get("host"))  # a paired host polls for itself: ?host=another is 403
    except access.Refused as refused:
        await refused.response()(scope, receive, send)
        return
    host = fleet.clean_host(named) if caller.kind != access.HOST else named
    auth = "credential" if caller.kind == access.HOST else ("uid" if caller.loopback_uid else "fleet token")
    if host is None:
        await fastpath.send_json(send, 400, {"error": "host=NAME is required (this host's name on the board)"})
        return
    try:
        after = int(numbers.parse(q.get("after"), "seq", "after") or 0)
        wait_s = float(q.get("wait") or 0)
    except contract.BodyError as exc:
        await fastpath.send_json(send, exc.status, {"error": str(exc)})
        return
    except ValueError:
        await fastpath.send_json(send, 400, {"error": f"wait must be a number of seconds, got {q.get('wait', '')[:60]!r}"})
        return
    if not math.isfinite(wait_s):
        await fastpath.send_json(send, 400, {"error": "wait must be a finite number of seconds, got"
                                                      f" {q.get('wait', '')[:60]!r}"})
        return
    wait = min(MAX_WAIT_S, max(0.0, wait_s))  # at most MAX_WAIT_S, as documented
    # The fleet's budgets (center/ledger.py): the version the host holds; absent, a host that takes none.
    held = q.get("budgets")
    if q.get("epoch") != hub.epoch:
        after = 0  # another command center (or a new store): everything it has is new
    # A host's subscription holds a place among the hosts this center keeps (agent_hooks.center.limits).
    refused_why = await hub.submit(limits.refuse_host, host, limits.Limits.of(state.config), time.time())
    if refused_why is not None:
        hub.note_refused(host, refused_why)
        state.stats.count("fleet_refused")
        await fastpath.send_json(send, 429, {"error": refused_why}, [(b"retry-after", b"60")])
        return
    deadline = time.monotonic() + wait
    # Set by a control for this host (or every host), by a stop of the server (ServerState.stop_listeners),
    # and by the caller going away: one wake-up, no polling loop.
    woken = hub.wait_controls(host)
    gone = False

    async def watch() -> None:
        nonlocal gone
        while (await receive())["type"] != "http.disconnect":
            pass  # the request's (empty) body
        gone = True
        woken.set()

    watcher: asyncio.Task[None] | None = None
    try:
        while True:
            woken.clear()
            found = await hub.write(poll_controls, host, after, time.time(), auth)
            remaining = deadline - time.monotonic()
            budgets = hub.budget_doc(host) if held is not None else None
            if found or remaining <= 0 or state.stopping() or (budgets is not None and budgets["version"] != held):
                body: dict[str, Any] = {"center": hub.own_host, "epoch": hub.epoch, "controls": found}
                if budgets is not None:
                    body["budgets"] = budgets
                await fastpath.send_json(send, 200, body)
                return
            if watcher is None:
                watcher = asyncio.ensure_future(watch())
            try:
                await asyncio.wait_for(woken.wait(), remaining)
            except TimeoutError:
                pass
            if gone:
                return  # nobody to answer
            if state.stopping():  # answered now, with nothing: the host asks the next server
                await fastpath.send_json(send, 200, {"center": hub.own_host, "epoch": hub.epoch, "controls": []})
                return
    finally:
        hub.unwait_controls(host, woken)
        if watcher is not None:
            watcher.cancel()


async def fleet_status(request: Request) -> Response:
    state = state_of(request)
    hub = hub_of(state)
    await access.check(state, request)
    sub, rep = state.subscriber, state.reporter
    caps = limits.Limits.of(state.config)
    on_token = await hub.submit(credentials.shared_token_hosts, time.time())
    return JSONResponse({"host": hub.own_host, "epoch": hub.epoch, "hosts_on_shared_token": on_token,
                         "subscription": sub.status() if sub is not None else None,
                         "centers": state.centers_status(),
                         "report": rep.status() if rep is not None else None,
                         # What the center's limits kept out of each host (doctor shows it).
                         "limits": {"max_hosts": caps.hosts, "max_cards_per_host": caps.cards_per_host,
                                    "max_requests_per_host": caps.requests_per_host, "max_rows": caps.rows,
                                    "left_out": {h: dict(c) for h, c in hub.left_out.items()
                                                 if c["approvals"] or c["cards"] or c["refused"]}},
                         **state.channel_status()})


def routes(state: ServerState) -> list[BaseRoute]:
    return [
        Route("/api/sessions/{ref}/reply", reply_action, methods=["POST"]),
        Route("/api/sessions/{ref}/{action:str}", session_action, methods=["POST"]),
        Route("/api/tasks/{task_id}/{action:str}", task_action, methods=["POST"]),
        state.fast_route("/api/fleet/controls", functools.partial(controls, state), "GET"),
        Route("/api/fleet/replies", reply_results, methods=["POST"]),
        Route("/api/fleet/status", fleet_status, methods=["GET"]),
    ]

async def host_word(hub: Hub, seq: int, wait_s: float, host: str) -> dict[str, Any] | None:
    """:meth:`Hub.host_word`: what ``host`` said of control ``seq`` within ``wait_s`` (None: nothing)."""
    return await hub.host_word(seq, wait_s, host)


# -- the subscribing host's side -----------------------------------------------------


class Subscriber:
    """Keeps a long poll open to the command center, and writes what it sends into the store."""

    def __init__(self, state: ServerState, hub: Hub, upstream: failover.Upstream) -> None:
        self.state = state
        self.hub = hub
        self.upstream = upstream
        # One cursor for the host, whichever center it polls: kept per store (epoch), see cursor_doc.
        self.key = CURSOR_KEY
        self.task: asyncio.Task[None] | None = None
        self.connected = False
        self.last_ok_at: float | None = None
        self.last_error: str | None = None
        self.applied = 0
        # The fleet's budgets as last received (center/ledger.py), and whether the store says the
        # center is reachable (the budget guard tells the agent when it is not).
        self.budget_version = ""
        self.synced: bool | None = None
        self.synced_at = 0.0
        self._notes: set[asyncio.Future[Any]] = set()
        # Set when the host moves on to another center: the long poll at the old one is dropped.
        self.moved = asyncio.Event()
        upstream.listeners.append(self._moved)

    @property
    def base(self) -> str:
        """The command center polled now (the host's current one)."""
        return self.upstream.base

    def _moved(self, old: str, new: str) -> None:
        self.connected = False
        self.moved.set()

    def status(self) -> dict[str, Any]:
        return {"center": self.base, "connected": self.connected, "last_ok_at": self.last_ok_at,
                "last_error": self.last_error, "applied": self.applied}

    async def run(self) -> None:
        """Poll until cancelled; an unexpected error is logged and the loop starts over."""
        while True:
            try:
                await self._run()
            except asyncio.CancelledError:
                raise
            except StoreUnavailable as exc:  # said once by the server's store watch (recovery.py)
                self._failed(str(exc))
                await asyncio.sleep(float(self.state.config["fleet"]["subscribe_backoff_max_s"]))
            except Exception as exc:  # noqa: BLE001 - the subscription must outlive a bad answer
                log.exception("subscription to %s failed", self.base)
                self._failed(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(float(self.state.config["fleet"]["subscribe_backoff_max_s"]))

    async def _cursor(self) -> tuple[dict[str, Any], dict[str, int]]:
        """The stored cursor, and the last control applied per store; a host that kept one cursor per
        center (before several centers) starts from the current center's."""
        def read(conn: sqlite3.Connection) -> str | None:
            raw = fleetdb.meta_get(conn, self.key)
            for base in [self.base, *self.upstream.bases]:
                raw = raw or fleetdb.meta_get(conn, f"{self.key}:{base}")
            return raw

        doc = centers.stored_object(await self.hub.submit(read))
        raw_seen = doc.get("seen")
        seen = {str(k): int(v) for k, v in (raw_seen.items() if isinstance(raw_seen, dict) else ())
                if isinstance(v, int) and not isinstance(v, bool)}
        if doc.get("epoch") and isinstance(doc.get("seq"), int):
            seen.setdefault(str(doc["epoch"]), int(doc["seq"]))
        return {"epoch": doc.get("epoch"), "seq": doc.get("seq")}, seen

    async def _get(self, client: Any, base: str, params: dict[str, str]) -> Any:
        """The long poll at ``base``; None when the host moved on to another center meanwhile."""
        poll = asyncio.ensure_future(client.get(base + "/api/fleet/controls", params=params,
                                                headers=self.fleet_headers(base)))
        moved = asyncio.ensure_future(self.moved.wait())
        try:
            await asyncio.wait({poll, moved}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the server stops: the poll goes with it, its end unheard
            poll.cancel()
            poll.add_done_callback(lambda t: t.cancelled() or t.exception())
            raise
        finally:
            moved.cancel()
        if not poll.done():
            poll.cancel()
            try:
                await poll
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - dropped on purpose
                pass
            return None
        return poll.result()

    async def _run(self) -> None:
        import httpx  # here, not at import: only a server that has a command center to reach needs it (~25 ms)

        cfg = self.state.config["fleet"]
        wait = float(cfg["subscribe_wait_s"])
        cap = max(0.25, float(cfg["subscribe_backoff_max_s"]))
        headers = {"User-Agent": f"agent-hooks/{__version__}"}
        cursor, seen = await self._cursor()
        delay = 0.25
        async with httpx.AsyncClient(timeout=httpx.Timeout(wait + 10, connect=2.0), trust_env=False,
                                     headers=headers) as client:
            while True:
                base = self.base
                self.moved.clear()
                # After a (re)connect, one quick poll first: it proves the link and catches up at once.
                params = {"host": fleet.name_on(self.state.paths, self.state.config, base),
                          "after": str(cursor.get("seq") or 0),
                          "epoch": str(cursor.get("epoch") or ""), "wait": str(wait if self.connected else 0),
                          "budgets": self.budget_version}
                try:
                    response = await self._get(client, base, params)
                except httpx.HTTPError as exc:
                    self._failed(f"{type(exc).__name__}: {exc}")
                    if await self.upstream.failed(centers.SUBSCRIBE, base, f"{type(exc).__name__}: {exc}"):
                        delay = 0.25
                        continue  # the next center, at once
                    await asyncio.sleep(delay)
                    delay = min(cap, delay * 2)
                    continue
                if response is None:
                    continue  # the host moved on: poll the new center now
                if response.status_code != 200:
                    # 404: a command center without control (OptimalOS's own); 401: no or a wrong token.
                    self._failed(f"HTTP {response.status_code}: {response.text[:200]}")
                    if centers.failure(response.status_code):
                        if await self.upstream.failed(centers.SUBSCRIBE, base, f"HTTP {response.status_code}"):
                            continue
                    else:
                        self.upstream.answered(centers.SUBSCRIBE, base)  # a 4xx is an answer: never a move
                    # Not ours to reach (404, 405), or past the center's limits (429): not every few seconds.
                    await asyncio.sleep(60.0 if response.status_code in (404, 405, 429) else cap)
                    continue
                try:
                    doc = response.json()
                    controls = list(doc["controls"])
                    epoch = str(doc["epoch"])
                except (ValueError, KeyError, TypeError) as exc:
                    self._failed(f"bad answer: {exc}")
                    await asyncio.sleep(cap)
                    continue
                self.upstream.answered(centers.SUBSCRIBE, base)
                self.connected, self.last_ok_at, self.last_error, delay = True, time.time(), None, 0.25
                await self._budgets(doc)
                if epoch != cursor.get("epoch"):
                    # Another store (a center that started over, or another center): from what was applied
                    # from that store before, if anything; a control it sent already is not applied again.
                    known = int(seen.get(epoch) or 0)
                    cursor = {"epoch": epoch, "seq": known}
                    fresh = [c for c in controls if int(numbers.clean(c.get("seq"), "seq") or 0) > known]
                    if len(fresh) < len(controls):
                        log.info("%d control(s) from %s were applied before: skipped", len(controls) - len(fresh),
                                 base)
                        if not fresh:
                            last = max(known, *(int(c["seq"]) for c in controls))
                            cursor = {"epoch": epoch, "seq": last}
                            seen[epoch] = last
                            await self.hub.write(fleetdb.meta_set, self.key, cursor_doc(epoch, last, seen))
                    controls = fresh
                if controls:
                    out = await self.hub.write(apply_controls, controls, self.key, epoch, time.time(),
                                               str(doc.get("center") or base), seen)
                    results = list(out.body["results"])
                    if out.body["results"]:
                        self.state.holds.wake()  # held http hooks of this host look at their rows now
                    if out.replies:
                        cfg = self.state.config["fleet"]
                        results += await self.state.run_blocking(
                            send_replies, out.replies, float(cfg["reply_max_age_s"]),
                            int(cfg["reply_max_chars"]), time.time())
                    if out.launches:
                        results += await self.state.run_blocking(
                            launch.run_controls, out.launches, self.state.config, self.state.env,
                            self.state.paths.data_dir, params["host"],
                            float(self.state.config["launch"]["max_age_s"]), time.time())
                    if results:
                        try:  # the command center's caller waits for this word (a lost one: it says "sent")
                            await client.post(base + "/api/fleet/replies", json={"results": results},
                                              headers=self.fleet_headers(base))
                        except httpx.HTTPError as exc:
                            log.warning("could not tell %s what became of %d reply(ies) or answer(s): %s",
                                        base, len(results), exc)
                    last = max(int(c["seq"]) for c in controls)
                    cursor = {"epoch": epoch, "seq": last}
                    seen[epoch] = max(last, int(seen.get(epoch) or 0))
                    self.applied += len(controls)
                    log.info("applied %d control(s) from %s", len(controls), base)

    def fleet_headers(self, base: str | None = None) -> dict[str, str]:
        """This host's credential for the center (or the fleet token), read for each request: a host
        paired while its server runs uses its credential from the next poll on."""
        return fleet.client_headers(self.state.paths, self.state.config, self.state.env, url=base or self.base)

    async def _budgets(self, doc: dict[str, Any]) -> None:
        """Write the fleet's budgets when they changed, and that the center answered (now and then)."""
        from agent_hooks.center import ledger

        now = time.time()
        budgets = doc.get("budgets")
        center = str(doc.get("center") or self.base)
        if isinstance(budgets, dict) and str(budgets.get("version") or "") != self.budget_version:
            await self.hub.write(ledger.apply_budgets, budgets, center, now)
            self.budget_version = str(budgets.get("version") or "")
        elif self.synced is not True or now - self.synced_at >= SYNC_EVERY_S:
            await self.hub.write(ledger.note_sync, center, True, now)
        else:
            return
        self.synced, self.synced_at = True, now

    def _failed(self, message: str) -> None:
        if self.connected or self.last_error is None:
            log.warning("command center %s: %s", self.base, message)
        self.connected = False
        self.last_error = message
        if self.synced is not False:
            # Said in the store once: the budget guard applies the budgets last known, and says so.
            from agent_hooks.center import ledger

            self.synced = False
            self.budget_version = ""  # the next answer is written whatever it holds
            task = asyncio.ensure_future(self.hub.write(ledger.note_sync, self.base, False, time.time(), message))
            self._notes.add(task)
            task.add_done_callback(self._noted)

    def _noted(self, task: asyncio.Future[Any]) -> None:
        self._notes.discard(task)
        if not task.cancelled() and task.exception() is not None:  # a store that cannot be written: said there
            log.debug("could not note the lost command center: %s", task.exception())


def subscription_targets(state: ServerState) -> list[str] | None:
    """The command centers to subscribe to, in order (forward.url's list), or None (off, not ours to
    reach, or this very server: a server named in the list is itself a command center of the fleet)."""
    cfg = state.config
    fwd = cfg["forward"]
    if fleetstore.postgres_of(state):
        return None  # a command center on PostgreSQL serves the fleet: it subscribes to none
    if not cfg["fleet"].get("subscribe") or not fwd.get("enabled"):
        return None
    urls = centers.ingest_urls(fwd)
    if not urls or any(url_problem(u, bool(fwd.get("allow_remote"))) for u in urls):
        return None  # no command center named (the default), or one we may not reach
    import httpx

    for url in urls:
        base = fleet.center_base(url)
        if base is None:
            return None
        parts = httpx.URL(base)
        if access.is_loopback(parts.host) or parts.host == "localhost":
            if (parts.port or 80) == state.port:
                return None  # forward.url is this server: it is the command center
    return urls


def subscription_target(state: ServerState) -> str | None:
    """The command center the host talks to now (the current one of forward.url's list), or None."""
    if state.upstream is not None:
        return state.upstream.base
    urls = subscription_targets(state)
    return fleet.center_base(urls[0]) if urls else None


async def upstream_of(state: ServerState) -> failover.Upstream | None:
    """The host's :class:`~agent_hooks.center.failover.Upstream` (made once, by the first who asks), or
    None when the server talks to no command center."""
    if state.upstream is None:
        urls = subscription_targets(state)
        if urls is None:
            return None
        hub = hub_of(state)
        up = failover.Upstream(hub, state.config["forward"], urls)
        try:
            await up.load()
        except Exception as exc:  # noqa: BLE001 - a store not ready: the first center, until a commit says
            log.debug("could not read the current command center: %s", exc)
        state.upstream = up
        hub.change_listeners.append(up.store_changed)
    return state.upstream


async def startup(state: ServerState) -> None:
    # A server asked to stop: every long poll answers now (with no controls), not at its wait's end.
    state.stop_listeners.append(hub_of(state).wake_controls)
    up = await upstream_of(state)
    hub_of(state).set_center(up is None)  # a command center counts the fleet's budgets (center/ledger.py)
    if up is None:
        return
    sub = Subscriber(state, hub_of(state), up)
    state.subscriber = sub
    sub.task = asyncio.create_task(sub.run())


async def shutdown(state: ServerState) -> None:
    if state.upstream is not None:
        state.upstream.close()  # its failback clock
    sub = state.subscriber
    if sub is not None:
        await stop_background(sub.task)
