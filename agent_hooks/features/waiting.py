"""What a session is waiting on: a person (needs_input), an error, or a prompt (awaiting).

Stored on the session row next to its state: ``state`` becomes ``needs_input``
(a permission dialog is open: Notification ``permission_prompt`` or
PermissionRequest; or an MCP server asks the person a question: Elicitation), ``error`` (StopFailure: the turn ended on an API error) or
``awaiting`` (Notification ``idle_prompt``, as after Stop; SessionStart, for its first prompt;
a UserPromptSubmit that was blocked), with
``waiting_on`` (the same word), ``waiting_detail`` (the tool asked about, or
the error's kind) and ``waiting_since``. The next tool call or prompt makes
the session ``live`` again and clears them (sessions.touch). A session that is
not ``live`` is never shown as stalled (heartbeat.derive).
"""

from __future__ import annotations

import re
import sqlite3

from agent_hooks.output import one_line

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_hooks.payload import Payload

NEEDS_INPUT, ERROR, AWAITING = "needs_input", "error", "awaiting"
# What an ``awaiting`` session waits at, when more than "its next prompt": a new session that has
# had no prompt yet, and a session whose prompt a hook blocked (a cancelled task): it sits at its
# prompt, not working, though no Stop came.
FIRST_PROMPT = "its first prompt"
PROMPT_BLOCKED = "its prompt was blocked"
WAITING_STATES = (NEEDS_INPUT, ERROR)
# "Claude needs your permission to use Bash" (the permission_prompt message).
_TOOL_IN_MESSAGE = re.compile(r"permission to use ([\w.:-]+)")


def from_notification(payload: Payload) -> tuple[str, str | None] | None:
    """(state, detail) a Notification puts the session in, or None (others change nothing)."""
    kind = payload.get("notification_type")
    if kind == "permission_prompt":
        m = _TOOL_IN_MESSAGE.search(payload.get("message", ""))
        return NEEDS_INPUT, m.group(1) if m else None
    if kind == "idle_prompt":
        return AWAITING, None
    return None


def tool_asked(payload: Payload) -> str:
    """'Bash: uv run pytest -q' for a PermissionRequest (the tool and a short view of its input)."""
    name = payload.get("tool_name") or "tool"
    tool_input = payload.get("tool_input") or {}
    shown = ""
    if isinstance(tool_input, dict):
        for key in ("command", "file_path", "url", "pattern", "description"):
            if isinstance(tool_input.get(key), str):
                shown = tool_input[key]
                break
    return one_line(f"{name}: {shown}" if shown else name, 200)


def elicitation_asked(payload: Payload) -> str:
    """'asker: Which database should the service use?' for an Elicitation (the MCP server and its question)."""
    server = payload.get("mcp_server_name")
    question = payload.get("message")
    shown = f"{server}: {question}" if server and question else (server or question or "an MCP server")
    return one_line(f"question from {shown}" if not (server and question) else shown, 200)


def elicitation_answered(payload: Payload) -> str:
    """'asker: cancel' for an ElicitationResult (accept, decline or cancel)."""
    return one_line(f"{payload.get('mcp_server_name') or 'MCP server'}: {payload.get('action') or 'answered'}", 200)


def mark(conn: sqlite3.Connection, session_id: str, state: str, detail: str | None, at: float) -> None:
    """Put the session in ``state`` waiting on ``detail``; a permission_prompt after a
    PermissionRequest keeps the fuller detail the request gave."""
    # An ended session stays ended but still records it: the client does not wait for StopFailure's
    # hook before SessionEnd's, so under load the end may be recorded first.
    conn.execute(
        "UPDATE sessions SET state = CASE WHEN state = 'ended' THEN state ELSE :state END, waiting_on = :state,"
        " waiting_detail = CASE WHEN waiting_on = :state AND waiting_detail IS NOT NULL AND (:detail IS NULL"
        "  OR substr(waiting_detail, 1, length(:detail)) = :detail) THEN waiting_detail ELSE :detail END,"
        " waiting_since = CASE WHEN waiting_on = :state THEN coalesce(waiting_since, :at) ELSE :at END"
        " WHERE session_id = :sid",
        {"state": state, "detail": detail, "at": at, "sid": session_id},
    )


def clear(conn: sqlite3.Connection, session_id: str) -> None:
    """Nothing is waiting any more (a permission answered or denied)."""
    conn.execute("UPDATE sessions SET waiting_on = NULL, waiting_detail = NULL, waiting_since = NULL"
                 " WHERE session_id = ? AND waiting_on IS NOT NULL", (session_id,))
