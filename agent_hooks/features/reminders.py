"""Goal reminders across compaction.

PreCompact prints the reminder as plain stdout (the client appends it to the
summarisation instructions, reference Part A), and SessionStart with source
``compact`` injects the same text as additionalContext, so it reaches the
model verbatim after compaction. The goal is the session's task (its
description and progress), else the session's first prompt; open todo items
come from the last TodoWrite in the transcript when there is one.
"""

from __future__ import annotations

import sqlite3

from agent_hooks.features import sessions, transcript
from agent_hooks.payload import Payload

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HEADER = "Goal reminder (agent-hooks), kept across context compaction:"
CARRY_ON = ("After compaction, carry on with this goal from where you left off: do not start over, "
            "do not drop open items, and check what is already done before repeating work.")




def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def render(info: dict[str, Any], todos: list[dict[str, str]] | None, config: dict[str, Any]) -> str:
    """The reminder text ('' when nothing is known about the goal). Pure."""
    rcfg = config["reminder"]
    max_chars = int(rcfg["max_chars"])
    description = info.get("description") or ""
    source = "task" if description else "first prompt"
    goal_text = description or info.get("first_prompt") or ""
    open_items = transcript.open_todos(todos)[: int(rcfg["max_todos"])]
    if not goal_text and not open_items and not info.get("task_id"):
        return ""
    tail: list[str] = []
    if info.get("progress"):
        tail.append(f"Progress so far: {_clip(str(info['progress']), max_chars // 4)}")
    if info.get("task_state") and info["task_state"] != "open":
        tail.append(f"Task state: {info['task_state']}")
    if open_items:
        tail.append("Open todo items:")
        tail.extend(f"- [{t['status']}] {_clip(t['content'], 160)}" for t in open_items)
    tail.append(CARRY_ON)
    head = [HEADER]
    if info.get("task_id"):
        head.append(f"Task id: {info['task_id']}")
    fixed = len("\n".join(head + tail)) + 2
    if goal_text:
        label = "Task" if source == "task" else "Goal (the session's first prompt)"
        room = max(80, max_chars - fixed - len(label) - 2)
        head.append(f"{label}: {_clip(str(goal_text), room)}")
    return _clip("\n".join(head + tail), max_chars)


def transcript_facts(path: str | None, env: Any, config: dict[str, Any]) -> dict[str, Any] | None:
    """Facts from the session's transcript (capped read), None when it cannot be read safely."""
    if not path:
        return None
    loaded = transcript.load(path, env, config, int(config["transcript"]["parse_budget_ms"]))
    if loaded["path"] is None:
        return None
    return transcript.facts(loaded["entries"])


def record_compaction(conn: sqlite3.Connection, payload: Payload, at: float) -> None:
    """Count the compaction on the session (session_events has the trigger)."""
    conn.execute(
        "UPDATE sessions SET compactions = coalesce(compactions, 0) + 1, last_compact_at = ? WHERE session_id = ?",
        (at, payload.session_id),
    )


def reminder(conn: sqlite3.Connection, payload: Payload, env: Any, config: dict[str, Any]) -> str:
    """The reminder for this session (store read + capped transcript read), '' when disabled or unknown."""
    if not config["reminder"]["enabled"]:
        return ""
    info = sessions.with_task(conn, payload.session_id)
    if not info:
        return ""
    found = transcript_facts(payload.transcript_path or info.get("transcript_path"), env, config) or {}
    if not info.get("first_prompt"):
        # Hooks installed mid-session never saw the first prompt; the transcript may have it.
        info["first_prompt"] = found.get("first_prompt")
    return render(info, found.get("todos"), config)
