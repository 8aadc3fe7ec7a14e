"""The event table: every hook we ship, one row each, in the order it is written.

A new hook is one more row here (and its console script in pyproject.toml);
install, uninstall, the template, doctor and the tests all read this table.
"""

from __future__ import annotations

from typing import NamedTuple


class Hook(NamedTuple):
    """One row: the Claude Code event, our executable for it, and the matcher we write (None = no matcher)."""

    event: str
    executable: str
    matcher: str | None


# Matchers only where Claude Code takes them (reference §6.3); None = every value.
HOOKS: tuple[Hook, ...] = (
    Hook("SessionStart", "agent-hook-session-start", None),  # every source, new ones too (docs/settings.md)
    Hook("UserPromptSubmit", "agent-hook-user-prompt-submit", None),
    Hook("PreToolUse", "agent-hook-pre-tool-use", "*"),
    Hook("PostToolUse", "agent-hook-post-tool-use", "*"),
    Hook("PostToolUseFailure", "agent-hook-post-tool-use-failure", "*"),
    Hook("Notification", "agent-hook-notification", None),
    Hook("PreCompact", "agent-hook-pre-compact", None),
    Hook("Stop", "agent-hook-stop", None),
    Hook("SessionEnd", "agent-hook-session-end", None),
    # Newer clients (2.1.330): subagents, the waiting states, compaction done.
    Hook("SubagentStart", "agent-hook-subagent-start", None),
    Hook("SubagentStop", "agent-hook-subagent-stop", None),
    Hook("StopFailure", "agent-hook-stop-failure", None),
    Hook("PermissionRequest", "agent-hook-permission-request", "*"),
    Hook("PermissionDenied", "agent-hook-permission-denied", "*"),
    Hook("PostCompact", "agent-hook-post-compact", None),
    # 2.1.332: an MCP server asking the person is a session waiting on a person (features/waiting.py).
    Hook("Elicitation", "agent-hook-elicitation", None),
    Hook("ElicitationResult", "agent-hook-elicitation-result", None),
)
EXECUTABLES = [h.executable for h in HOOKS]
EVENT_OF = {h.executable: h.event for h in HOOKS}
# Executables we once shipped and no longer do: still ours, so install and uninstall take them out.
RETIRED_EXECUTABLES: list[str] = []
KNOWN_EXECUTABLES = frozenset(EXECUTABLES + RETIRED_EXECUTABLES)
