"""Cancellation: a session, or the task it belongs to, was cancelled with `agent-hook cancel`.

From the very next hook call, PreToolUse denies every tool call and
UserPromptSubmit blocks every prompt, with the reason. The mark lives in the
store (sessions.cancelled_at / tasks.state = 'cancelled'), so there is no
polling interval and no network: the check is part of the one read that
:func:`read_snapshot` makes anyway.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys

from agent_hooks.features.verdict import DENY, Verdict
from agent_hooks.output import one_line

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RULE_SESSION = "cancel.session"
RULE_TASK = "cancel.task"


class Snapshot:
    """The session's row as the guards need it (read after sessions.touch)."""

    __slots__ = ("session_cancelled_at", "session_cancel_reason", "task_id", "task_state",
                 "task_cancel_reason", "task_description", "guards_since_id", "task_cancelled_at")

    def __init__(self, session_cancelled_at: float | None = None, session_cancel_reason: str | None = None,
                 task_id: str | None = None, task_state: str | None = None, task_cancel_reason: str | None = None,
                 task_description: str | None = None, guards_since_id: int = 0,
                 task_cancelled_at: float | None = None) -> None:
        self.session_cancelled_at = session_cancelled_at
        self.session_cancel_reason = session_cancel_reason
        self.task_id = task_id
        self.task_state = task_state
        self.task_cancel_reason = task_cancel_reason
        self.task_description = task_description
        self.guards_since_id = guards_since_id
        self.task_cancelled_at = task_cancelled_at


def read_snapshot(conn: sqlite3.Connection, session_id: str) -> Snapshot:
    """One primary-key read: the session's cancel mark, its task, its guard-history start."""
    row = conn.execute(
        "SELECT s.cancelled_at, s.cancel_reason, s.task_id, t.state, t.cancel_reason, t.description,"
        " coalesce(s.guards_since_id, 0), t.cancelled_at"
        " FROM sessions s LEFT JOIN tasks t ON t.task_id = s.task_id WHERE s.session_id = ?",
        (session_id,),
    ).fetchone()
    return Snapshot(*row) if row else Snapshot()


# `agent-hook task progress TASK_ID '<report>'` alone on the line: a quoted text with
# no way out of the quotes ($, backtick, backslash in double quotes), nothing chained,
# blanks only as separators (a newline would start a second command). Matched only for
# a cancelled session's Bash call (re caches the compiled pattern).
_REPORT = (
    r"""[ \t]*(?P<exe>[^\s'"]*)[ \t]+task[ \t]+progress[ \t]+(?P<task>[\w.:@-]+|'[^']*'|"[^"$`\\]*")[ \t]+"""
    r"""(?:'[^']*'|"[^"$`\\]*")[ \t]*"""
)


def _our_cli(exe: str) -> bool:
    """The bare command name, or the absolute path of the CLI installed beside this Python;
    not ./agent-hook or any other file of that name the agent could have planted."""
    return exe == "agent-hook" or exe == os.path.join(os.path.dirname(sys.executable), "agent-hook")


def is_progress_report(snapshot: Snapshot, tool_name: str | None, tool_input: dict[str, Any] | None) -> bool:
    """The one call a cancelled session may still make: its report on its own task."""
    if tool_name != "Bash" or not snapshot.task_id or not isinstance(tool_input, dict):
        return False
    command = tool_input.get("command")
    if not isinstance(command, str) or "\n" in command or "\r" in command:
        return False
    m = re.fullmatch(_REPORT, command)
    return m is not None and _our_cli(m.group("exe")) and m.group("task").strip("'\"") == snapshot.task_id


# `agent-hook task done TASK [--note '<text>']` and `agent-hook task blocked TASK '<why>'`: how a
# persisting task ends (features/persist.py). Same shape rules as the report above.
_QUOTED = r"""(?:'[^']*'|"[^"$`\\]*")"""
_FINISH = (
    r"""[ \t]*(?P<exe>[^\s'"]*)[ \t]+task[ \t]+(?:done[ \t]+(?P<done>[\w.:@-]+|'[^']*'|"[^"$`\\]*")"""
    r"""(?:[ \t]+--note[ \t]+""" + _QUOTED + r""")?|blocked[ \t]+(?P<blocked>[\w.:@-]+|'[^']*'|"[^"$`\\]*")"""
    r"""[ \t]+""" + _QUOTED + r""")[ \t]*"""
)


def is_finish_command(snapshot: Snapshot, tool_name: str | None, tool_input: dict[str, Any] | None) -> bool:
    """`task done` / `task blocked` on the session's own task: allowed whatever the guards say."""
    if tool_name != "Bash" or not snapshot.task_id or not isinstance(tool_input, dict):
        return False
    command = tool_input.get("command")
    if not isinstance(command, str) or "\n" in command or "\r" in command:
        return False
    m = re.fullmatch(_FINISH, command)
    if not m or not _our_cli(m.group("exe")):
        return False
    return (m.group("done") or m.group("blocked") or "").strip("'\"") == snapshot.task_id


def decide(snapshot: Snapshot, config: dict[str, Any], tool_name: str | None = None,
           tool_input: dict[str, Any] | None = None) -> Verdict | None:
    """Deny when the session or its task is cancelled; None otherwise. Pure.

    ``tool_name``/``tool_input`` (PreToolUse) let the progress report through.
    """
    cfg = config["cancel"]
    if not cfg.get("enabled", True):
        return None
    allow_report = bool(cfg.get("allow_progress_report", True)) and bool(snapshot.task_id)
    if allow_report and is_progress_report(snapshot, tool_name, tool_input):
        return None
    if snapshot.task_id and snapshot.task_state == "cancelled":
        what = f"Task {snapshot.task_id!r}"
        if snapshot.task_description:
            what += f" ({one_line(snapshot.task_description, 120)})"
        reason, rule = snapshot.task_cancel_reason, RULE_TASK
    elif snapshot.session_cancelled_at is not None:
        what = "This session"
        reason, rule = snapshot.session_cancel_reason, RULE_SESSION
    else:
        return None
    why = one_line(reason, 300) or "no reason given"
    message = f"{what} was cancelled by the operator. Reason: {why}. {cfg.get('instructions', '')}".strip()
    if allow_report:
        message += (f" To leave the report on the task, run exactly: agent-hook task progress "
                    f"{snapshot.task_id} '<your report>' (the only command still allowed).")
    return Verdict(DENY, rule, message)


def for_person(snapshot: Snapshot, session_id: str) -> str | None:
    """What a person who prompts a cancelled session reads (UserPromptSubmit comes from a person,
    not the agent): who stopped it, when, why, and the command that resumes it. None when not cancelled.

    The store does not record which operator cancelled, only that one did (`agent-hook cancel`
    or the command center); the time and the reason are what tell a person which cancel it was.
    """
    import time

    if snapshot.task_id and snapshot.task_state == "cancelled":
        what = f"task {snapshot.task_id}"
        if snapshot.task_description:
            what += f" ({one_line(snapshot.task_description, 120)})"
        what += ", which this session works on"
        at, reason = snapshot.task_cancelled_at, snapshot.task_cancel_reason
        resume = f"agent-hook uncancel --task {_word(snapshot.task_id)}"
    elif snapshot.session_cancelled_at is not None:
        what, at, reason = "this session", snapshot.session_cancelled_at, snapshot.session_cancel_reason
        resume = f"agent-hook uncancel {_word(session_id)}"
    else:
        return None
    when = f" at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(at))}" if at else ""
    why = one_line(reason, 300) or "no reason given"
    return (f"Your prompt was not sent to the agent: an operator cancelled {what}{when}"
            f" (with `agent-hook cancel` or from the command center). Reason: {why}. To resume it, run:"
            f" {resume}, then send your prompt again.")


def _word(text: str) -> str:
    """An id as one shell word a person can paste."""
    if text and all(c.isalnum() or c in "_.:@-" for c in text):
        return text
    import shlex

    return shlex.quote(text)
