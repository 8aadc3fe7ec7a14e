"""What a notification says: who asks (agent, host, task), what (tool and command, clipped, secrets
masked) and the link that opens it on the board (pure, stdlib).

The command is shown as the board's OpenClaw cards show one (agent_hooks.openclaw.frames.safe_view:
``KEY=value`` secrets masked, control characters dropped, one line), after a few more masks for what a
command line carries: ``Authorization: Bearer X``, a URL's ``user:password@``, ``--password X``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from agent_hooks.output import one_line

COMMAND_CHARS = 200
TITLE_CHARS = 120
_MORE_SECRETS = (
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 ***"),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1***@"),
    (re.compile(r"(?i)(--?(?:password|passwd|token|secret|api[-_]?key|auth)(?:=|\s+))\S+"), r"\1***"),
)


@dataclass(frozen=True)
class Message:
    """A notification's words: ``tag`` groups resends of one subject (a push replaces its earlier one)."""

    title: str
    body: str
    url: str
    tag: str


def masked(text: str) -> str:
    for pattern, repl in _MORE_SECRETS:
        text = pattern.sub(repl, text)
    return text


def shown_input(tool_input: Any, limit: int = COMMAND_CHARS) -> str:
    """A tool call's command (or path, URL...) on one line, secrets masked, clipped to ``limit``."""
    from agent_hooks.openclaw.frames import safe_view

    if isinstance(tool_input, dict):
        tool_input = {k: masked(v) if isinstance(v, str) else v for k, v in tool_input.items()}
    elif isinstance(tool_input, str):
        tool_input = masked(tool_input)
    return safe_view(tool_input, limit)


def request_link(board: str, approval_id: str) -> str:
    """The board opened on one request (the board reads ``#request=<id>``)."""
    return f"{board}/#request={quote(approval_id, safe='')}"


def session_link(board: str, card_id: str) -> str:
    """The board opened on one session's page."""
    return f"{board}/#/session/{quote(card_id, safe='')}"


def _who(agent: str | None, host: str | None, task: str | None) -> str:
    parts = [f"agent {agent}" if agent else "a session", f"on {host}" if host else ""]
    if task:
        parts.append(f"(task {task})")
    return " ".join(p for p in parts if p)


def request(row: dict[str, Any], host: str, agent: str | None, task: str | None, board: str,
            reminder: int = 0) -> Message:
    """A request for a person: ``row`` as ``approvals.public`` gives it (tool_input, questions decoded)."""
    kind = row.get("kind")
    tool = str(row.get("tool_name") or "?")
    openclaw = str(row.get("id", "")).startswith("oc-")
    if kind == "question":
        questions = [q.get("question", "") for q in row.get("questions") or [] if isinstance(q, dict)]
        what = "asks: " + masked(" / ".join(str(q) for q in questions))
        headline = "A question for you"
    else:
        what = f"{tool}: {shown_input(row.get('tool_input'))}".rstrip(": ")
        if kind == "gate":
            headline = f"Approval gate {row.get('gate') or ''}".strip()
        elif openclaw:
            headline = "OpenClaw approval"
        else:
            headline = "Permission needed"
    who = _who(agent, host, task)
    again = f" (still waiting, reminder {reminder})" if reminder else ""
    title = one_line(f"{headline}: {who}{again}", TITLE_CHARS)
    link = request_link(board, str(row.get("id")))
    body = f"{one_line(what, COMMAND_CHARS + 40)}\n{who}\nAnswer: {link}"
    return Message(title, body, link, f"request-{row.get('id')}")


_SESSION_WORDS = {
    "failed": "stopped on an error",
    "stalled": "has gone quiet (stalled)",
    "budget": "reached its budget",
    "finished": "finished",
}


def session(kind: str, card: dict[str, Any], board: str) -> Message:
    """A session that failed, stalled, reached its budget or finished: ``card`` as the board has it."""
    who = _who(card.get("agent"), card.get("host"), card.get("task_id"))
    detail = ""
    if kind == "failed" and card.get("waiting_detail"):
        detail = f": {card['waiting_detail']}"
    elif kind == "budget":
        cost = card.get("cost") or {}
        if cost.get("budget_usd"):
            detail = f": ${float(cost.get('spent_usd') or 0):.2f} of ${float(cost['budget_usd']):.2f}"
    elif card.get("current_tool"):
        command = shown_input({"command": card.get("current_command")}) if card.get("current_command") else ""
        detail = f" (last tool {card['current_tool']}{': ' + command if command else ''})"
    label = card.get("label") or card.get("id")
    title = one_line(f"{who} {_SESSION_WORDS.get(kind, kind)}", TITLE_CHARS)
    link = session_link(board, str(card.get("id")))
    body = f"{one_line(str(label) + detail, COMMAND_CHARS + 40)}\n{who}\nOpen: {link}"
    return Message(title, body, link, f"{kind}-{card.get('id')}")


_COST_WORDS = {"budget": "Budget reached", "budget_notice": "Budget nearly spent", "forecast": "Spend forecast"}


def cost_alert(kind: str, message: str, board: str) -> Message:
    """A fleet cost alert (center/ledger.py): its own words, and the board."""
    title = _COST_WORDS.get(kind, "Cost alert")
    return Message(title, f"{one_line(masked(message), 300)}\n{board}/", f"{board}/", f"cost-{kind}")


def test(board: str, host: str) -> Message:
    return Message("agent-hooks: a test notification", f"Sent by `agent-hook notify test` on {host}.\n{board}/",
                   f"{board}/", "test")
