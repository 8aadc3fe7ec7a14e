"""OpenClaw gateway frames -> board sessions and approval requests (pure parsing, then store writes).

:class:`Mapper` turns one decoded gateway event into actions (no I/O):

    agent        stream "lifecycle" phase start         -> run_start  (card -> running)
    session.tool stream "tool" phase start (with args)  -> tool       (contract event tool_use, "TOOL: input")
    session.tool stream "tool" phase result             -> tool_end
    agent        stream "item" kind "tool" phase start  -> tool       (no args: its title; only while the
                                                                       connection is not subscribed to sessions)
    agent        stream "lifecycle" phase end / error   -> run_end    (completed; aborted or error -> failed)
    agent        stream "lifecycle" waiting-approval    -> waiting    (awaiting review, needs input)
    agent        stream "lifecycle" approval-resolved   -> resumed    (running)
    exec.approval.requested                             -> approval   (a pending row in ``approvals``)
    exec.approval.resolved                              -> resolved   (that row answered at the gateway)

Everything else (assistant text deltas, usage, chat, task, session.message) is read and dropped. A tool call's
idempotency key is its toolCallId, so one heard both ways is listed once.
:func:`apply` runs on the command center's writer thread (agent_hooks.server.live)
inside its transaction, through the same state machine as ingest
(agent_hooks.server.contract via fleetdb.apply). One card per (gateway host,
sessionKey), with a fixed id, and idempotency keys that name what happened
(``runId:start``, ``runId:end``, ``runId:tool:<toolCallId>:start``): a reconnect
that hears a run again adds no card and no event.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sqlite3
from collections import OrderedDict
from typing import Any

from agent_hooks.features import approvals
from agent_hooks.output import one_line
from agent_hooks.server import contract, fleetdb

AGENT_TYPE = "openclaw"
VIEW_CHARS = 200
MAX_KEY_CHARS = 200
RUNS_KEPT = 1000
# A gateway's sessions (cards) and pending requests kept at most: past these, new ones are refused (counted),
# so a gateway inventing session keys or requests cannot grow the store without bound.
MAX_CARDS = 2000
MAX_PENDING = 500
# An approval row's id: ours, so the answer route knows to send it to the gateway (agent_hooks.server.openclaw).
ID_PREFIX = "oc-"
# The note on a row whose answer from here the gateway refused (it was answered there first): the gateway's
# own word on it (exec.approval.resolved), heard before or after, still becomes the row's answer.
REFUSED_NOTE = "the OpenClaw gateway refused the answer"
_ID_SAFE = re.compile(r"[^A-Za-z0-9_-]")
# KEY=value where KEY looks like a secret: the value is not shown on a card.
_SECRET = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|AUTH)[A-Za-z0-9_]*)=(\S+)",
                     re.IGNORECASE)
# The argument a tool call is best told by, in order.
_VIEW_KEYS = ("command", "cmd", "file_path", "path", "url", "query", "pattern", "description")
DECISIONS_OUT = {"allow": "allow-once", "allow_always": "allow-always", "deny": "deny"}
DECISIONS_IN = {"allow-once": ("allow", approvals.ALLOWED), "allow-always": ("allow_always", approvals.ALLOWED),
                "deny": ("deny", approvals.DENIED)}


# Control characters (C0 but tab and newline, DEL, C1): never part of an id, and shown in a terminal
# (the CLI lists commands and labels) they could rewrite what the operator sees.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _str(value: Any, limit: int = MAX_KEY_CHARS) -> str | None:
    """An id from the gateway (session key, run id, agent id...), clipped; None when it is not a plain
    string: one with a control character or a lone surrogate is no id, and SQLite cannot store the latter."""
    if isinstance(value, str) and value and not _CONTROL.search(value) and not _has_surrogate(value):
        return value[:limit]
    return None


def _text(value: Any, limit: int) -> str | None:
    """Free text from the gateway (a command, an error, a title), made safe to store and show: clipped,
    lone surrogates and control characters replaced (one odd character must not lose a batch of events)."""
    if not isinstance(value, str) or not value:
        return None
    value = _CONTROL.sub("\ufffd", value[:limit])
    return value.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(value) else value  # "?" for each


def _has_surrogate(value: str) -> bool:
    try:
        value.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def safe_view(args: Any, limit: int = VIEW_CHARS) -> str:
    """A tool call's input on one line: its command (or path, url...) else compact JSON, secrets masked, clipped."""
    text = ""
    if isinstance(args, dict):
        for key in _VIEW_KEYS:
            value = args.get(key)
            if isinstance(value, str) and value.strip():
                text = value
                break
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                text = " ".join(value)
                break
        if not text and args:
            text = json.dumps(args, ensure_ascii=False, default=str, separators=(",", ":"))[: limit * 4]
    elif isinstance(args, str):
        text = args
    text = _SECRET.sub(lambda m: f"{m.group(1)}=***", _text(text[: limit * 4], limit * 4) or "")
    return one_line(text, limit) if text else ""


def card_id(host: str, session_key: str) -> str:
    """The card of one OpenClaw session on one gateway: the same id on every reconnect and restart."""
    return "oc-" + hashlib.sha1(f"{host}\x00{session_key}".encode()).hexdigest()[:12]


def approval_id(gateway_id: str) -> str:
    """Our row's id for the gateway's request: the gateway's own id when it is short and URL-safe (a UUID),
    else a digest of it. Never a cut or rewritten id: two requests must not share a row (the second one
    would go unlisted, and an answer to either would settle the other)."""
    if len(gateway_id) <= 60 and not _ID_SAFE.search(gateway_id):
        return ID_PREFIX + gateway_id
    return ID_PREFIX + "h." + hashlib.sha256(gateway_id.encode()).hexdigest()[:32]  # "." is never in the above


class Mapper:
    """Decoded gateway events -> actions. Remembers which session each run belongs to (a tool event
    may come without its sessionKey), for the newest RUNS_KEPT runs."""

    def __init__(self, approvals: bool = True) -> None:
        self.runs: OrderedDict[str, tuple[str, str | None]] = OrderedDict()
        # Whether approval requests are listed ([openclaw] approvals): without it none could be answered.
        self.approvals = approvals
        # True once sessions.subscribe succeeded: tool calls then come with their input (session.tool).
        self.subscribed = False
        # The newest requests the gateway said were answered (approval id -> action), for an answer from
        # here that raced one given there: the gateway's refusal of ours then records theirs (openclaw.answer).
        self.resolved: OrderedDict[str, dict[str, Any]] = OrderedDict()
        # The gateway's bootId (hello-ok): a run is remembered with the boot it ran in (see :func:`apply`).
        self.boot: str | None = None

    def connected(self, boot: str | None) -> list[dict[str, Any]]:
        """After a hello: the gateway's boot. A new one means it restarted, and the runs it had died with it."""
        self.boot = boot
        return [{"kind": "boot", "boot": boot}] if boot else []

    def _session(self, payload: dict[str, Any], run_id: str | None) -> tuple[str | None, str | None]:
        key, agent = _str(payload.get("sessionKey")), _str(payload.get("agentId"), 80)
        if run_id:
            if key:
                self.runs[run_id] = (key, agent)
                self.runs.move_to_end(run_id)
                while len(self.runs) > RUNS_KEPT:
                    self.runs.popitem(last=False)
            elif run_id in self.runs:
                key, known = self.runs[run_id]
                agent = agent or known
        if agent is None and key and key.startswith("agent:"):
            agent = key.split(":")[1][:80] or None  # agent:<agentId>:<rest>
        return key, agent

    def actions(self, event: str, payload: Any) -> list[dict[str, Any]]:
        """What one gateway event means for the board ([] for what it does not show)."""
        if not isinstance(payload, dict):
            return []
        if event == "agent":
            return self._agent(payload)
        if event == "session.tool":
            return self._agent(payload, tools_only=True)
        if event == "exec.approval.requested":
            return self._requested(payload) if self.approvals else []
        if event == "exec.approval.resolved":
            gid, decision = _str(payload.get("id")), payload.get("decision")
            if gid and decision in DECISIONS_IN:
                act = {"kind": "resolved", "id": approval_id(gid), "decision": decision,
                       "by": _text(payload.get("resolvedBy"), 200)}
                self.resolved[act["id"]] = act
                while len(self.resolved) > RUNS_KEPT:
                    self.resolved.popitem(last=False)
                return [act]
        return []

    def pending_list(self, items: Any) -> list[dict[str, Any]]:
        """The answer to ``exec.approval.list`` after a (re)connect: every request still pending there
        (one heard for the first time is listed), then a sync that settles ours the gateway no longer has."""
        if not self.approvals or not isinstance(items, list):
            return []
        out = [act for item in items for act in self._requested(item if isinstance(item, dict) else {})]
        return out + [{"kind": "sync", "ids": [a["id"] for a in out]}]

    def _agent(self, p: dict[str, Any], tools_only: bool = False) -> list[dict[str, Any]]:
        stream, data = p.get("stream"), p.get("data")
        if not isinstance(data, dict) or stream not in (("tool",) if tools_only else ("lifecycle", "tool", "item")):
            return []
        if stream == "item" and (data.get("kind") != "tool" or self.subscribed):
            return []
        run_id = _str(p.get("runId"))
        key, agent = self._session(p, run_id)
        if not key:
            return []
        # Idempotency keys say what happened, not the event's seq: a run's seq restarts after an abort, and
        # an aborted run's end is followed by an error for the same run (the first end wins).
        base: dict[str, Any] = {"session_key": key, "agent": agent, "run_id": run_id, "idem": None, "boot": self.boot}
        phase = data.get("phase")
        if stream == "lifecycle":
            if phase == "start":
                return [{**base, "kind": "run_start", "idem": f"{run_id}:start" if run_id else None}]
            if phase == "waiting-approval":
                return [{**base, "kind": "waiting", "detail": "exec approval"}]
            if phase == "approval-resolved":
                return [{**base, "kind": "resumed"}]
            if phase in ("end", "error"):
                aborted = data.get("aborted") is True
                error = _text(data.get("error"), 200) if not isinstance(data.get("error"), dict) else \
                    _text(data["error"].get("message"), 200)
                failed = aborted or phase == "error" or data.get("stopReason") == "error"
                why = "aborted" if aborted else (f"error: {error}" if error else
                                                 ("error" if failed else _text(data.get("stopReason"), 60)))
                return [{**base, "kind": "run_end", "failed": failed, "why": why,
                         "idem": f"{run_id}:end" if run_id else None}]
            return []
        name = _str(data.get("name"), 60) or "tool"
        call = _str(data.get("toolCallId"))
        if call and run_id:
            base["idem"] = f"{run_id}:tool:{call}:{'start' if phase == 'start' else 'end'}"
        elif run_id and isinstance(p.get("seq"), int):
            base["idem"] = f"{run_id}:tool-seq:{p['seq']}"  # no call id (not seen from the real gateway)
        if phase == "start":
            view = safe_view(data.get("args")) if stream == "tool" else \
                safe_view(_text(data.get("meta"), 1000) or _text(data.get("title"), 1000) or "")
            return [{**base, "kind": "tool", "tool": name, "view": view}]
        if phase in ("result", "end"):
            return [{**base, "kind": "tool_end", "tool": name, "error": data.get("isError") is True}]
        return []

    def _requested(self, p: dict[str, Any]) -> list[dict[str, Any]]:
        gid = _str(p.get("id"))
        req = p.get("request") if isinstance(p.get("request"), dict) else {}
        if not gid:
            return []
        command = _text(req.get("command"), approvals.MAX_MESSAGE_CHARS)
        if command is None and isinstance(req.get("commandArgv"), list):
            command = _text(" ".join(str(a) for a in req["commandArgv"]), approvals.MAX_MESSAGE_CHARS)
        key = _str(req.get("sessionKey")) or f"agent:{_str(req.get('agentId'), 80) or 'unknown'}:approvals"
        created, expires = p.get("createdAtMs"), p.get("expiresAtMs")
        unavailable = req.get("unavailableDecisions")
        allowed = [d for d in DECISIONS_OUT if not (isinstance(unavailable, list) and DECISIONS_OUT[d] in unavailable)]
        return [{"kind": "approval", "id": approval_id(gid), "gateway_id": gid, "session_key": key,
                 "agent": _str(req.get("agentId"), 80), "command": command or "", "cwd": _text(req.get("cwd"), 500),
                 "allowed": allowed,
                 "created_at": created / 1000 if isinstance(created, (int, float)) else None,
                 "expires_at": expires / 1000 if isinstance(expires, (int, float)) else None}]


# -- the store side (the writer thread, inside its transaction) -------------------------------------

def _details(conn: sqlite3.Connection, cid: str) -> dict[str, Any]:
    row = conn.execute("SELECT details FROM fleet_sessions WHERE id = ?", (cid,)).fetchone()
    try:
        value = json.loads(row[0]) if row and row[0] else {}
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}


def _card(conn: sqlite3.Connection, out: fleetdb.Outcome, host: str, key: str, at: float) -> dict[str, Any] | None:
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


def _event(conn: sqlite3.Connection, out: fleetdb.Outcome, card: dict[str, Any], event: str, metadata: str | None,
           at: float, key: str | None = None) -> None:
    out.transitions.append(fleetdb.apply(conn, card, event, metadata, "openclaw", at, key))


def apply(conn: sqlite3.Connection, actions: list[dict[str, Any]], host: str, at: float) -> fleetdb.Outcome:
    """Apply a batch of actions (from :class:`Mapper`) for the gateway on ``host``; what changed."""
    out = fleetdb.Outcome(200, {"ok": True, "applied": 0})
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


def _rebooted(conn: sqlite3.Connection, boot: str, host: str, at: float, out: fleetdb.Outcome) -> None:
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


def _under_way(conn: sqlite3.Connection, out: fleetdb.Outcome, card: dict[str, Any], details: dict[str, Any],
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
    always = [{"type": "openclaw", "decision": "allow-always"}] if "allow_always" in (act.get("allowed") or []) else None
    conn.execute(
        "INSERT INTO approvals (id, host, session_id, kind, tool_name, tool_input, tool_use_id, permission_suggestions,"
        " state, created_at, expires_at) VALUES (?, ?, ?, ?, 'exec', ?, ?, ?, 'pending', ?, ?)",
        (act["id"], host, act["session_key"], approvals.PERMISSION,
         json.dumps({"command": act["command"], "cwd": act["cwd"], "decisions": act.get("allowed")},
                    ensure_ascii=False), act["gateway_id"], json.dumps(always) if always else None,
         created, expires))
    return True


def _resolved(conn: sqlite3.Connection, act: dict[str, Any], host: str, at: float, out: fleetdb.Outcome) -> bool:
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
    return changed


def _sync(conn: sqlite3.Connection, still: set[str], host: str, at: float, out: fleetdb.Outcome) -> bool:
    """Our pending copies the gateway no longer lists: answered or expired while we were away."""
    gone = [(aid, sid) for aid, sid in conn.execute(
        "SELECT id, session_id FROM approvals WHERE host = ? AND state = 'pending' AND id LIKE 'oc-%'", (host,))
        if aid not in still]
    for aid, sid in gone:
        approvals.settle(conn, aid, approvals.WITHDRAWN, "no longer pending at the OpenClaw gateway (answered or"
                         " expired there while this server was not connected)", "remote", at)
        resumed(conn, sid, host, at, out)
    return bool(gone)


def resumed(conn: sqlite3.Connection, session_key: str, host: str, at: float, out: fleetdb.Outcome,
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
