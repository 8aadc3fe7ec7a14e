"""The only writer of stdout: an Outcome becomes one JSON object, plain text, or nothing.

Shapes follow the hook protocol (reference Part B §4): ``additionalContext``
always inside ``hookSpecificOutput`` with ``hookEventName``; PreToolUse decides
with ``permissionDecision``; UserPromptSubmit, Stop and PostToolUse block with
top-level ``decision: "block"`` and ``reason``; PreCompact speaks plain stdout.
"""

from __future__ import annotations

import json
import sys

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# True in the command transport (runner.run): fd 1 is the pipe the answer goes out on, so
# user handlers are kept off it (handlers/run.py). The resident server leaves it False.
STDOUT_IS_PROTOCOL = False
# The thread that writes the answer there (runner.run's main thread); any other thread's print is not ours.
ANSWER_THREAD: int | None = None
# Once user handlers ran in the command transport: the private copy of the pipe the answer goes out
# on (handlers/run.py). emit() writes there, whatever a handler did to sys.stdout.
ANSWER_STREAM: Any = None

# Claude Code replaces longer strings with a file path and a preview.
MAX_CONTEXT_CHARS = 9500

# Events whose hookSpecificOutput may carry additionalContext.
_CONTEXT_EVENTS = frozenset(
    {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure"}
)
# Events that block with top-level decision/reason.
_BLOCK_EVENTS = frozenset({"UserPromptSubmit", "PostToolUse", "Stop", "PreCompact"})


class Outcome:
    """What a hook decided. Empty means: say nothing, exit 0."""

    __slots__ = ("context", "deny_reason", "block_reason", "plain", "updated_input", "permission", "hold",
                 "stop_reason")

    def __init__(self) -> None:
        self.context: list[str] = []
        self.deny_reason: str | None = None  # PreToolUse permissionDecision deny
        self.block_reason: str | None = None  # decision: block elsewhere
        self.plain: list[str] = []  # PreCompact stdout
        self.updated_input: dict[str, Any] | None = None  # PreToolUse: the whole new tool_input
        self.permission: dict[str, Any] | None = None  # PermissionRequest: hookSpecificOutput.decision
        # An approval to wait for before answering (features/approvals.Hold): the transport waits.
        self.hold: Any = None
        # PreToolUse: stop the turn too (top-level continue: false; the reason is shown to the user).
        self.stop_reason: str | None = None

    def add_context(self, text: str) -> None:
        if text:
            self.context.append(text)

    def deny(self, reason: str) -> None:
        if self.deny_reason is None:
            self.deny_reason = reason

    def block(self, reason: str) -> None:
        if self.block_reason is None:
            self.block_reason = reason

    def say(self, text: str) -> None:
        if text:
            self.plain.append(text)


def one_line(text: object, limit: int) -> str:
    """``text`` with its white space folded to single spaces, cut to ``limit`` chars with "…"."""
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: max(0, limit - 1)] + "…"


def _clip(text: str, limit: int = MAX_CONTEXT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 20] + "\n[… truncated]"


def render(event: str, outcome: Outcome) -> str | None:
    """The exact stdout for ``outcome`` (None: print nothing)."""
    if event == "PreCompact":
        if outcome.block_reason:
            return json.dumps({"decision": "block", "reason": outcome.block_reason})
        if not outcome.plain:
            return None
        text = _clip("\n\n".join(outcome.plain))
        # Claude Code parses stdout that starts with "{" as the protocol: a handler's context that is
        # a JSON object ({"decision": "block", ...}) must stay text, not become a decision.
        return f"Context:\n{text}" if text.lstrip().startswith("{") else text
    doc: dict[str, Any] = {}
    specific: dict[str, Any] = {}
    if event == "PreToolUse" and outcome.deny_reason:
        specific["permissionDecision"] = "deny"
        specific["permissionDecisionReason"] = _clip(outcome.deny_reason)
    elif event == "PreToolUse" and outcome.updated_input is not None:
        specific["updatedInput"] = outcome.updated_input  # replaces the whole tool_input
    if event == "PermissionRequest" and outcome.permission is not None:
        specific["decision"] = outcome.permission
    if outcome.block_reason and event in _BLOCK_EVENTS:
        doc["decision"] = "block"
        doc["reason"] = _clip(outcome.block_reason)
    if outcome.context and event in _CONTEXT_EVENTS:
        specific["additionalContext"] = _clip("\n\n".join(outcome.context))
    if specific:
        doc["hookSpecificOutput"] = {"hookEventName": event, **specific}
    if event == "PreToolUse" and outcome.stop_reason:
        doc["continue"] = False
        doc["stopReason"] = _clip(outcome.stop_reason)
    # ASCII: a lone surrogate from a payload cannot make the write fail.
    return json.dumps(doc) if doc else None


def for_http(text: str | None) -> str | None:
    """An answer as an http hook's body. Claude Code takes only a JSON object from an http hook (a
    plain-text body is dropped as a hook error: 2.1.197, 2.1.332), and appends PreCompact's body to the
    summary's instructions as it is. So PreCompact's plain text goes as an object holding its lines,
    indented, which reads as the text does; a JSON answer goes unchanged."""
    if text is None or text.startswith("{"):
        return text
    return json.dumps({"instructions": text.split("\n")}, indent=2, ensure_ascii=False)


def emit(text: str | None, stream: Any = None) -> None:
    if text is None:
        return
    stream = stream or ANSWER_STREAM or sys.stdout
    try:
        stream.write(text)
    except UnicodeEncodeError:  # a lone surrogate in plain text (PreCompact): a "?" rather than no answer
        stream.write(text.encode("utf-8", "replace").decode("utf-8"))
    if not text.endswith("\n"):
        stream.write("\n")
    stream.flush()


def warn(message: str, stream: Any = None) -> None:
    """One line on stderr (Claude Code keeps it in its debug log)."""
    stream = stream or sys.stderr
    # Clipped first: a message may quote a megabyte of payload.
    line = " ".join(str(message)[:2000].split())
    try:
        stream.write(f"agent-hooks: {line}\n")
        stream.flush()
    except (OSError, ValueError):
        pass
