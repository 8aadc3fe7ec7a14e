"""stdin bytes -> a validated, read-only payload record.

Claude Code's payloads grow from version to version, so unknown keys are kept
(``payload.raw``) and optional keys may be missing. Fields we rely on are
type-checked; a payload that fails gets a one-line :class:`PayloadError`.
Newer clients also send events we have no handler for: such a payload is not
bad input but an :class:`UnknownEvent`, which the runner accepts and logs.
"""

from __future__ import annotations

import json

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Fields every event may carry: name -> (type, required).
_COMMON: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "session_id": (str, True),
    "hook_event_name": (str, True),
    "transcript_path": (str, False),
    "cwd": (str, False),
    "permission_mode": (str, False),
    "prompt_id": (str, False),
    "agent_id": (str, False),
    "agent_type": (str, False),
}
_TOOL = {
    "tool_name": (str, True),
    "tool_input": (dict, True),
    "tool_use_id": (str, False),
}
_NUM = (int, float)

# Event name -> its own fields on top of the common ones.
EVENT_FIELDS: dict[str, dict[str, tuple[type | tuple[type, ...], bool]]] = {
    "SessionStart": {"source": (str, False), "model": (str, False)},
    "SessionEnd": {"reason": (str, False)},
    "UserPromptSubmit": {"prompt": (str, False)},
    "PreToolUse": dict(_TOOL),
    "PostToolUse": {**_TOOL, "duration_ms": (_NUM, False)},
    "PostToolUseFailure": {**_TOOL, "error": (str, False), "is_interrupt": (bool, False), "duration_ms": (_NUM, False)},
    "PreCompact": {"trigger": (str, False), "custom_instructions": (str, False)},
    "Stop": {"stop_hook_active": (bool, False), "last_assistant_message": (str, False)},
    "Notification": {"message": (str, False), "title": (str, False), "notification_type": (str, False)},
}

_TYPE_NAMES = {str: "a string", dict: "an object", bool: "a boolean", _NUM: "a number"}


class PayloadError(ValueError):
    """The stdin payload is not one we can act on; the message is one line."""


class UnknownEvent(PayloadError):
    """A well-formed payload for an event this package has no handler for (not an error)."""

    def __init__(self, event: str, session_id: str | None) -> None:
        super().__init__(f"no agent-hooks handler for {event} events; accepted, nothing done")
        self.event = event
        self.session_id = session_id


class Payload:
    """One hook call's input. ``raw`` holds every key, known or not."""

    __slots__ = ("raw", "event")

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.event: str = raw["hook_event_name"]

    def get(self, key: str, default: Any = None) -> Any:
        value = self.raw.get(key)
        return default if value is None else value

    @property
    def session_id(self) -> str:
        return self.raw["session_id"]

    @property
    def cwd(self) -> str:
        return self.raw.get("cwd") or ""

    @property
    def transcript_path(self) -> str:
        return self.raw.get("transcript_path") or ""

    @property
    def tool_name(self) -> str:
        return self.raw.get("tool_name") or ""

    @property
    def tool_input(self) -> dict[str, Any]:
        return self.raw.get("tool_input") or {}

    @property
    def tool_use_id(self) -> str | None:
        return self.raw.get("tool_use_id") or None


def parse(data: bytes, expected_event: str, max_bytes: int) -> Payload:
    """Decode and validate one payload for ``expected_event``."""
    if len(data) > max_bytes:
        raise PayloadError(f"payload of {len(data)} bytes is over the {max_bytes}-byte limit")
    if not data.strip():
        raise PayloadError("empty stdin: expected one JSON object")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadError(f"stdin is not valid UTF-8 (byte {exc.start})") from None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise PayloadError(f"stdin is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise PayloadError(f"expected a JSON object, got {type(raw).__name__ if raw is not None else 'null'}")
    return validate(raw, expected_event)


def validate(raw: dict[str, Any], expected_event: str) -> Payload:
    event = raw.get("hook_event_name")
    if not isinstance(event, str):
        raise PayloadError("missing hook_event_name")
    if event != expected_event and event not in EVENT_FIELDS:
        session_id = raw.get("session_id")
        raise UnknownEvent(event, session_id if isinstance(session_id, str) else None)
    if event != expected_event:
        raise PayloadError(f"this is the {expected_event} hook, but the payload is for {event}")
    fields = EVENT_FIELDS.get(event, {})
    for spec in (_COMMON, fields):
        for name, (kind, required) in spec.items():
            value = raw.get(name)
            if value is None:
                if required:
                    raise PayloadError(f"missing required field {name!r}")
                continue
            if not isinstance(value, kind) or (kind is _NUM and isinstance(value, bool)):
                raise PayloadError(f"field {name!r} must be {_TYPE_NAMES.get(kind, kind)}, got {type(value).__name__}")
    if not raw["session_id"].strip():
        raise PayloadError("empty session_id")
    return Payload(raw)
