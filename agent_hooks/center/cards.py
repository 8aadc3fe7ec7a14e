"""What the board shows: one card per session, and a session's page (stdlib sqlite3, no Starlette).

A local card reads this host's store directly (agent, role, our own state,
guards, task, tool calls); an ingested card has what its events said. Both
carry the contract's state (the column) and, for local sessions, our own
state (live, awaiting, stalled, ended), each under its own name.
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

from agent_hooks.center import burn, contract, numbers
from agent_hooks.features import heartbeat, transcript
from agent_hooks.features import persist as persist_mod
from agent_hooks.output import one_line

_CARD_SQL = """
SELECT f.id, f.host, f.local, f.session_id, f.tmux_session, f.agent_type, f.label, f.task_id, f.state,
       f.last_event, f.metadata, f.tool_events, f.cancelled_at, f.cancel_reason, f.cancel_seq, f.created_at,
       f.updated_at,
       s.agent, s.role, s.state, s.last_seen_at, s.tool_calls, s.cwd, s.task_id, s.cancelled_at, s.cancel_reason,
       s.guard_warned, s.guard_denied, s.first_prompt, s.last_event,
       t.description, t.progress, t.state, t.cancel_reason,
       CASE WHEN f.local = 1 THEN (SELECT c.tool_name || char(31) || c.outcome || char(31) || coalesce(c.command, '')
                                   FROM tool_calls c WHERE c.session_id = f.id ORDER BY c.id DESC LIMIT 1) END,
       h.applied_seq,
       s.waiting_on, s.waiting_detail, s.waiting_since, t.persist, t.continuations, t.max_continuations,
       s.persist_last, s.tmux_pane, f.details,
       coalesce(s.cost_usd, f.cost_usd), t.budget_usd, t.spent_usd,
       l.state, l.error, f.events, s.session_id
FROM fleet_sessions f
LEFT JOIN sessions s ON f.local = 1 AND s.session_id = f.id
LEFT JOIN fleet_launches l ON l.card_id = f.id
LEFT JOIN tasks t ON t.task_id = coalesce(s.task_id, f.task_id)
LEFT JOIN fleet_hosts h ON h.host = f.host AND f.host != ''
"""


# The column a card shows in when the contract's state calls a session finished that its host knows is
# alive: the contract's default map (Stop = "exit") moves an interactive session to `completed` after every turn,
# and nothing moves it back. Our own state then decides: working, or waiting for a person or a prompt.
FINISHED = (contract.COMPLETED, contract.FAILED)
OWN_COLUMN = {"live": contract.RUNNING, heartbeat.STALLED: contract.RUNNING,
              "awaiting": contract.AWAITING_REVIEW, "needs_input": contract.AWAITING_REVIEW}
OWN_STATES = ("live", heartbeat.STALLED, "awaiting", "ended", "needs_input", "error")


def column(state: str, own_state: str | None) -> str:
    """Where a card shows: the contract's state, unless that says finished and our own state says the
    session is alive (then running, or awaiting review while it waits for a person or its next prompt),
    or says running of a session that sits at its prompt."""
    if state in FINISHED and own_state in OWN_COLUMN:
        return OWN_COLUMN[own_state]
    if state == contract.RUNNING and own_state == "awaiting":
        # Started and not yet prompted, or its prompt was blocked: the contract saw it start (running),
        # but it sits at its prompt.
        return contract.AWAITING_REVIEW
    return state


def _details(raw: str | None) -> dict[str, Any]:
    """What another host's server reported about its session (agent_hooks.center.report); {} if nothing.
    A number out of its range (stored by an older version: ``1e999`` reads as infinity) is dropped."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return numbers.clean_fields(value, numbers.CARD_FIELDS)


def _count(value: Any) -> int:
    """A stored count as a whole number, 0 when it is none (or out of range: never int(inf), a 500)."""
    return int(numbers.clean(value, "count") or 0)


def _text(value: Any, limit: int) -> str | None:
    return one_line(value, limit) if isinstance(value, str) and value else None


# Sessions that need a person come first in a column: asked for input, then stopped on an error.
NEEDS_PERSON = ("needs_input", "error")


def sort_key(card: dict[str, Any]) -> tuple[int, float]:
    """A card's place in its column: needs input, then error, then the rest; newest activity first."""
    on = card.get("waiting_on")
    rank = NEEDS_PERSON.index(on) if on in NEEDS_PERSON else len(NEEDS_PERSON)
    return rank, -(card.get("last_activity") or 0)


def ordered(cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cards in board order (the board groups them by column and keeps this order within one)."""
    return sorted(cards, key=sort_key)


def _persist(t_state: str | None, t_persist: int | None, used: int | None, budget: int | None,
             config: dict[str, Any], session_last: str | None = None) -> dict[str, Any] | None:
    """The task's persistence for the card (None without a task): whether it holds its workers at
    Stop, the continuations (Stop blocks) used of its budget, and ``let_go``: why this session was
    last allowed to stop, in a few words (None when its last decision was a hold, or none)."""
    if t_state is None:
        return None
    let_go = persist_mod.let_go_label(session_last)
    return {"persists": persist_mod.enabled_for(t_persist, config), "continuations": _count(used),
            "max_continuations": int(budget if budget is not None else config["persist"]["max_continuations"]),
            "let_go": let_go}


def _card(conn: sqlite3.Connection, row: tuple[Any, ...], own_host: str, now: float, stalled_after: float,
          config: dict[str, Any]) -> dict[str, Any]:
    (fid, host, local, session_id, tmux, agent_type, label, f_task, state, last_event, metadata, tool_events,
     f_cancel_at, f_cancel_reason, cancel_seq, created_at, updated_at,
     agent, role, own_state, last_seen, tool_calls, cwd, s_task, s_cancel_at, s_cancel_reason, warned, denied,
     first_prompt, hook_event, t_desc, t_progress, t_state, t_reason, last_tool, applied_seq,
     waiting_on, waiting_detail, waiting_since, t_persist, t_continuations, t_max, persist_last, tmux_pane,
     details_raw, cost_total, t_budget, t_spent, l_state, l_error, events, recorded) = row
    local = bool(local)
    rep = {} if local else _details(details_raw)
    task_id = s_task or f_task
    last_activity = max(updated_at or 0, last_seen or 0)
    stalled = False
    if local:
        shown, _ = heartbeat.derive(own_state, last_seen, now, stalled_after)
        stalled = shown == heartbeat.STALLED
    else:
        shown = None
        stalled = state == contract.RUNNING and now - (updated_at or now) > stalled_after
    if rep.get("own_state") in OWN_STATES:
        shown = rep["own_state"]
        stalled = shown == heartbeat.STALLED  # its host's judgement: an awaiting session is never stalled
    current_tool, tool_running, command = None, False, None
    if last_tool:
        name, _, rest = last_tool.partition("\x1f")
        outcome, _, command = rest.partition("\x1f")
        current_tool, tool_running, command = name, outcome == "pending", command or None
    elif rep.get("current_tool"):
        current_tool, tool_running = _text(rep["current_tool"], 60), rep.get("tool_running") is True
        command = _text(rep.get("current_command"), 300)
    elif not local and last_event == "tool_use" and metadata:
        current_tool = metadata.split(":", 1)[0].strip()[:60] or None
    if not local and rep:
        # Another host's server said what a local card reads from the store (agent_hooks.center.report).
        agent = _text(rep.get("agent"), 80) or agent
        role = _text(rep.get("role"), 80) or role
        task_id = task_id or _text(rep.get("task_id"), 200)
        t_desc = t_desc or _text(rep.get("task"), 200)
        t_state = t_state or _text(rep.get("task_state"), 20)
        waiting_on = _text(rep.get("waiting_on"), 20)
        waiting_detail = _text(rep.get("waiting_detail"), 200)
        waiting_since = rep.get("waiting_since") if isinstance(rep.get("waiting_since"), (int, float)) else None
        if isinstance(rep.get("tool_calls"), int):
            tool_calls = rep["tool_calls"]
        last_seen = rep.get("last_activity") if isinstance(rep.get("last_activity"), (int, float)) else None
        last_activity = max(last_activity, last_seen or 0)
        warned, denied = rep.get("warned") or 0, rep.get("denied") or 0
        first_prompt = first_prompt or _text(rep.get("label"), 48)
    if not local and not rep and metadata:
        # Nothing reported (a host without our server, or another forwarder): what the contract's metadata
        # says. Our forwarders write "needs input: TOOL" for a dialog and "error: KIND" for a failed turn.
        if state == contract.AWAITING_REVIEW and metadata.startswith("needs input: "):
            waiting_on, waiting_detail = "needs_input", _text(metadata[len("needs input: "):], 200)
        elif state == contract.FAILED and metadata.startswith("error: "):
            waiting_on, waiting_detail = "error", _text(metadata[len("error: "):], 200)
    reply = bool(tmux_pane) and shown == "awaiting" if local else rep.get("reply") is True
    task_cancelled = t_state == "cancelled"
    cancelled = task_cancelled or (s_cancel_at is not None if local else f_cancel_at is not None)
    delivered = None
    if not local and f_cancel_at is not None and cancel_seq:
        delivered = bool(applied_seq and applied_seq >= cancel_seq)
    return {
        "id": fid,
        "host": host or own_host,
        "local": local,
        "label": label or tmux or (one_line(first_prompt, 48) if first_prompt else None) or fid[:12],
        "tmux_session": tmux,
        "session_id": session_id,
        "agent": agent or agent_type,
        "agent_type": agent_type,
        "role": role,
        "task_id": task_id,
        "task": one_line(t_desc, 80) if t_desc else None,
        "task_state": t_state,
        "state": state,
        "own_state": shown,
        "last_activity": last_activity or None,
        "tool_calls": _count(tool_calls if (local or rep) and tool_calls is not None else tool_events),
        "current_tool": current_tool,
        "current_command": command,
        "tool_running": tool_running,
        # Shown in this column (see `column`); `state` stays the contract's.
        "column": column(state, shown),
        # A reply can be typed into its tmux pane (by its own host's server): awaiting a prompt, in tmux.
        "reply": reply,
        "in_tmux": bool(tmux_pane) if local else rep.get("in_tmux") is True,
        "reported": bool(rep),
        # The session moments its host tells its person itself (a remote card's report; agent_hooks.notify).
        "notified_by_host": rep.get("notified_by_host") if isinstance(rep.get("notified_by_host"), list) else None,
        "last_event": last_event,
        "hook_event": hook_event,
        "metadata": metadata,
        "cwd": cwd,
        # What a session waits on (the tool asked about, or the error's kind): a remote one's from its report.
        "waiting_on": waiting_on,
        "waiting_detail": waiting_detail,
        "waiting_since": waiting_since,
        "persist": _persist(t_state, t_persist, t_continuations, t_max, config, persist_last),
        # Dollars, $/h over the last 10 minutes, today's spend, and the budget counted against.
        "cost": burn.card_cost(conn, fid, local, cost_total, now, t_budget, t_spent,
                               float(config["budgets"]["session_usd"] or 0.0)),
        # A session started from the command center (center/launcher.py): None for the others.
        "launch": _launch(l_state, l_error, bool(events or rep or recorded)),
        "badges": {
            "cancelled": cancelled,
            "cancelled_by": "task" if task_cancelled else ("session" if cancelled else None),
            "cancel_reason": t_reason if task_cancelled else (s_cancel_reason if local else f_cancel_reason),
            "cancel_delivered": delivered,
            "warned": _count(warned),
            "denied": _count(denied),
            "stalled": stalled,
        },
    }


# Every card's id and its last activity: which cards the board shows when there are more than board.max_sessions.
ACTIVITY_SQL = """
SELECT f.id, max(f.updated_at, coalesce(s.last_seen_at, 0)) FROM fleet_sessions f
LEFT JOIN sessions s ON f.local = 1 AND s.session_id = f.id
"""
# Where in a card's row (_CARD_SQL) the times it turns stalled from, and its cost, are.
_UPDATED_AT, _LAST_SEEN, _COST = 16, 20, -3


def rows(conn: sqlite3.Connection, ids: list[str]) -> dict[str, tuple[Any, ...]]:
    """Each card's row, by id: what :func:`card` builds it from (with its cost samples)."""
    out: dict[str, tuple[Any, ...]] = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        for row in conn.execute(_CARD_SQL + f" WHERE f.id IN ({','.join('?' * len(chunk))})", chunk):
            out[row[0]] = tuple(row)
    return out


def card(conn: sqlite3.Connection, row: tuple[Any, ...], config: dict[str, Any], own_host: str,
         now: float) -> dict[str, Any]:
    """The card a row of :func:`rows` shows now."""
    return _card(conn, row, own_host, now, heartbeat.stalled_after(config), config)


def due(row: tuple[Any, ...], config: dict[str, Any], now: float) -> float:
    """When the card of ``row`` may change with no write to its row: when it turns stalled, or, for a card
    with a cost (its burn rate and today's spend move with the clock), at once. inf: not before a write."""
    if row[_COST]:
        return now
    after = heartbeat.stalled_after(config)
    later = [t + after for t in (row[_UPDATED_AT], row[_LAST_SEEN]) if t is not None and t + after >= now]
    return min(later) if later else math.inf


def _launch(state: str | None, error: str | None, heard: bool) -> dict[str, Any] | None:
    """A launched card's start: ``starting`` until its host said it started and its session was heard
    from (then ``started``), or ``refused`` with the host's reason."""
    if state is None:
        return None
    shown = "starting" if state == "starting" or (state == "started" and not heard) else state
    return {"state": shown, "error": _text(error, 500)}


def build(conn: sqlite3.Connection, config: dict[str, Any], own_host: str, now: float,
          ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Cards by id: all (newest activity first, at most ``board.max_sessions``) or the given ids."""
    stalled_after = heartbeat.stalled_after(config)
    if ids is not None:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = conn.execute(_CARD_SQL + f" WHERE f.id IN ({marks})", ids).fetchall()
    else:
        limit = int(config["board"]["max_sessions"])
        rows = conn.execute(_CARD_SQL + " ORDER BY max(f.updated_at, coalesce(s.last_seen_at, 0)) DESC LIMIT ?",
                            (limit,)).fetchall()
    return {row[0]: _card(conn, row, own_host, now, stalled_after, config) for row in rows}


# -- a session's page ----------------------------------------------------------

_CALLS = ("id", "tool_name", "decision", "rule", "reason", "outcome", "error", "duration_ms", "started_at",
          "ended_at", "agent_id", "command")


def usage(entries: list[dict[str, Any]], window: int) -> dict[str, Any] | None:
    """Tokens used and context fill from the transcript's assistant ``usage`` (one per message id)."""
    per_message: dict[str, tuple[dict[str, Any], str | None]] = {}
    for e in entries:
        msg = e.get("message")
        if e.get("type") != "assistant" or e.get("isSidechain") or not isinstance(msg, dict):
            continue
        u = msg.get("usage")
        if isinstance(u, dict):
            key = str(msg.get("id") or e.get("uuid") or len(per_message))
            per_message[key] = (u, msg.get("model") if isinstance(msg.get("model"), str) else None)
    if not per_message:
        return None

    def n(u: dict[str, Any], k: str) -> int:
        v = u.get(k)
        return _count(v)

    totals = {k: sum(n(u, k) for u, _ in per_message.values())
              for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")}
    last, model = list(per_message.values())[-1]
    context = n(last, "input_tokens") + n(last, "cache_creation_input_tokens") + n(last, "cache_read_input_tokens")
    return {
        "turns": len(per_message),
        "model": model,
        **totals,
        "total_tokens": sum(totals.values()),
        "context_tokens": context,
        "context_window": window,
        "context_fill": round(context / window, 4) if window > 0 else None,
    }


def detail(conn: sqlite3.Connection, config: dict[str, Any], env: Any, own_host: str, card_id: str,
           now: float) -> dict[str, Any] | None:
    """A session's page: its card, recent tool calls with guard decisions (or events), task, the agent's
    last message, tokens and context fill, summary, and the contract events it went through."""
    card = build(conn, config, own_host, now, [card_id]).get(card_id)
    if card is None:
        return None
    limit = int(config["board"]["recent_tool_calls"])
    out: dict[str, Any] = {"card": card, "tool_calls": [], "task": None, "last_message": None, "usage": None,
                           "summary": None, "events": [], "prompt": None, "transcript": None, "approvals": [], "actions": [],
                           "cost_series": burn.chart(burn.samples(conn, card_id, card["local"]))}
    from agent_hooks.features import approvals

    # Every request held for a person, with its answer (docs/approvals.md); by session id, so a
    # command center's rows for another host's session show too once they are carried here.
    sid = card.get("session_id") or card_id
    from agent_hooks.notify.outbox import attach

    out["approvals"] = attach(conn, [approvals.public(r, own_host) for r in approvals.listing(conn, "all", sid, limit)])
    # Who answered, replied and cancelled here, as their credentials said (center/credentials.py).
    from agent_hooks.center import credentials

    out["actions"] = credentials.actions_for(conn, [card_id, sid], limit)
    cur = conn.execute("SELECT event, from_state, to_state, metadata, source, at FROM fleet_events"
                       " WHERE fleet_id = ? ORDER BY id DESC LIMIT ?", (card_id, limit))
    out["events"] = [dict(zip(("event", "from", "to", "metadata", "source", "at"), r, strict=True)) for r in cur.fetchall()]
    f = conn.execute("SELECT prompt, depends_on FROM fleet_sessions WHERE id = ?", (card_id,)).fetchone()
    out["prompt"] = f[0] if f else None
    if card["task_id"]:
        t = conn.execute("SELECT task_id, description, progress, state, cancel_reason, updated_at FROM tasks"
                         " WHERE task_id = ?", (card["task_id"],)).fetchone()
        out["task"] = dict(zip(("task_id", "description", "progress", "state", "cancel_reason", "updated_at"), t, strict=True)) \
            if t else {"task_id": card["task_id"]}
        if card["persist"]:
            out["task"].update(card["persist"])
    if not card["local"]:
        return out
    cur = conn.execute(f"SELECT {', '.join(_CALLS)} FROM tool_calls WHERE session_id = ? ORDER BY id DESC LIMIT ?",
                       (card_id, limit))
    out["tool_calls"] = [dict(zip(_CALLS, r, strict=True)) for r in cur.fetchall()]
    s = conn.execute("SELECT summary, source, at FROM session_summaries WHERE session_id = ?", (card_id,)).fetchone()
    if s:
        out["summary"] = {"text": s[0], "source": s[1], "at": s[2]}
    row = conn.execute("SELECT transcript_path, first_prompt FROM sessions WHERE session_id = ?", (card_id,)).fetchone()
    if row:
        out["prompt"] = out["prompt"] or row[1]
        if row[0]:
            loaded = transcript.load(row[0], env, config, budget_ms=int(config["transcript"]["parse_budget_ms"]))
            if loaded["path"]:
                facts = transcript.facts(loaded["entries"])
                out["last_message"] = facts["last_reply"]
                out["usage"] = usage(loaded["entries"], int(config["board"]["context_window_tokens"]))
                out["transcript"] = {"cut": loaded["cut"], "partial": loaded["partial"]}
    return out
