"""Reading back what the hooks failed open on: the error log and the ``errors`` table.

``status``, ``doctor`` and ``errors`` all count with :func:`report`, so they
show the same number: the errors recorded after the last ``agent-hook errors
seen`` (a time kept in the store's ``meta`` table). The log is read too,
because some errors never reach the table (the store itself was the
problem, or the drainer could not reach the server); the count is whichever
of the two saw more.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from agent_hooks.paths import Paths

SEEN_KEY = "errors.seen_at"


def seen_at(conn: sqlite3.Connection | None) -> float:
    """When errors were last marked seen (0: never, or no store)."""
    if conn is None:
        return 0.0
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (SEEN_KEY,)).fetchone()
    except sqlite3.Error:
        return 0.0
    try:
        return float(row[0]) if row else 0.0
    except ValueError:
        return 0.0


def log_entries(paths: Paths, since: float) -> list[dict[str, Any]]:
    """Error-log entries (the rotated file first) logged after ``since``, oldest first."""
    entries = []
    for path in (paths.error_log + ".1", paths.error_log):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    try:
                        ts = float(entry.get("ts") or 0) if isinstance(entry, dict) else 0.0
                    except (TypeError, ValueError):
                        continue
                    if ts > since:
                        entries.append(entry)
        except OSError:
            pass
    return entries


def _table(conn: sqlite3.Connection | None, since: float) -> tuple[int, int]:
    """(rows after ``since``, rows in all) of the errors table; (0, 0) without one."""
    if conn is None:
        return 0, 0
    try:
        row = conn.execute("SELECT count(CASE WHEN at > ? THEN 1 END), count(*) FROM errors", (since,)).fetchone()
    except sqlite3.Error:
        return 0, 0
    return int(row[0] or 0), int(row[1] or 0)


def report(paths: Paths, conn: sqlite3.Connection | None, limit: int = 20) -> dict[str, Any]:
    """The errors not yet marked seen: count, count per kind, the most recent entries."""
    since = seen_at(conn)
    logged = log_entries(paths, since)
    counted, total = _table(conn, since)
    kinds: dict[str, int] = {}
    for entry in logged:
        kinds[str(entry.get("kind"))] = kinds.get(str(entry.get("kind")), 0) + 1
    recent = [{k: e.get(k) for k in ("at", "event", "kind", "session_id", "message")} for e in logged[-limit:]]
    return {
        "unseen": max(len(logged), counted),
        "seen_at": since or None,
        "by_kind": dict(sorted(kinds.items())),
        "recent": recent,
        "total_recorded": total,
        "error_log": paths.error_log,
    }


def mark_seen(conn: sqlite3.Connection, at: float | None = None) -> float:
    """Mark every error up to ``at`` (now) as seen; the caller holds a write transaction."""
    at = time.time() if at is None else at
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (SEEN_KEY, repr(at)))
    return at
