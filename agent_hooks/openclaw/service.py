"""OpenClaw agents on the board: the gateway subscription's place in the server (docs/openclaw.md).

With ``[openclaw] url`` unset this module starts nothing and imports nothing
more (the WebSocket client, agent_hooks.openclaw.gateway, is imported only
when a gateway is configured). With it set, the lifespan starts a
:class:`~agent_hooks.openclaw.gateway.Gateway` as a background task, and:

It registers :class:`OpenClaw` as a channel of the command center
(center/channels.py), which asks it first about every answer and cancel:

* ``POST /api/approvals/<id>`` for an OpenClaw request (:func:`answer`): the
  first answer wins here by the same conditional UPDATE as any request, then
  goes to the gateway (``exec.approval.resolve``). A gateway that refuses it
  (answered or expired there first) leaves the row withdrawn and the caller a 409;
  one that cannot be reached leaves the row pending and the caller a 503.
* ``POST /api/sessions/<ref>/cancel`` on an OpenClaw card (:func:`cancel`):
  the run is aborted through the gateway (``chat.abort``); refused, saying
  why, when there is no run, no abort method or no scope for it.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from starlette.responses import Response
from starlette.routing import BaseRoute

from agent_hooks.center import fleetdb
from agent_hooks.center.hub import Hub, hub_of
from agent_hooks.features import approvals
from agent_hooks.openclaw import settings
from agent_hooks.server.app import ServerState
from agent_hooks.server.jsonout import JSONResponse

if TYPE_CHECKING:
    from agent_hooks.openclaw.gateway import Gateway  # imported only when a gateway is configured
    from agent_hooks.server.access import Caller

AGENT_TYPE = "openclaw"
ID_PREFIX = "oc-"  # approval rows and cards made from the gateway (agent_hooks.openclaw.frames)


class OpenClaw:
    """The gateway's channel on the command center (center/channels.py): its answers, cancels and status."""

    name = AGENT_TYPE

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.gateway: Gateway | None = None  # set at start-up when [openclaw] url is set

    def status(self) -> dict[str, Any] | None:
        """The connection's state for /status, /api/fleet/status and the board (None when not configured)."""
        return self.gateway.status() if self.gateway is not None else None

    async def answer(self, ref: str, body: dict[str, Any], by: str, where: str, caller: Caller) -> Response | None:
        if self.gateway is None or not ref.startswith(ID_PREFIX[:2]):
            return None  # our other requests' ids are hex: never "oc"
        return await answer(self.gateway, hub_of(self.state), ref, body, by, where, caller)

    async def cancel(self, ref: str, cancelling: bool, reason: str | None, caller: Caller) -> Response | None:
        if self.gateway is None:
            return None
        return await cancel(self.gateway, hub_of(self.state), ref, cancelling, reason, caller)


def channel(state: ServerState) -> OpenClaw:
    """This server's OpenClaw channel (registered when the app is built)."""
    return next(c for c in state.channels if isinstance(c, OpenClaw))


def routes(state: ServerState) -> list[BaseRoute]:
    state.channels.append(OpenClaw(state))
    return []


async def startup(state: ServerState) -> None:
    if not settings.configured(state.config):
        return
    import asyncio

    from agent_hooks.openclaw.gateway import Gateway

    gw = Gateway(state, hub_of(state))
    channel(state).gateway = gw
    gw.task = asyncio.create_task(gw.run())


async def shutdown(state: ServerState) -> None:
    gw = channel(state).gateway
    if gw is not None:
        await gw.stop()


# -- answers ---------------------------------------------------------------------------------------

def _ours(row: dict[str, Any], host: str) -> bool:
    return bool(row["id"].startswith(ID_PREFIX) and row["host"] == host)


def _claim(conn: Any, ref: str, host: str, body: dict[str, Any], by: str, where: str) -> fleetdb.Result | None:
    """The first answer wins here: the row's conditional UPDATE (None: not an OpenClaw request)."""
    row = approvals.find(conn, ref)
    if row is None or not _ours(row, host):
        return None
    decision = str(body.get("decision") or "")
    try:
        offered = json.loads(row["tool_input"] or "{}").get("decisions")
    except (ValueError, AttributeError):
        offered = None
    if row["state"] == approvals.PENDING and isinstance(offered, list) and decision in approvals.DECISIONS \
            and decision not in offered:
        return fleetdb.Result(400, {"error": f"the OpenClaw gateway does not offer {decision} for this request"
                                              f" (it offers {', '.join(offered)})"})
    via = "board" if body.get("via") == "board" else "api"
    return fleetdb.answer_outcome(approvals.answer(conn, row["id"], decision, message=body.get("message"), by=by,
                                                   via=via, where=where))


def _undo(conn: Any, approval_id: str, answered_at: float, state: str, note: str) -> fleetdb.Result:
    """After the gateway's word: back to pending (it was not reached) or withdrawn (it refused)."""
    if state == approvals.PENDING:
        conn.execute("UPDATE approvals SET state = 'pending', decision = NULL, message = NULL, answered_by = NULL,"
                     " answered_via = NULL, answered_where = NULL, answered_at = NULL, waited_ms = NULL"
                     " WHERE id = ? AND answered_at = ?", (approval_id, answered_at))
    else:
        conn.execute("UPDATE approvals SET state = ?, note = ? WHERE id = ? AND answered_at = ?",
                     (state, note[:500], approval_id, answered_at))
    return fleetdb.Result(200, {"approvals_changed": True})


def _answered(conn: Any, approval_id: str, host: str, at: float, caller: Caller, note: str | None) -> fleetdb.Result:
    """The gateway took our answer: the session resumes, and who answered is recorded (``fleet_actions``), as an
    answer to one of the center's own requests is (center/approvals.py)."""
    from agent_hooks.openclaw import frames, records

    out = fleetdb.Result(200, {"approvals_changed": True})
    row = approvals.get(conn, approval_id, raw=True)
    if row is not None:
        records.resumed(conn, row["session_id"], host, at, out)
        caller.record(conn, at=at, action=f"answer: {row['decision']}", target=row["id"], status=200,
                      card=frames.card_id(host, row["session_id"]), host=host, note=note)
    return out


async def answer(gw: Gateway, hub: Hub, ref: str, body: dict[str, Any], by: str, where: str,
                 caller: Caller) -> JSONResponse | None:
    """``POST /api/approvals/<ref>`` for an OpenClaw exec approval (None: not one; the caller goes on)."""
    if gw.state_name != "connected":
        row = await hub.submit(lambda conn: approvals.find(conn, ref))
        if row is None or not _ours(row, gw.host):
            return None
        if row["state"] == approvals.PENDING:
            return JSONResponse({"error": f"the OpenClaw gateway is not connected ({gw.last_error or gw.state_name});"
                                          " the request stays pending"}, status_code=503,
                                headers={"Retry-After": "1"})
    out = await hub.write(_claim, ref, gw.host, body, by, where)
    if out is None:
        return None
    doc = dict(out.body)
    if "approval" in doc:
        doc["approval"] = approvals.public(doc["approval"], hub.own_host)
    if out.status != 200:
        if out.status == 409:
            doc["already"] = True
        return JSONResponse(doc, status_code=out.status)
    row = out.body["approval"]
    from agent_hooks.openclaw import frames, records

    try:
        await gw.call("exec.approval.resolve", {"id": row["tool_use_id"],
                                                "decision": frames.DECISIONS_OUT[row["decision"]]})
    except Exception as exc:  # noqa: BLE001 - GatewayError, or the connection going: the gateway's word decides
        text = str(exc)
        if getattr(exc, "reached", False) and getattr(exc, "code", None) == "INVALID_REQUEST":
            # The gateway no longer holds it ("approval already resolved", "unknown or expired approval id").
            await hub.write(_undo, row["id"], row["answered_at"], approvals.WITHDRAWN,
                            f"{records.REFUSED_NOTE}: {text}")
            theirs = gw.mapper.resolved.get(row["id"])
            if theirs is not None:  # its answer was heard while ours was on its way: it is the row's answer
                await hub.write(records.apply, [theirs], gw.host, time.time())
            return JSONResponse({"error": f"already answered at the OpenClaw gateway, or expired there: {text}",
                                 "already": True}, status_code=409)
        await hub.write(_undo, row["id"], row["answered_at"], approvals.PENDING, "")
        if getattr(exc, "reached", False):  # refused for another reason (a missing scope...): nothing was answered
            return JSONResponse({"error": f"the OpenClaw gateway refused the answer: {text}; the request stays"
                                          " pending"}, status_code=502)
        return JSONResponse({"error": f"{text}; the request stays pending"}, status_code=503,
                            headers={"Retry-After": "1"})
    from agent_hooks.center.approvals import display_note

    await hub.write(_answered, row["id"], gw.host, time.time(), caller, display_note(body))
    doc["applied"] = "answered at the OpenClaw gateway"
    return JSONResponse(doc, status_code=200)


# -- cancel -----------------------------------------------------------------------------------------

def _cards(conn: Any, ref: str, host: str) -> list[dict[str, Any]] | None:
    """The gateway's cards ``ref`` names: a card id, else a session key (None: no OpenClaw card of it)."""
    card = fleetdb.get(conn, ref)
    if card is not None:
        cards = [card]
    else:
        cur = conn.execute(f"SELECT {', '.join(fleetdb.SESSION_COLUMNS)} FROM fleet_sessions WHERE session_id = ?",
                           (ref,))
        cards = [dict(zip(fleetdb.SESSION_COLUMNS, r, strict=True)) for r in cur.fetchall()]
    ours = [c for c in cards if c["agent_type"] == AGENT_TYPE and c["id"].startswith(ID_PREFIX) and c["host"] == host]
    if not ours or len(ours) != len(cards):
        return None  # not (only) OpenClaw sessions of this gateway: the usual cancel
    for card in ours:
        row = conn.execute("SELECT details FROM fleet_sessions WHERE id = ?", (card["id"],)).fetchone()
        card["details"] = row[0] if row else None
    return ours


def _mark(conn: Any, card: dict[str, Any], ref: str, reason: str | None, at: float, caller: Caller) -> fleetdb.Result:
    """The run was aborted at the gateway: the card marked cancelled, and who cancelled it recorded."""
    card_id = card["id"]
    conn.execute("UPDATE fleet_sessions SET cancelled_at = ?, cancel_reason = ?, cancel_seq = NULL WHERE id = ?",
                 (at, reason, card_id))
    caller.record(conn, at=at, action="cancel", target=ref, status=200, card=card_id, host=card["host"], note=reason)
    out = fleetdb.Result(200, {})
    out.changed.add(card_id)
    return out


async def cancel(gw: Gateway, hub: Hub, ref: str, cancelling: bool, reason: str | None,
                 caller: Caller) -> JSONResponse | None:
    """A cancel of an OpenClaw session: its run aborted through the gateway, or refused saying why.
    None when ``ref`` names no session of the configured gateway (the usual cancel applies)."""
    cards = await hub.submit(_cards, ref, gw.host)
    if cards is None:
        return None
    if not cancelling:
        return JSONResponse({"error": "an OpenClaw run that was aborted cannot be resumed from here; there is"
                                      " nothing to uncancel (send the agent a new message to start a run)"},
                            status_code=409)
    if "operator.write" not in gw.scopes:
        return JSONResponse({"error": "cancel is off for OpenClaw sessions: set [openclaw] cancel = true (the server"
                                      " then asks the gateway for operator.write and operator.admin, which aborting"
                                      " a run it did not start needs) and restart the server"}, status_code=409)
    if not gw.offers("chat.abort"):
        return JSONResponse({"error": "this OpenClaw gateway offers no method to abort a run (no chat.abort);"
                                      " nothing was cancelled"}, status_code=409)
    out: dict[str, Any] = {"ok": True, "action": "cancel", "sessions": []}
    for card in cards:
        try:
            details = json.loads(card.get("details") or "{}")
        except ValueError:
            details = {}
        run_id = details.get("run_id") if isinstance(details, dict) else None
        if card["state"] not in ("running", "awaiting_review") or not run_id:
            return JSONResponse({"error": f"OpenClaw session {card['session_id']} has no run in progress"
                                          f" (it is {card['state']}); nothing to cancel"}, status_code=409)
        try:
            result = await gw.call("chat.abort", {"sessionKey": card["session_id"], "runId": run_id})
        except Exception as exc:  # noqa: BLE001 - GatewayError: the gateway's own words
            if not getattr(exc, "reached", False):  # not connected, or no answer: try again later
                return JSONResponse({"error": f"the OpenClaw gateway could not be asked to abort the run: {exc};"
                                              " nothing was cancelled"}, status_code=503, headers={"Retry-After": "1"})
            return JSONResponse({"error": f"the OpenClaw gateway did not abort the run: {exc}"}, status_code=502)
        if isinstance(result, dict) and result.get("aborted") is False:
            return JSONResponse({"error": "the OpenClaw gateway found no run to abort (it had ended)",
                                 "gateway": result}, status_code=409)
        await hub.write(_mark, card, ref, reason, time.time(), caller)
        out["sessions"].append({"id": card["id"], "host": card["host"], "applied": "aborted at the OpenClaw gateway",
                                "run_id": run_id})
    return JSONResponse(out)
