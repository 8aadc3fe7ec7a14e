"""The guard fields `status --json` and `session show` add per session.

Its own module below both commands: status.py and sessions.py each import it,
and sessions.py takes ``collect`` from status.py, so the arrows point one way.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_hooks.cli.common import iso

__all__ = ["guard_fields"]


def guard_fields(conn: sqlite3.Connection, session_id: str | None = None) -> dict[str, dict[str, Any]]:
    """Per session: task, cancellation, warned/denied totals, last decision, last guard verdict.

    One read of the session rows (PreToolUse keeps the totals there); the last
    warn/deny is a primary-key lookup.
    """
    fields: dict[str, dict[str, Any]] = {}
    where, args = ("WHERE s.session_id = ?", (session_id,)) if session_id else ("", ())
    for (sid, task_id, s_at, s_reason, t_state, t_reason, t_at, warned, denied, last, g_decision, g_rule,
         g_reason, g_tool, g_at) in conn.execute(
        "SELECT s.session_id, s.task_id, s.cancelled_at, s.cancel_reason, t.state, t.cancel_reason, t.cancelled_at,"
        " s.guard_warned, s.guard_denied, s.last_decision, c.decision, c.rule, c.reason, c.tool_name, c.started_at"
        " FROM sessions s LEFT JOIN tasks t ON t.task_id = s.task_id LEFT JOIN tool_calls c ON c.id = s.last_guard_id "
        + where, args
    ):
        task_cancelled = t_state == "cancelled"
        fields[sid] = {
            "task_id": task_id,
            "cancelled": s_at is not None or task_cancelled,
            "cancelled_by": "task" if task_cancelled else ("session" if s_at is not None else None),
            "cancel_reason": t_reason if task_cancelled else s_reason,
            "cancelled_at": iso(t_at if task_cancelled else s_at),
            "warned": int(warned or 0),
            "denied": int(denied or 0),
            "last_decision": last,
            "last_guard": None if g_decision is None else {
                "decision": g_decision, "rule": g_rule, "reason": g_reason, "tool_name": g_tool, "at": iso(g_at)},
        }
    return fields
