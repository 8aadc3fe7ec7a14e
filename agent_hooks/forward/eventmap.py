"""Claude Code hook event -> command-center contract event and body (stdlib only).

The map is configuration (``forward.event_map``); this module only applies it
and writes the short ``metadata`` string: the tool name and a one-line
summary. Raw tool input, prompts and messages go out only when
``forward.include_raw`` is set.
"""

from __future__ import annotations

import json

from agent_hooks.output import one_line
from agent_hooks.payload import Payload

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

AGENT_TYPE = "claude-code"

RUNNING, AWAITING_REVIEW, COMPLETED, FAILED, IDLE = "running", "awaiting_review", "completed", "failed", "idle"

# The contract's events and the state each moves a session to (the contract's table).
CONTRACT_EVENTS: dict[str, str] = {
    "start": RUNNING,
    "running": RUNNING,
    "to_in_progress": RUNNING,
    "tool_use": RUNNING,
    "prompt_ready": AWAITING_REVIEW,
    "to_review": AWAITING_REVIEW,
    "awaiting_review": AWAITING_REVIEW,
    "exit": COMPLETED,
    "completed": COMPLETED,
    "exit_error": FAILED,
    "failed": FAILED,
    "requeue": IDLE,
}

HEARTBEAT_EVENT = "tool_use"


def contract_event(config: dict[str, Any], hook_event: str) -> str | None:
    """The contract event this hook event is forwarded as, or None."""
    return config["forward"]["event_map"].get(hook_event) or None


def problems(config: dict[str, Any]) -> list[str]:
    """What is wrong with the forward.event_map (for ``queue`` and ``doctor``)."""
    from agent_hooks.payload import EVENT_FIELDS

    out = []
    event_map = config["forward"]["event_map"]
    if not isinstance(event_map, dict):
        return [f"forward.event_map must be a table, got {type(event_map).__name__}"]
    for hook_event, event in event_map.items():
        if hook_event not in EVENT_FIELDS:
            out.append(f"forward.event_map: {hook_event!r} is not a hook event we handle")
        if not isinstance(event, str):
            out.append(f"forward.event_map.{hook_event} must be a string, got {event!r}")
        elif event and event not in CONTRACT_EVENTS:
            out.append(f"forward.event_map.{hook_event} = {event!r} is not an event of the contract "
                       "(the server answers 400 and the event goes to the dead letter)")
    return out


def tmux_session(env: Any) -> str | None:
    return env.get("OPTIMALOS_SESSION_TMUX") or env.get("AGENT_HOOKS_TMUX_SESSION") or None


def _raw(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def metadata(payload: Payload, config: dict[str, Any]) -> str:
    """A short description: tool name and outcome, source, reason; never raw input unless configured."""
    fwd = config["forward"]
    limit = max(16, int(fwd["metadata_max_chars"]))
    ev = payload.event
    raw: Any = None
    if ev in ("PreToolUse", "PostToolUse", "PostToolUseFailure"):
        text = payload.tool_name or "tool"
        if ev == "PostToolUse":
            text += ": ok"
        elif ev == "PostToolUseFailure":
            text += ": interrupted" if payload.get("is_interrupt") else ": failed"
        duration = payload.get("duration_ms")
        if isinstance(duration, (int, float)) and not isinstance(duration, bool):
            text += f" in {int(duration)} ms"
        raw = payload.tool_input
    elif ev == "SessionStart":
        text = f"session {payload.get('source', 'start')}"
    elif ev == "SessionEnd":
        text = f"session ended: {payload.get('reason', 'other')}"
    elif ev == "UserPromptSubmit":
        prompt = payload.get("prompt", "")
        text = f"prompt submitted ({len(prompt)} chars)"
        raw = prompt or None
    elif ev == "Notification":
        kind = payload.get("notification_type", "attention")
        # The waiting states by name: a person is needed, or the session is idle.
        text = {"permission_prompt": "needs input: permission prompt", "idle_prompt": "awaiting: idle prompt"}.get(
            kind, f"notification: {kind}")
        raw = payload.get("message")
    elif ev == "Stop":
        text = "turn ended"
        raw = payload.get("last_assistant_message")
    elif ev == "PreCompact":
        text = f"compaction: {payload.get('trigger', 'auto')}"
    elif ev == "PermissionRequest":
        from agent_hooks.features.waiting import tool_asked

        text = f"needs input: {tool_asked(payload) if fwd['include_raw'] else payload.get('tool_name', 'tool')}"
    elif ev == "StopFailure":
        text = f"error: {payload.get('error', 'unknown')}"
        raw = payload.get("last_assistant_message")
    elif ev in ("SubagentStart", "SubagentStop"):
        text = f"subagent {'started' if ev == 'SubagentStart' else 'stopped'}: {payload.get('agent_type') or 'agent'}"
    elif ev == "PostCompact":
        text = f"compacted: {payload.get('trigger', 'auto')}"
    elif ev == "Elicitation":
        from agent_hooks.features.waiting import elicitation_asked

        text = f"needs input: {elicitation_asked(payload) if fwd['include_raw'] else payload.get('mcp_server_name') or 'MCP server'}"
    elif ev == "ElicitationResult":
        text = f"answered: {payload.get('mcp_server_name') or 'MCP server'} ({payload.get('action') or 'answered'})"
    elif ev == "PermissionDenied":
        text = f"permission denied: {payload.get('tool_name', 'tool')}"
    else:
        text = ev
    if fwd["include_raw"] and raw:
        text += " " + _raw(raw)
    return one_line(text, limit)


def build_body(payload: Payload, event: str, env: Any, config: dict[str, Any],
               recorded_tmux: str | None = None) -> dict[str, Any] | None:
    """The JSON body to send, or None when this session is not forwarded (no tmux name).
    ``recorded_tmux``: the name recorded for a session started in tmux without our variable."""
    tmux = tmux_session(env) or recorded_tmux
    if tmux is None and not config["forward"]["forward_without_tmux"]:
        return None
    body: dict[str, Any] = {}
    if tmux:
        body["tmux_session"] = tmux
    else:
        body["session_id"] = payload.session_id
    body["event"] = event
    body["metadata"] = metadata(payload, config)
    body["agent_type"] = AGENT_TYPE
    return body
