"""Subagents: SubagentStart and SubagentStop (clients >= 2.0.43) recorded per session.

A row per (session, agent_id): its type, when it started and stopped, and its
last message (clipped). ``status`` and ``session show`` list a session's
running and finished subagents. Their tool calls already carry ``agent_id``
and keep their own loop windows (features/loops.py).
"""

from __future__ import annotations

import sqlite3

from agent_hooks.output import one_line

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_hooks.payload import Payload

MESSAGE_CHARS = 500


def started(conn: sqlite3.Connection, payload: Payload, at: float) -> None:
    agent_id = payload.get("agent_id")
    if not agent_id:
        return
    conn.execute(
        "INSERT INTO subagents (session_id, agent_id, agent_type, started_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (session_id, agent_id) DO UPDATE SET agent_type = coalesce(nullif(excluded.agent_type, ''),"
        " subagents.agent_type), started_at = coalesce(subagents.started_at, excluded.started_at)",
        (payload.session_id, agent_id, payload.get("agent_type") or None, at),
    )


def stopped(conn: sqlite3.Connection, payload: Payload, at: float) -> None:
    agent_id = payload.get("agent_id")
    if not agent_id:
        return
    message = one_line(payload.get("last_assistant_message", ""), MESSAGE_CHARS) or None
    # A compaction's own subagent stops without ever having started (2.1.330): recorded all the same.
    conn.execute(
        "INSERT INTO subagents (session_id, agent_id, agent_type, stopped_at, last_message) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (session_id, agent_id) DO UPDATE SET stopped_at = excluded.stopped_at,"
        " last_message = excluded.last_message,"
        " agent_type = coalesce(nullif(excluded.agent_type, ''), subagents.agent_type)",
        (payload.session_id, agent_id, payload.get("agent_type") or None, at, message),
    )


def of_session(conn: sqlite3.Connection, session_id: str) -> dict[str, list[dict[str, Any]]]:
    """{"running": [...], "finished": [...]}, newest first."""
    out: dict[str, list[dict[str, Any]]] = {"running": [], "finished": []}
    for agent_id, agent_type, started_at, stopped_at, message in conn.execute(
        "SELECT agent_id, agent_type, started_at, stopped_at, last_message FROM subagents WHERE session_id = ?"
        " ORDER BY coalesce(stopped_at, started_at) DESC", (session_id,)
    ):
        rec = {"agent_id": agent_id, "agent_type": agent_type, "started_at": started_at, "stopped_at": stopped_at,
               "last_message": message}
        out["finished" if stopped_at is not None else "running"].append(rec)
    return out


def counts(conn: sqlite3.Connection) -> dict[str, tuple[int, int]]:
    """session_id -> (running, finished), for `status`."""
    return {sid: (int(running), int(finished)) for sid, running, finished in conn.execute(
        "SELECT session_id, sum(stopped_at IS NULL), sum(stopped_at IS NOT NULL) FROM subagents GROUP BY session_id")}
