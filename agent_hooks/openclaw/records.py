"""OpenClaw actions (agent_hooks.openclaw.frames.Mapper) -> the store: board sessions and approval requests.

:func:`apply` runs on the command center's writer thread (agent_hooks.center.hub) inside its
transaction, through the same state machine as ingest (agent_hooks.center.contract via fleetdb.apply).
One card per (gateway host, sessionKey), with a fixed id (oc_map.card_id), and idempotency keys that name
what happened (``runId:start``, ``runId:end``, ``runId:tool:<toolCallId>:start``): a reconnect that hears a
run again adds no card and no event.
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

from agent_hooks.center import contract, credentials, fleetdb
from agent_hooks.features import approvals
from agent_hooks.openclaw.frames import AGENT_TYPE, DECISIONS_IN, card_id
from agent_hooks.output import one_line

# A gateway's sessions (cards) and pending requests kept at most: past these, new ones are refused (counted),
# so a gateway inventing session keys or requests cannot grow the store without bound.
MAX_CARDS = 2000
MAX_PENDING = 500
# The note on a row whose answer from here the gateway refused (it was answered there first): the gateway's
# own word on it (exec.approval.resolved), heard before or after, still becomes the row's answer.
REFUSED_NOTE = "the OpenClaw gateway refused the answer"


def _details(conn: sqlite3.Connection, cid: str) -> dict[str, Any]:
    row = conn.execute("SELECT details FROM fleet_sessions WHERE id = ?", (cid,)).fetchone()
    try:
        value = json.loads(row[0]) if row and row[0] else {}
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}


def _card(conn: sqlite3.Connection, out: fleetdb.Result, host: str, key: str, at: float) -> dict[str, Any] | None:
    cid = card_id(host, key)
    card = fleetdb.get(conn, cid)
    if card is None:
        if conn.execute("SELECT count(*) FROM fleet_sessions WHERE host = ? AND agent_type = ?",
                        (host, AGENT_TYPE)).fetchone()[0] >= MAX_CARDS:
            return None
        card = fleetdb.create(conn, host=host, at=at, session_id=key, agent_type=AGENT_TYPE, card_id=cid, label=key)
        out.transitions.append({"id": cid, "event": "register", "from": None, "to": card["state"], "ignored": False,
                                "source": "openclaw", "at": at})
    return card


def _seen(conn: sqlite3.Connection, key: str | None) -> bool:
    return key is not None and conn.execute("SELECT 1 FROM fleet_events WHERE idem_key = ?", (key,)).fetchone() \
        is not None


def _event(conn: sqlite3.Connection, out: fleetdb.Result, card: dict[str, Any], event: str, metadata: str | None,
           at: float, key: str | None = None) -> None:
    out.transitions.append(fleetdb.apply(conn, card, event, metadata, "openclaw", at, key))


def apply(conn: sqlite3.Connection, actions: list[dict[str, Any]], host: str, at: float) -> fleetdb.Result:
    """Apply a batch of actions (from :class:`Mapper`) for the gateway on ``host``; what changed."""
    out = fleetdb.Result(200, {"ok": True, "applied": 0})
    for act in actions:
        if act["kind"] == "resolved":
            if _resolved(conn, act, host, at, out):
                out.body["approvals_changed"] = True
            continue
        if act["kind"] == "sync":
            if _sync(conn, set(act["ids"]), host, at, out):
                out.body["approvals_changed"] = True
            continue
        if act["kind"] == "boot":
            _rebooted(conn, act["boot"], host, at, out)
            continue
        idem = f"oc:{host}:{act['idem']}" if act.get("idem") else None
        if _seen(conn, idem):
            continue  # heard again after a reconnect: applied once already
        card = _card(conn, out, host, act["session_key"], at)
        if card is None:
            out.body["refused"] = out.body.get("refused", 0) + 1
            continue
        details = _details(conn, card["id"])
        before = json.dumps(details, sort_keys=True)
        if act.get("agent"):
            details["agent"] = act["agent"]
        kind = act["kind"]
        if kind in ("tool", "waiting", "run_end"):
            # A run heard in the middle (it started before we connected): its card is started first.
            _under_way(conn, out, card, details, act.get("run_id"), at)
        if kind == "run_start":
            if card["state"] in (contract.COMPLETED, contract.FAILED):
                _event(conn, out, card, "requeue", "new run", at)  # the session's next run: back in play
            event = "start" if card["state"] == contract.IDLE else "running"
            _event(conn, out, card, event, f"run {act['run_id'] or ''}".strip(), at, idem)
            details.update(run_id=act["run_id"], last_run=act["run_id"], current_tool=None, current_command=None,
                           tool_running=False, waiting_on=None, waiting_detail=None, waiting_since=None)
        elif kind == "tool":
            meta = f"{act['tool']}: {act['view']}" if act["view"] else act["tool"]
            _event(conn, out, card, "tool_use", meta, at, idem)
            details.update(current_tool=act["tool"], current_command=act["view"] or None, tool_running=True,
                           tool_calls=int(details.get("tool_calls") or 0) + 1)
            if act.get("run_id"):
                details["run_id"] = act["run_id"]
        elif kind == "tool_end":
            details["tool_running"] = False
        elif kind == "waiting":  # the run waits on an exec approval (whoever may answer it)
            if card["state"] == contract.RUNNING:
                _event(conn, out, card, "awaiting_review", f"needs input: {act['detail']}", at)
            details.update(waiting_on="needs_input", waiting_detail=details.get("waiting_detail") or act["detail"],
                           waiting_since=details.get("waiting_since") or at)
        elif kind == "resumed":
            resumed(conn, act["session_key"], host, at, out, force=True)
            details = _details(conn, card["id"])
        elif kind == "run_end":
            _event(conn, out, card, "failed" if act["failed"] else "completed", act.get("why"), at, idem)
            details.update(run_id=None, tool_running=False, waiting_on="error" if act["failed"] else None,
                           waiting_detail=act.get("why") if act["failed"] else None,
                           waiting_since=at if act["failed"] else None)
        elif kind == "approval":
            if _requested(conn, act, host, at):
                out.body["approvals_changed"] = True
                if card["state"] == contract.RUNNING:
                    _event(conn, out, card, "awaiting_review", f"needs input: exec {one_line(act['command'], 80)}", at)
                details.update(waiting_on="needs_input", waiting_detail=one_line(f"exec: {act['command']}", 200),
                               waiting_since=at)
        if details.get("run_id") and act.get("boot"):
            details["boot"] = act["boot"]  # the gateway's boot this run lives in (_rebooted)
        details["last_activity"] = at
        details.setdefault("label", act["session_key"])
        if json.dumps(details, sort_keys=True) != before:
            conn.execute("UPDATE fleet_sessions SET details = ?, updated_at = ? WHERE id = ?",
                         (json.dumps(details), at, card["id"]))
        out.changed.add(card["id"])
        out.body["applied"] += 1
    return out


def _rebooted(conn: sqlite3.Connection, boot: str, host: str, at: float, out: fleetdb.Result) -> None:
    """The gateway's boot after a (re)connect: a run still open on a card from another boot died with the
    gateway's restart, and will never send its end. Its card fails saying so, rather than run forever."""
    rows = conn.execute("SELECT id, details FROM fleet_sessions WHERE host = ? AND agent_type = ? AND state IN (?, ?)",
                        (host, AGENT_TYPE, contract.RUNNING, contract.AWAITING_REVIEW)).fetchall()
    for cid, raw in rows:
        try:
            details = json.loads(raw) if raw else {}
        except ValueError:
            continue
        if not isinstance(details, dict) or not details.get("run_id") or details.get("boot") in (None, boot):
            continue  # no run, or one of this boot (heard again after a reconnect), or of unknown boot
        card = fleetdb.get(conn, cid)
        if card is None:
            continue
        why = "the OpenClaw gateway restarted; the run ended with it"
        _event(conn, out, card, "failed", why, at)
        details.update(run_id=None, tool_running=False, waiting_on="error", waiting_detail=why, waiting_since=at,
                       last_activity=at)
        conn.execute("UPDATE fleet_sessions SET details = ?, updated_at = ? WHERE id = ?",
                     (json.dumps(details), at, cid))
        out.changed.add(cid)


def _under_way(conn: sqlite3.Connection, out: fleetdb.Result, card: dict[str, Any], details: dict[str, Any],
               run_id: str | None, at: float) -> None:
    """Start the card for a run whose start it never heard (the server connected in the middle of it): a
    tool call or an end must not be lost on a card that is idle, or still finished from an earlier run."""
    if not run_id or details.get("last_run") == run_id:
        return
    if card["state"] in (contract.COMPLETED, contract.FAILED):
        _event(conn, out, card, "requeue", "new run", at)
    if card["state"] == contract.IDLE:
        _event(conn, out, card, "start", f"run {run_id} (under way when heard)", at)
    details.update(run_id=run_id, last_run=run_id)


def _requested(conn: sqlite3.Connection, act: dict[str, Any], host: str, at: float) -> bool:
    """A pending row for the gateway's request (once: the same request heard again changes nothing)."""
    if approvals.get(conn, act["id"], raw=True) is not None:
        return False
    if conn.execute("SELECT count(*) FROM approvals WHERE host = ? AND state = 'pending' AND id LIKE 'oc-%'",
                    (host,)).fetchone()[0] >= MAX_PENDING:
        return False  # a gateway flooding requests: the oldest ones stay, answerable
    # The gateway's window (expiresAtMs - createdAtMs), counted from when we heard the request: its clock is
    # another host's (or a recording's), and a skew must not list a live request as expired, or a dead one
    # as open for long. The gateway's own word on the end (resolved, or gone from its list) settles it anyway.
    window = 120.0
    if act["created_at"] is not None and act["expires_at"] is not None \
            and math.isfinite(act["expires_at"] - act["created_at"]):  # JSON may say NaN or Infinity
        window = min(max(act["expires_at"] - act["created_at"], 0.0), 24 * 3600.0)
    created, expires = at, at + window
    # "Always allow" is offered (the board's button, the CLI's --always) when the gateway offers allow-always.
    offered = act.get("allowed") or []
    always = [{"type": "openclaw", "decision": "allow-always"}] if "allow_always" in offered else None
    conn.execute(
        "INSERT INTO approvals (id, host, session_id, kind, tool_name, tool_input, tool_use_id, permission_suggestions,"
        " state, created_at, expires_at) VALUES (?, ?, ?, ?, 'exec', ?, ?, ?, 'pending', ?, ?)",
        (act["id"], host, act["session_key"], approvals.PERMISSION,
         json.dumps({"command": act["command"], "cwd": act["cwd"], "decisions": act.get("allowed")},
                    ensure_ascii=False), act["gateway_id"], json.dumps(always) if always else None,
         created, expires))
    return True


def _resolved(conn: sqlite3.Connection, act: dict[str, Any], host: str, at: float, out: fleetdb.Result) -> bool:
    """The gateway says a request was answered (by us, another operator or its own CLI): our row follows."""
    row = approvals.get(conn, act["id"], raw=True)
    raced = row is not None and row["state"] == approvals.WITHDRAWN and (row["note"] or "").startswith(REFUSED_NOTE)
    if row is None or row["host"] != host or (row["state"] != approvals.PENDING and not raced):
        return False
    decision, state = DECISIONS_IN[act["decision"]]
    changed = conn.execute(
        "UPDATE approvals SET state = ?, decision = ?, answered_by = ?, answered_via = 'remote', answered_where = ?,"
        " answered_at = ?, waited_ms = CAST((? - created_at) * 1000 AS INTEGER), note = ? WHERE id = ?"
        " AND state = ?",
        (state, decision, (act.get("by") or "the OpenClaw gateway")[:200], host, at, at,
         "answered at the OpenClaw gateway", row["id"], row["state"])).rowcount > 0
    if changed:
        resumed(conn, row["session_id"], host, at, out)
        # Who acted, as an answer from the board or the CLI is recorded: the one the gateway names.
        credentials.record_action(conn, at=at, action=f"answer: {decision}", target=row["id"], status=200,
                                  card=card_id(host, row["session_id"]), host=host, by_kind=AGENT_TYPE,
                                  by_name=act.get("by") or "the OpenClaw gateway", by_address=host,
                                  note="answered at the OpenClaw gateway")
    return changed


def _sync(conn: sqlite3.Connection, still: set[str], host: str, at: float, out: fleetdb.Result) -> bool:
    """Our pending copies the gateway no longer lists: answered or expired while we were away."""
    gone = [(aid, sid) for aid, sid in conn.execute(
        "SELECT id, session_id FROM approvals WHERE host = ? AND state = 'pending' AND id LIKE 'oc-%'", (host,))
        if aid not in still]
    for aid, sid in gone:
        approvals.settle(conn, aid, approvals.WITHDRAWN, "no longer pending at the OpenClaw gateway (answered or"
                         " expired there while this server was not connected)", "remote", at)
        resumed(conn, sid, host, at, out)
    return bool(gone)


def resumed(conn: sqlite3.Connection, session_key: str, host: str, at: float, out: fleetdb.Result,
            force: bool = False) -> None:
    """An approval of this session was answered: its card works again (unless another one is pending;
    ``force``: the run itself said it goes on)."""
    card = fleetdb.get(conn, card_id(host, session_key))
    if card is None:
        return
    if not force and conn.execute("SELECT 1 FROM approvals WHERE host = ? AND session_id = ? AND state = 'pending'",
                                  (host, session_key)).fetchone():
        return
    if card["state"] == contract.AWAITING_REVIEW:
        _event(conn, out, card, "running", "approval answered", at)
    details = _details(conn, card["id"])
    if details.get("waiting_on") == "needs_input":
        details.update(waiting_on=None, waiting_detail=None, waiting_since=None, last_activity=at)
        conn.execute("UPDATE fleet_sessions SET details = ?, updated_at = ? WHERE id = ?",
                     (json.dumps(details), at, card["id"]))
    out.changed.add(card["id"])
