"""Lead awareness: at SessionStart a lead learns what the other live sessions on the host do.

A session is a lead when ``$AGENT_HOOKS_ROLE=lead`` or ``identity.role =
"lead"``; workers get nothing. "Other live sessions" are those not ended and
seen within ``lead.live_window_s``, newest activity first. Each is one short
paragraph (agent, task, state, last activity, newest tool calls), and the
whole block stays within ``lead.context_budget_chars``.
"""

from __future__ import annotations

import sqlite3
import time

from agent_hooks.features import heartbeat, sessions
from agent_hooks.output import one_line

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HEADER = "Other agent sessions live on this host (agent-hooks):"
FOOTER = ("Do not duplicate their work: pick tasks nobody above holds, and coordinate with a session "
          "before touching what it works on.")


def is_lead(env: Any, config: dict[str, Any]) -> bool:
    return str(sessions.role(env, config)).strip().lower() == "lead"


def others(conn: sqlite3.Connection, session_id: str, now: float, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The other live sessions with their task and newest tool calls (indexed reads only)."""
    lcfg = config["lead"]
    rows = conn.execute(
        "SELECT s.session_id, s.agent, s.role, s.state, s.last_seen_at, s.last_event, s.cwd, s.tool_calls,"
        " s.task_id, t.description, t.progress, s.first_prompt, s.tmux_session"
        " FROM sessions s LEFT JOIN tasks t ON t.task_id = s.task_id"
        " WHERE s.last_seen_at >= ? AND s.state != 'ended' AND s.session_id != ?"
        " ORDER BY s.last_seen_at DESC LIMIT ?",
        (now - float(lcfg["live_window_s"]), session_id, int(lcfg["max_sessions"])),
    ).fetchall()
    keys = ("session_id", "agent", "role", "state", "last_seen_at", "last_event", "cwd", "tool_calls",
            "task_id", "description", "progress", "first_prompt", "tmux_session")
    found = []
    for row in rows:
        rec = dict(zip(keys, row, strict=True))
        rec["state"], _ = heartbeat.derive(rec["state"], rec["last_seen_at"], now, heartbeat.stalled_after(config))
        rec["recent"] = [
            {"tool": r[0], "outcome": r[1], "at": r[2], "error": r[3]}
            for r in conn.execute(
                "SELECT tool_name, outcome, started_at, error FROM tool_calls WHERE session_id = ?"
                " ORDER BY id DESC LIMIT ?",
                (rec["session_id"], int(lcfg["recent_tool_calls"])),
            )
        ]
        found.append(rec)
    return found


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 90:
        return f"{seconds}s ago"
    if seconds < 5400:
        return f"{seconds // 60}m ago"
    return f"{seconds // 3600}h ago"


def describe(rec: dict[str, Any], now: float) -> str:
    """One session as a short paragraph."""
    who = rec.get("agent") or "?"
    if rec.get("role") and rec["role"] != "worker":
        who += f" ({rec['role']})"
    head = f"- {who}, session {str(rec['session_id'])[:8]}: {rec['state']}, last activity {_ago(now - (rec['last_seen_at'] or now))}"
    if rec.get("tmux_session"):
        head += f", tmux {rec['tmux_session']}"
    lines = [head]
    if rec.get("task_id") or rec.get("description"):
        task = f"  task {rec['task_id']}" if rec.get("task_id") else "  task"
        if rec.get("description"):
            task += f": {one_line(rec['description'], 160)}"
        if rec.get("progress"):
            task += f" (progress: {one_line(rec['progress'], 80)})"
        lines.append(task)
    elif rec.get("first_prompt"):
        lines.append(f"  goal: {one_line(rec['first_prompt'], 160)}")
    if rec.get("cwd"):
        lines.append(f"  in {one_line(rec['cwd'], 100)}")
    if rec.get("recent"):
        calls = []
        for c in rec["recent"]:
            mark = {"success": "ok", "failure": "failed", "denied": "denied", "pending": "running"}.get(c["outcome"], c["outcome"])
            calls.append(f"{c['tool']} {mark}")
        lines.append(f"  recent tools (newest first, {rec.get('tool_calls') or 0} in all): " + ", ".join(calls))
    return "\n".join(lines)


def render(recs: list[dict[str, Any]], now: float, budget: int) -> str:
    """The block for a lead, at most ``budget`` characters ('' when nobody else is live). Pure."""
    if not recs:
        return ""
    parts = [HEADER]
    used = len(HEADER) + len(FOOTER) + 2
    shown = 0
    for rec in recs:
        para = describe(rec, now)
        more = f"(and {len(recs) - shown} more not shown)"
        if used + len(para) + 1 + len(more) + 1 > budget:
            # Keep the first line of the paragraph when the whole one does not fit.
            para = para.split("\n", 1)[0]
            if used + len(para) + 1 + len(more) + 1 > budget:
                break
        parts.append(para)
        used += len(para) + 1
        shown += 1
    if shown < len(recs):
        parts.append(f"(and {len(recs) - shown} more not shown)")
    parts.append(FOOTER)
    text = "\n".join(parts)
    return text if len(text) <= budget else text[: max(0, budget - 1)] + "…"


def block(conn: sqlite3.Connection, session_id: str, env: Any, config: dict[str, Any],
          now: float | None = None) -> str:
    """The lead's block for this session; '' for workers or when nobody else is live."""
    if not config["lead"]["enabled"] or not is_lead(env, config):
        return ""
    now = time.time() if now is None else now
    return render(others(conn, session_id, now, config), now, int(config["lead"]["context_budget_chars"]))
