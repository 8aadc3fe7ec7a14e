"""Errors area: what the hooks failed open on (error log and ``errors`` table)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from agent_hooks.checks import OK, WARN, Check, Context, check
from agent_hooks.cli.common import iso
from agent_hooks.paths import Paths

LAST_CHECK_KEY = "doctor.last_check_at"


@check("errors", order=50)
def errors(ctx: Context) -> list[Check]:
    """Errors logged since the last doctor run."""
    return check_errors(ctx.paths, ctx.conn, ctx.now)


def _log_entries_since(p: Paths, since: float) -> list[dict[str, Any]]:
    entries = []
    for path in (p.error_log + ".1", p.error_log):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(entry, dict) and float(entry.get("ts") or 0) > since:
                        entries.append(entry)
        except OSError:
            pass
    return entries


def check_errors(p: Paths, conn: sqlite3.Connection | None, now: float) -> list[Check]:
    """Errors logged since the last doctor run (error log and ``errors`` table); records this run."""
    since = 0.0
    counted = 0
    if conn is not None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (LAST_CHECK_KEY,)).fetchone()
        since = float(row[0]) if row else 0.0
        counted = conn.execute("SELECT count(*) FROM errors WHERE at > ?", (since,)).fetchone()[0]
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                         "value = excluded.value", (LAST_CHECK_KEY, repr(now)))
            conn.execute("COMMIT")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    logged = _log_entries_since(p, since)
    when = f"since the last check ({iso(since)})" if since else "so far"
    if not logged and not counted:
        return [Check("errors", OK, f"no errors logged {when}")]
    kinds: dict[str, int] = {}
    for entry in logged:
        kinds[str(entry.get("kind"))] = kinds.get(str(entry.get("kind")), 0) + 1
    latest = logged[-1] if logged else {}
    text = f"{max(len(logged), counted)} errors logged {when}"
    if kinds:
        text += " (" + ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())) + ")"
    if latest:
        text += f"; latest: {latest.get('event')}: {str(latest.get('message'))[:160]}"
    return [Check("errors", WARN, text, f"read {p.error_log}; the hooks failed open on these calls",
                  {"log_entries": len(logged), "store_rows": counted})]
