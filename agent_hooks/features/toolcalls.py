"""Tool calls: one row per call, opened by PreToolUse and closed by PostToolUse(Failure).

A row carries the SHA-256 of the canonical input (loop detection compares
these) and of the output (the polling guard's "no progress" compares those),
the outcome, duration and error. Each session keeps its newest
``runtime.max_tool_calls_per_session`` rows; older ones are pruned in batches.
"""

from __future__ import annotations

import sqlite3

from agent_hooks.hashing import digest
from agent_hooks.output import one_line
from agent_hooks.payload import Payload

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PENDING, SUCCESS, FAILURE, DENIED = "pending", "success", "failure", "denied"
# Tools that write a file named by tool_input.file_path (identity sync, memory indexing).
WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit"})
PRUNE_EVERY = 256
MAX_ERROR_CHARS = 1000
# What a tool call ran, as the board and `session show` show it: the first of these input fields.
SHOWN_KEYS = ("command", "file_path", "notebook_path", "url", "pattern", "query", "path", "skill", "prompt",
              "description")
MAX_COMMAND_CHARS = 300


def shown_input(tool_input: object, limit: int = MAX_COMMAND_CHARS) -> str | None:
    """What a call ran, on one line and clipped: its command, else the file, URL, pattern... it names."""
    if not isinstance(tool_input, dict):
        return None
    for key in SHOWN_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return one_line(value, limit)
    return None


def start(conn: sqlite3.Connection, payload: Payload, at: float, config: dict[str, Any],
          input_hash: str | None = None, outcome: str = PENDING, decision: str | None = None,
          rule: str | None = None, reason: str | None = None, poll_rule: str | None = None,
          poll_key: str | None = None) -> int:
    """Open the row for a PreToolUse call (with the guards' decision); returns its id."""
    cur = conn.execute(
        "INSERT INTO tool_calls (session_id, tool_use_id, tool_name, input_hash, outcome, decision, rule,"
        " reason, poll_rule, poll_key, agent_id, started_at, command) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (payload.session_id, payload.tool_use_id, payload.tool_name,
         input_hash or digest(payload.tool_input), outcome, decision, rule, reason, poll_rule, poll_key,
         payload.get("agent_id"), at, shown_input(payload.tool_input)),
    )
    rid = int(cur.lastrowid or 0)
    # The guards' totals ride on the counter update: no extra statement per call.
    row = conn.execute(
        "UPDATE sessions SET tool_calls = tool_calls + 1, last_decision = coalesce(:d, last_decision),"
        " guard_warned = guard_warned + coalesce(:d = 'warn', 0), guard_denied = guard_denied + coalesce(:d = 'deny', 0),"
        " last_guard_id = CASE WHEN :d IN ('warn', 'deny') THEN :rid ELSE last_guard_id END"
        " WHERE session_id = :sid RETURNING tool_calls",
        {"d": decision, "rid": rid, "sid": payload.session_id},
    ).fetchone()
    if row and row[0] % PRUNE_EVERY == 0:
        prune(conn, payload.session_id, int(config["runtime"]["max_tool_calls_per_session"]))
    return rid


def redecide(conn: sqlite3.Connection, payload: Payload, decision: str, rule: str | None,
             reason: str | None) -> None:
    """A user handler's deny of a call the guards let through (its row, opened by :func:`start`):
    the row is marked denied, so the loop history leaves it out like a guard's deny. (A handler's
    warning is not recorded: the loop guard reads ``warn`` rows as "this loop was warned about".)"""
    conn.execute(
        "UPDATE tool_calls SET decision = ?, rule = ?, reason = ?,"
        " outcome = CASE WHEN ? = 'deny' THEN 'denied' ELSE outcome END"
        " WHERE id = (SELECT max(id) FROM tool_calls WHERE session_id = ? AND coalesce(tool_use_id, '') = ?)",
        (decision, rule, reason, decision, payload.session_id, payload.tool_use_id or ""),
    )


def output_digest(payload: Payload, ok: bool) -> str:
    """The hash "no progress" compares. Computed before the write transaction:
    a large tool response takes milliseconds to hash, and the store's lock is shared."""
    if ok:
        return digest(payload.get("tool_response"))
    # A failing poll (`gh pr checks` exits non-zero while checks are pending)
    # makes no progress either: its error is its output.
    return digest({"error": _error(payload)})


def _error(payload: Payload) -> str:
    return str(payload.get("error", ""))[:MAX_ERROR_CHARS] or "failed"


def finish(conn: sqlite3.Connection, payload: Payload, at: float, config: dict[str, Any], ok: bool,
           output_hash: str) -> None:
    """Close the call's row with its outcome; insert it if PreToolUse never saw it."""
    duration = payload.get("duration_ms")
    duration = int(duration) if duration is not None else None
    error = None if ok else _error(payload)
    outcome = SUCCESS if ok else FAILURE
    updated = 0
    if payload.tool_use_id:
        updated = conn.execute(
            # A row the guards denied stays denied: that call never ran.
            "UPDATE tool_calls SET outcome = CASE outcome WHEN 'denied' THEN outcome ELSE ? END,"
            " output_hash = ?, error = ?, duration_ms = ?, ended_at = ?"
            " WHERE session_id = ? AND tool_use_id = ?",
            (outcome, output_hash, error, duration, at, payload.session_id, payload.tool_use_id),
        ).rowcount
    if not updated:
        rid = start(conn, payload, at, config, outcome=outcome)
        conn.execute(
            "UPDATE tool_calls SET output_hash = ?, error = ?, duration_ms = ?, ended_at = ? WHERE id = ?",
            (output_hash, error, duration, at, rid),
        )


def prune(conn: sqlite3.Connection, session_id: str, keep: int) -> None:
    row = conn.execute(
        "SELECT id FROM tool_calls WHERE session_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?",
        (session_id, keep),
    ).fetchone()
    if row:
        conn.execute("DELETE FROM tool_calls WHERE session_id = ? AND id <= ?", (session_id, row[0]))
