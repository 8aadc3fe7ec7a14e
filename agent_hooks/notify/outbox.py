"""The notification outbox: one row per subject and channel, in the store (stdlib sqlite3).

A row is made once (``INSERT OR IGNORE`` on subject and channel: one notification per request per
channel, however often the server looks) and drained by the resident server (notify/service.py):

* ``queued``: not tried yet; ``retrying``: the last try failed, tried again at ``next_at``
  (backoff doubling from ``notify.backoff_initial_s`` to ``backoff_max_s``);
* ``sent``: delivered ``sends`` times; a request still unanswered is due again ``notify.renotify_s``
  later (``next_at``);
* ``failed``: given up after ``notify.max_attempts`` tries (a renotify starts over);
* ``cancelled``: its request was answered (or withdrawn, or expired) before it could be sent.

``next_at`` NULL means nothing more will be sent. A request that anyone answered gets nothing more,
wherever the answer came from: the server stops its rows when it sees the answer, and the sender
looks at the request again right before each send.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from agent_hooks.notify.text import Message

QUEUED, RETRYING, SENT, FAILED, CANCELLED = "queued", "retrying", "sent", "failed", "cancelled"
STATES = (QUEUED, RETRYING, SENT, FAILED, CANCELLED)
COLUMNS = ("id", "subject", "kind", "channel", "channel_name", "title", "body", "link", "tag", "state", "attempts",
           "sends", "created_at", "next_at", "last_at", "sent_at", "last_error", "last_answer")
_SELECT = "SELECT " + ", ".join(COLUMNS) + " FROM notify_outbox"
ERROR_CHARS = 500
# Settled rows older than this are dropped (a channel's newest row is always kept for doctor).
KEEP_S = 7 * 24 * 3600.0


def _rows(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    return [dict(zip(COLUMNS, r, strict=True)) for r in cur.fetchall()]


def enqueue(conn: sqlite3.Connection, subject: str, kind: str, channel: str, channel_name: str, msg: Message,
            at: float) -> bool:
    """A notification of ``subject`` to ``channel``, due now; False when it had one already."""
    return conn.execute(
        "INSERT OR IGNORE INTO notify_outbox (subject, kind, channel, channel_name, title, body, link, tag, state,"
        " attempts, sends, created_at, next_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)",
        (subject, kind, channel, channel_name, msg.title, msg.body, msg.url, msg.tag, QUEUED, at, at),
    ).rowcount > 0


def known(conn: sqlite3.Connection, subjects: list[str]) -> set[tuple[str, str]]:
    """(subject, channel) pairs that have a row already."""
    out: set[tuple[str, str]] = set()
    for i in range(0, len(subjects), 500):
        part = subjects[i:i + 500]
        cur = conn.execute(f"SELECT subject, channel FROM notify_outbox WHERE subject IN ({','.join('?' * len(part))})",
                           part)
        out.update((s, c) for s, c in cur.fetchall())
    return out


def due(conn: sqlite3.Connection, now: float, limit: int = 100) -> list[dict[str, Any]]:
    """Rows to send now, the longest-waiting first."""
    return _rows(conn.execute(_SELECT + " WHERE next_at IS NOT NULL AND next_at <= ? ORDER BY next_at LIMIT ?",
                              (now, limit)))


# A row taken for sending is due again this long after, should its sender die before it said how it went.
CLAIM_S = 120.0


def claim(conn: sqlite3.Connection, row: dict[str, Any], now: float) -> bool:
    """Take a due row for sending: True for the one sender that did (several command centers may drain
    one outbox in PostgreSQL; the others leave it)."""
    return conn.execute("UPDATE notify_outbox SET next_at = ? WHERE id = ? AND next_at = ?",
                        (now + CLAIM_S, row["id"], row["next_at"])).rowcount == 1


def next_due(conn: sqlite3.Connection) -> float | None:
    row = conn.execute("SELECT min(next_at) FROM notify_outbox WHERE next_at IS NOT NULL").fetchone()
    return row[0] if row else None


def delivered(conn: sqlite3.Connection, row_id: int, at: float, answer: str, again_at: float | None) -> None:
    """A send that worked; ``again_at``: when to send it again (a request still waiting), or None."""
    conn.execute("UPDATE notify_outbox SET state = ?, sends = sends + 1, attempts = 0, sent_at = ?, last_at = ?,"
                 " last_error = NULL, last_answer = ?, next_at = ? WHERE id = ?",
                 (SENT, at, at, answer[:ERROR_CHARS], again_at, row_id))


def failed(conn: sqlite3.Connection, row_id: int, at: float, error: str, retry_at: float | None) -> None:
    """A send that did not work: tried again at ``retry_at``, or given up (None)."""
    conn.execute("UPDATE notify_outbox SET state = ?, attempts = attempts + 1, last_at = ?, last_error = ?,"
                 " last_answer = ?, next_at = ? WHERE id = ?",
                 (RETRYING if retry_at is not None else FAILED, at, error[:ERROR_CHARS], error[:ERROR_CHARS],
                  retry_at, row_id))


def stop(conn: sqlite3.Connection, row_id: int, at: float, why: str) -> None:
    """Nothing more for this row (its request was answered): never sent yet -> cancelled."""
    conn.execute("UPDATE notify_outbox SET next_at = NULL, state = CASE WHEN state IN (?, ?) AND sends = 0"
                 " THEN ? ELSE state END, last_answer = coalesce(last_answer, ?), last_at = coalesce(last_at, ?)"
                 " WHERE id = ?", (QUEUED, RETRYING, CANCELLED, why[:ERROR_CHARS], at, row_id))


def stop_settled_requests(conn: sqlite3.Connection, pending: set[str], at: float) -> int:
    """Stop every request's row whose request is not in ``pending`` any more (answered anywhere)."""
    rows = conn.execute("SELECT id, subject FROM notify_outbox WHERE kind = 'request' AND next_at IS NOT NULL").fetchall()
    n = 0
    for rid, subject in rows:
        if subject not in pending:
            stop(conn, rid, at, "answered (or no longer waiting) before it was sent")
            n += 1
    return n


def given_up(conn: sqlite3.Connection, row_id: int, at: float, error: str, again_at: float | None) -> None:
    """Tried ``notify.max_attempts`` times: failed; a request still waiting is tried afresh at ``again_at``."""
    conn.execute("UPDATE notify_outbox SET state = ?, attempts = 0, last_at = ?, last_error = ?, last_answer = ?,"
                 " next_at = ? WHERE id = ?", (FAILED, at, error[:ERROR_CHARS], error[:ERROR_CHARS], again_at, row_id))


def for_subjects(conn: sqlite3.Connection, subjects: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each subject's delivery, channel by channel: ``[{channel, state, at, error, sends}]``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for i in range(0, len(subjects), 500):
        part = subjects[i:i + 500]
        cur = conn.execute(_SELECT + f" WHERE subject IN ({','.join('?' * len(part))}) ORDER BY id", part)
        for row in _rows(cur):
            out.setdefault(row["subject"], []).append(public(row))
    return out


def public(row: dict[str, Any]) -> dict[str, Any]:
    """One channel's delivery as the board, the CLI and the API show it."""
    return {"channel": row["channel_name"] or row["channel"], "state": row["state"],
            "at": row["sent_at"] if row["state"] == SENT else (row["last_at"] or row["created_at"]),
            "error": row["last_error"] if row["state"] in (RETRYING, FAILED) else None,
            "sends": row["sends"], "next_at": row["next_at"]}


def last_by_channel(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Each channel's newest tried row (doctor): by channel key."""
    cur = conn.execute(_SELECT + " WHERE id IN (SELECT max(id) FROM notify_outbox WHERE last_at IS NOT NULL"
                                 " GROUP BY channel)")
    return {row["channel"]: row for row in _rows(cur)}


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    cur = conn.execute("SELECT state, count(*) FROM notify_outbox WHERE next_at IS NOT NULL GROUP BY state")
    return {state: n for state, n in cur.fetchall()}


def prune(conn: sqlite3.Connection, now: float | None = None) -> int:
    """Drop settled rows past KEEP_S (each channel's newest stays)."""
    now = time.time() if now is None else now
    return conn.execute("DELETE FROM notify_outbox WHERE next_at IS NULL AND coalesce(last_at, created_at) < ?"
                        " AND id NOT IN (SELECT max(id) FROM notify_outbox GROUP BY channel)",
                        (now - KEEP_S,)).rowcount


def record_test(conn: sqlite3.Connection, channel: str, channel_name: str, msg: Message, at: float, ok: bool,
                answer: str) -> None:
    """`agent-hook notify test`'s send, kept as the channel's last delivery (doctor shows it)."""
    subject = f"test:{at:.6f}"
    enqueue(conn, subject, "test", channel, channel_name, msg, at)
    rid = conn.execute("SELECT id FROM notify_outbox WHERE subject = ? AND channel = ?", (subject, channel)).fetchone()[0]
    if ok:
        delivered(conn, rid, at, answer, None)
    else:
        failed(conn, rid, at, answer, None)


def attach(conn: sqlite3.Connection, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each request (as ``approvals.public`` gives it) with ``notifications``: its delivery per channel,
    from this store's outbox, else as the request's own host reported it (a command center's copy)."""
    if not items:
        return items
    ids = [str(i["id"]) for i in items]
    try:
        found = for_subjects(conn, ids)
        reported: dict[str, Any] = {}
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            reported.update(conn.execute("SELECT id, notify_state FROM approvals WHERE notify_state IS NOT NULL"
                                         f" AND id IN ({','.join('?' * len(part))})", part).fetchall())
    except sqlite3.OperationalError:  # a store from before notifications (the server migrates it)
        found, reported = {}, {}
    for item in items:
        mine = found.get(str(item["id"]))
        if mine is None and reported.get(item["id"]):
            mine = _reported(reported[item["id"]], str(item.get("host") or ""))
        item["notifications"] = mine or []
    return items


def _reported(raw: str, host: str) -> list[dict[str, Any]]:
    import json

    try:
        value = json.loads(raw)
    except ValueError:
        return []
    out = []
    for d in value if isinstance(value, list) else []:
        if isinstance(d, dict) and d.get("state") in STATES:
            out.append({"channel": str(d.get("channel") or "?")[:80], "state": d["state"],
                        "at": d.get("at") if isinstance(d.get("at"), (int, float)) else None,
                        "error": str(d["error"])[:ERROR_CHARS] if isinstance(d.get("error"), str) else None,
                        "sends": d.get("sends") if isinstance(d.get("sends"), int) else 0,
                        "next_at": None, "from": host})
    return out[:20]
