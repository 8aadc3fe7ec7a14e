"""The command center's tables (m007_command_center), with the standard library's sqlite3.

One row of ``fleet_sessions`` per board card. This host's sessions (``local``
1, ``host`` "") keep their details in ``sessions``; the row holds the
contract state, moved by replaying the ``local_feed`` (every hook call, in
order) through ``forward.event_map``. Other hosts' sessions arrive through
ingest and are kept with the host they came from. Every applied event is a
``fleet_events`` row; cancel / uncancel for other hosts are ``fleet_controls``.

Callers hold the transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``); these
functions only read and write rows, and return what changed so the caller
can broadcast it.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_hooks.center import contract, fleetstore, limits

if TYPE_CHECKING:
    from agent_hooks.center.reply import Target
    from agent_hooks.features.approvals import Answer

FEED_CURSOR = "fleet.feed_cursor"
EPOCH = "fleet.epoch"
THIS_HOST = ""  # the host column of this host's own cards

SESSION_COLUMNS = ("id", "host", "local", "session_id", "tmux_session", "agent_type", "label", "prompt",
                   "task_id", "depends_on", "state", "last_event", "metadata", "events", "tool_events",
                   "cancelled_at", "cancel_reason", "cancel_seq", "created_at", "updated_at", "cost_usd")


@dataclass
class Result:
    """What one request did: HTTP status, the answer (JSON), and what to do once it has committed."""

    status: int
    body: dict[str, Any]
    transitions: list[dict[str, Any]] = field(default_factory=list)
    changed: set[str] = field(default_factory=set)  # card ids to refresh
    removed: set[str] = field(default_factory=set)
    # Replies to type into this host's tmux panes after the commit (center/reply.py): each with the
    # control that carried it from a command center, or None for one posted to this host.
    replies: list[tuple[dict[str, Any] | None, Target]] = field(default_factory=list)
    # Launches a command center sent this host (center/launch.py): started after the commit, like replies.
    launches: list[dict[str, Any]] = field(default_factory=list)
    # What the route needs besides the answer (not sent): e.g. the ids a report's caps left out.
    extra: dict[str, Any] = field(default_factory=dict)


# What each result of an answer to a request (features/approvals.Answer) is to an HTTP caller.
ANSWER_STATUS = {"answered": 200, "already": 409, "unknown": 404, "invalid": 400}


def answer_outcome(result: Answer) -> Result:
    """An answer's result as the center's routes answer it: the status, and the row or why not."""
    if result.answered:
        return Result(200, {"ok": True, "approval": result.row})
    doc: dict[str, Any] = {"error": result.error}
    if result.row is not None:
        doc["approval"] = result.row
    return Result(ANSWER_STATUS[result.result], doc)


def row_dict(cur: sqlite3.Cursor, row: tuple[Any, ...] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return dict(zip([d[0] for d in cur.description], row, strict=True))


def get(conn: sqlite3.Connection, card_id: str) -> dict[str, Any] | None:
    cur = conn.execute(f"SELECT {', '.join(SESSION_COLUMNS)} FROM fleet_sessions WHERE id = ?", (card_id,))
    return row_dict(cur, cur.fetchone())


def public(card: dict[str, Any], own_host: str) -> dict[str, Any]:
    """A card row as the API shows it (GET /api/hooks/sessions)."""
    out = dict(card)
    out["host"] = card["host"] or own_host
    out["local"] = bool(card["local"])
    try:
        out["depends_on"] = json.loads(card["depends_on"]) if card.get("depends_on") else []
    except ValueError:
        out["depends_on"] = []
    return out


def meta_get(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def meta_set(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (key, value))


def epoch(conn: sqlite3.Connection) -> str:
    """This store's command-center identity: control sequence numbers count within it."""
    value = meta_get(conn, EPOCH)
    if value is None:
        value = secrets.token_hex(8)
        meta_set(conn, EPOCH, value)
    return value


# -- lookup and registration -------------------------------------------------

def _local_session(conn: sqlite3.Connection, session_id: str | None, tmux: str | None) -> tuple[str, str | None] | None:
    """This host's recorded session by id, else the newest one in that tmux session: (id, tmux)."""
    if session_id:
        row = conn.execute("SELECT session_id, tmux_session FROM sessions WHERE session_id = ?",
                           (session_id,)).fetchone()
        if row:
            return row[0], row[1]
    if tmux:
        row = conn.execute(
            "SELECT session_id, tmux_session FROM sessions WHERE tmux_session = ?"
            " ORDER BY (state = 'ended'), last_seen_at DESC LIMIT 1", (tmux,)).fetchone()
        if row:
            return row[0], row[1]
    return None


def find(conn: sqlite3.Connection, session_id: str | None, tmux: str | None, host: str) -> dict[str, Any] | None:
    """The contract's lookup: by session id first (card id, then a direct session id), then by tmux
    name among the cards of the host the request came from (tmux names are per host). One query
    (:class:`Found`): with PostgreSQL each query is a round trip the writer waits for."""
    return Found(conn, host, [session_id], [tmux]).card(session_id, tmux)


class Found:
    """:func:`find` for every session of one host's report, from one query (a round trip per card adds up
    with PostgreSQL: the writer thread waits for each). ``session(sid)`` is find(sid, None, host),
    ``tmux(name)`` is find(None, name, host)."""

    def __init__(self, conn: sqlite3.Connection, host: str, session_ids: list[str | None],
                 tmux_names: list[str | None], cursor: Any = None) -> None:
        """The cards, read now (or from ``cursor``: :meth:`query` already run, in a pipeline of the caller's)."""
        self.by_id: dict[str, dict[str, Any]] = {}
        self.by_session: dict[str, dict[str, Any]] = {}
        self.by_tmux: dict[str, dict[str, Any]] = {}
        if cursor is None:
            query = self.query(host, session_ids, tmux_names)
            if query is None:
                return
            cursor = conn.execute(*query)
        for row in cursor.fetchall():
            card = row_dict(cursor, row)
            assert card is not None
            self.by_id[card["id"]] = card
            if card["session_id"]:
                self.by_session.setdefault(card["session_id"], card)  # the newest first, as find's LIMIT 1
            if card["host"] == host and card["tmux_session"]:
                self.by_tmux.setdefault(card["tmux_session"], card)

    @staticmethod
    def query(host: str, session_ids: list[str | None], tmux_names: list[str | None]) -> tuple[str, list[Any]] | None:
        """The one query (SQL, parameters), or None when there is nothing to look for."""
        ids, names = sorted(set(filter(None, session_ids))), sorted(set(filter(None, tmux_names)))
        where: list[str] = []
        params: list[Any] = []
        if ids:
            marks = ", ".join("?" * len(ids))
            where.append(f"id IN ({marks}) OR session_id IN ({marks})")
            params += ids + ids
        if names:
            where.append(f"(host = ? AND tmux_session IN ({', '.join('?' * len(names))}))")
            params += [host, *names]
        if not where:
            return None
        return (f"SELECT {', '.join(SESSION_COLUMNS)} FROM fleet_sessions WHERE {' OR '.join(where)}"
                " ORDER BY updated_at DESC", params)

    def session(self, session_id: str | None) -> dict[str, Any] | None:
        return (self.by_id.get(session_id) or self.by_session.get(session_id)) if session_id else None

    def tmux(self, name: str | None) -> dict[str, Any] | None:
        return self.by_tmux.get(name) if name else None

    def card(self, session_id: str | None, tmux: str | None) -> dict[str, Any] | None:
        """find's answer: by session id, else by tmux name."""
        card = self.session(session_id)
        return card if card is not None else self.tmux(tmux)


def create(conn: sqlite3.Connection, *, host: str, at: float, session_id: str | None = None,
           tmux: str | None = None, agent_type: str = contract.DEFAULT_AGENT_TYPE, state: str = contract.IDLE,
           local: bool = False, card_id: str | None = None, label: str | None = None, prompt: str | None = None,
           task_id: str | None = None, depends_on: tuple[str, ...] = ()) -> dict[str, Any]:
    """Insert a card and return it. Its id: the local session's id, a free direct id, or a random one."""
    if card_id is None:
        taken = session_id and conn.execute("SELECT 1 FROM fleet_sessions WHERE id = ?", (session_id,)).fetchone()
        card_id = session_id if session_id and not taken else "s-" + secrets.token_hex(6)
    conn.execute(
        "INSERT INTO fleet_sessions (id, host, local, session_id, tmux_session, agent_type, label, prompt, task_id,"
        " depends_on, state, events, tool_events, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)",
        (card_id, host, int(local), session_id, tmux, agent_type, label, prompt, task_id,
         json.dumps(list(depends_on)) if depends_on else None, state, at, at),
    )
    card = get(conn, card_id)
    assert card is not None
    return card


def _adopt_local(conn: sqlite3.Connection, session_id: str | None, tmux: str | None,
                 at: float) -> dict[str, Any] | None:
    """This host's recorded session as a card (created, running, if it had none): the hook feed
    and a forwarder pointed at this server then move one card, never two."""
    found = _local_session(conn, session_id, tmux)
    if found is None:
        return None
    card = get(conn, found[0])
    if card is None:
        card = create(conn, host=THIS_HOST, at=at, session_id=found[0], tmux=found[1], state=contract.RUNNING,
                      local=True, card_id=found[0])
    return card


# -- events ------------------------------------------------------------------

def apply(conn: sqlite3.Connection, card: dict[str, Any], event: str, metadata: str | None, source: str,
          at: float, key: str | None = None) -> dict[str, Any]:
    """Apply one contract event to a card (state machine), journal it; the transition record."""
    before = card["state"]
    after = contract.transition(before, event)
    fleetstore.run_all(conn, [(
        "UPDATE fleet_sessions SET state = coalesce(?, state), last_event = ?, metadata = coalesce(?, metadata),"
        " events = events + 1, tool_events = tool_events + CASE WHEN ? = 'tool_use' THEN 1 ELSE 0 END, updated_at = ? WHERE id = ?",
        (after, event, metadata, event, at, card["id"]),
    ), (
        "INSERT INTO fleet_events (fleet_id, event, from_state, to_state, metadata, source, idem_key, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (card["id"], event, before, after, metadata, source, key, at),
    )])
    if after is not None:
        card["state"] = after
    return {"id": card["id"], "event": event, "from": before, "to": after or before, "ignored": after is None,
            "source": source, "at": at}


def _registered(card: dict[str, Any], how: str, at: float) -> dict[str, Any]:
    return {"id": card["id"], "event": how, "from": None, "to": card["state"], "ignored": False,
            "source": "register", "at": at}


def ingest(conn: sqlite3.Connection, body: contract.IngestBody, host: str, at: float,
           key: str | None = None, caps: limits.Limits | None = None) -> Result:
    """``POST /api/hooks/ingest`` inside the caller's transaction: 200, or 404 when the session is
    unknown and cannot be auto-registered, or 429 when another host's new card is past ``caps``
    (agent_hooks.center.limits). A repeated Idempotency-Key is answered 200 and not applied."""
    # The Idempotency-Key's event and the card, asked together (PostgreSQL: one round trip).
    lookup = Found.query(host, [body.session_id], [body.tmux_session])
    statements: list[tuple[str, Any]] = []
    if key is not None:
        statements.append(("SELECT fleet_id, to_state FROM fleet_events WHERE idem_key = ?", (key,)))
    if lookup is not None:
        statements.append(lookup)
    asked = fleetstore.run_all(conn, statements)
    if key is not None:
        row = asked.pop(0).fetchone()
        if row is not None:
            return Result(200, {"ok": True, "duplicate": True, "session": row[0]})
    card = None
    if lookup is not None:
        found = Found(conn, host, [body.session_id], [body.tmux_session], cursor=asked[0])
        card = found.card(body.session_id, body.tmux_session)
    out = Result(200, {})
    if card is None and host == THIS_HOST:
        card = _adopt_local(conn, body.session_id, body.tmux_session, at)
    if card is None:
        how = contract.auto_registration(body)
        if how is None:
            return Result(404, {"error": "session not found (and not auto-registerable: only a start, or any"
                                          f" event from a tmux session named {contract.AUTO_PREFIX}*, registers one)"})
        refused, out.removed = _room(conn, host, caps, at)
        if refused is not None:
            return Result(429, {"error": refused}, removed=out.removed)
        card = create(conn, host=host, at=at, session_id=body.session_id, tmux=body.tmux_session,
                      agent_type=body.agent_type, state=contract.RUNNING if how == "agent" else contract.IDLE)
        out.transitions.append(_registered(card, "register", at))
    change = apply(conn, card, body.event, body.metadata, "ingest", at, key)
    if body.cost_usd is not None:  # a running total: an event delivered late never lowers it
        conn.execute("UPDATE fleet_sessions SET cost_usd = max(coalesce(cost_usd, 0), ?) WHERE id = ?",
                     (body.cost_usd, card["id"]))
        if card.get("cost_usd") is None or body.cost_usd > card["cost_usd"]:
            # A sample only when the total rose: the board's burn rate and cost chart read these.
            conn.execute("INSERT INTO fleet_cost_samples (fleet_id, at, usd) VALUES (?, ?, ?)",
                         (card["id"], at, body.cost_usd))
        card["cost_usd"] = max(card.get("cost_usd") or 0.0, body.cost_usd)
    out.transitions.append(change)
    out.changed.add(card["id"])
    out.body = {"ok": True, "session": card["id"], "state": card["state"], "ignored": change["ignored"]}
    return out


def _room(conn: sqlite3.Connection, host: str, caps: limits.Limits | None, at: float) -> tuple[str | None, set[str]]:
    """Before another host's new card: why it may not be made (or None), and that host's cards dropped
    to make room for it (agent_hooks.center.limits)."""
    refused, dropped = limits.new_card(conn, host, caps, at)
    return refused, set(dropped)


def register(conn: sqlite3.Connection, reg: contract.Registration, host: str, at: float,
             caps: limits.Limits | None = None) -> Result:
    """``POST /api/hooks/sessions``: the existing card for a known tmux name (or id), else a new idle one
    (429 when another host's new card is past ``caps``)."""
    card = find(conn, reg.session_id, reg.tmux_session, host)
    if card is None and host == THIS_HOST:
        card = _adopt_local(conn, reg.session_id, reg.tmux_session, at)
    if card is not None:
        return Result(200, {"created": False, "session": card})
    refused, removed = _room(conn, host, caps, at)
    if refused is not None:
        return Result(429, {"error": refused}, removed=removed)
    card = create(conn, host=host, at=at, session_id=reg.session_id, tmux=reg.tmux_session,
                  agent_type=reg.agent_type, label=reg.label, prompt=reg.prompt, task_id=reg.task_id,
                  depends_on=reg.depends_on)
    return Result(201, {"created": True, "session": card}, [_registered(card, "register", at)], {card["id"]},
                   removed=removed)


def patch(conn: sqlite3.Connection, card_id: str, kind: str, value: str, at: float) -> Result:
    """``PATCH /api/hooks/sessions/:id``: a state (mapped to its event) or an event. 404, 409 or 200."""
    card = get(conn, card_id)
    if card is None:
        return Result(404, {"error": f"no session {card_id!r}"})
    if kind == "state":
        if value == card["state"]:
            return Result(200, {"ok": True, "session": card_id, "state": value, "ignored": True})
        event = contract.event_for_state(card["state"], value)
        if event is None:
            return Result(409, {"error": f"no event moves a session from {card['state']} to {value}",
                                 "state": card["state"], "allowed": sorted(contract.targets(card["state"]))})
    else:
        event = value
    change = apply(conn, card, event, None, "patch", at)
    return Result(200, {"ok": True, "session": card_id, "event": event, "state": card["state"],
                         "ignored": change["ignored"]}, [change], {card_id})


def delete(conn: sqlite3.Connection, card_id: str) -> Result:
    """``DELETE /api/hooks/sessions/:id``: the card and its events. A local session's own records
    (tool calls, summary) stay in the store; its card comes back only with new hook activity."""
    if conn.execute("DELETE FROM fleet_sessions WHERE id = ?", (card_id,)).rowcount == 0:
        return Result(404, {"error": f"no session {card_id!r}"})
    conn.execute("DELETE FROM fleet_events WHERE fleet_id = ?", (card_id,))
    conn.execute("DELETE FROM fleet_cost_samples WHERE fleet_id = ?", (card_id,))
    out = Result(200, {"ok": True, "deleted": card_id})
    out.removed.add(card_id)
    return out


def list_cards(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    cur = conn.execute(f"SELECT {', '.join(SESSION_COLUMNS)} FROM fleet_sessions ORDER BY created_at, id")
    return [row_dict(cur, r) for r in cur.fetchall()]  # type: ignore[misc]


def prune_events(conn: sqlite3.Connection, card_ids: Iterable[str], keep: int) -> None:
    """Keep each card's newest ``keep`` events (idempotency keys of older ones are forgotten). One
    executemany: PostgreSQL's runs as one pipeline, not a round trip per card."""
    conn.executemany(
        "DELETE FROM fleet_events WHERE fleet_id = ? AND id <= coalesce((SELECT id FROM fleet_events"
        " WHERE fleet_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?), -1)",
        [(cid, cid, keep) for cid in card_ids],
    )


# -- this host's sessions: the hook feed ---------------------------------------

def sync_local(conn: sqlite3.Connection, event_map: dict[str, Any], at: float, limit: int = 5000) -> Result:
    """Replay new ``local_feed`` rows (hook calls) through the event map onto local cards.

    A local session seen for the first time gets a card: idle then moved by its
    ``start``, or running when its first recorded call is anything else (the
    the contract's rule for ``agent-`` sessions: a session we hear from is working).
    """
    out = Result(200, {})
    cursor = int(meta_get(conn, FEED_CURSOR) or 0)
    top = conn.execute("SELECT max(id) FROM local_feed").fetchone()[0] or 0
    if top < cursor:  # the feed was recreated (a restored store): start over
        cursor = 0
    rows = conn.execute("SELECT id, session_id, hook_event FROM local_feed WHERE id > ? ORDER BY id LIMIT ?",
                        (cursor, limit)).fetchall()
    if not rows:
        return out
    cards: dict[str, dict[str, Any] | None] = {}
    for fid, sid, hook_event in rows:
        cursor = fid
        if sid not in cards:
            cards[sid] = get(conn, sid)
        card = cards[sid]
        event = event_map.get(hook_event) if isinstance(hook_event, str) else None
        if event not in contract.EVENTS:
            event = None
        if card is None:
            tmux = conn.execute("SELECT tmux_session FROM sessions WHERE session_id = ?", (sid,)).fetchone()
            if tmux is None:
                continue  # deleted since
            card = create(conn, host=THIS_HOST, at=at, session_id=sid, tmux=tmux[0], local=True, card_id=sid,
                          state=contract.IDLE if event == "start" else contract.RUNNING)
            cards[sid] = card
            out.transitions.append(_registered(card, "register", at))
        out.changed.add(sid)
        if event is not None:
            out.transitions.append(apply(conn, card, event, hook_event, "hook", at))
        else:
            conn.execute("UPDATE fleet_sessions SET updated_at = ? WHERE id = ?", (at, sid))
    meta_set(conn, FEED_CURSOR, str(cursor))
    return out


# -- control across hosts ------------------------------------------------------

CONTROL_COLUMNS = ("seq", "host", "kind", "action", "fleet_id", "session_id", "tmux_session", "task_id", "reason", "at")


def add_control(conn: sqlite3.Connection, *, host: str, kind: str, action: str, at: float,
                fleet_id: str | None = None, session_id: str | None = None, tmux: str | None = None,
                task_id: str | None = None, reason: str | None = None) -> int:
    """Record a control (cancel, uncancel, reply, answer, launch) for ``host`` ("*" = every host); its sequence number."""
    if fleetstore.dialect(conn).postgres:
        # Several centers number controls from one sequence; a host's cursor moves past every number it was
        # sent, so a control must never commit after a higher one was read: one writer of controls at a time.
        conn.execute("SELECT pg_advisory_xact_lock(?)", (fleetstore.CONTROLS_LOCK,))
    row = conn.execute(
        "INSERT INTO fleet_controls (host, kind, action, fleet_id, session_id, tmux_session, task_id, reason, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
        (host, kind, action, fleet_id, session_id, tmux, task_id, reason, at),
    ).fetchone()
    return int(row[0] or 0)


def controls_after(conn: sqlite3.Connection, host: str, after: int, limit: int = 500) -> list[dict[str, Any]]:
    """The controls for ``host`` (its own and every host's) after sequence number ``after``."""
    cur = conn.execute(
        f"SELECT {', '.join(CONTROL_COLUMNS)} FROM fleet_controls WHERE seq > ? AND host IN (?, '*')"
        " ORDER BY seq LIMIT ?", (after, host, limit))
    return [row_dict(cur, r) for r in cur.fetchall()]  # type: ignore[misc]


def host_seen(conn: sqlite3.Connection, host: str, applied: int, at: float, auth: str | None = None) -> None:
    """A subscribed host asked for controls after ``applied``: it has applied everything up to there.
    ``auth``: how it showed who it is ("credential", "fleet token", "uid"), for doctor."""
    conn.execute(
        "INSERT INTO fleet_hosts (host, last_seen_at, applied_seq, auth) VALUES (?, ?, ?, ?) ON CONFLICT (host)"
        " DO UPDATE SET last_seen_at = excluded.last_seen_at,"
        " applied_seq = max(coalesce(fleet_hosts.applied_seq, 0), excluded.applied_seq),"
        " auth = coalesce(excluded.auth, fleet_hosts.auth)",
        (host, at, applied, auth),
    )
