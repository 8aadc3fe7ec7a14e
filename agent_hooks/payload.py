"""stdin bytes -> a validated, read-only payload record.

Claude Code's payloads grow from version to version, so unknown keys are kept
(``payload.raw``) and optional keys may be missing. Fields we rely on are
type-checked; a payload that fails gets a one-line :class:`PayloadError`.

Bad input that can still be acted on is repaired, not refused, so the call is
recorded; each repair is one phrase in ``payload.notes``, which the
runner says on stderr and counts as ``bad_input``:

* a lone surrogate (``"\\ud83d"``, half an emoji: valid JSON that UTF-8 and
  SQLite cannot take) becomes U+FFFD, anywhere in the payload;
* containers nested deeper than :data:`MAX_DEPTH` are replaced by a marker
  string (JSON too deep for the parser itself is refused);
* ids longer than :data:`MAX_ID_CHARS` are clipped, with a hash of the whole
  id at the end so two long ids stay two; names are clipped to
  :data:`MAX_NAME_CHARS`;
* a path longer than :data:`MAX_PATH_CHARS`, or holding a NUL, is dropped (a
  clipped path would name another file);
* ``duration_ms`` that is not finite or beyond :data:`MAX_DURATION_MS` is dropped.

Newer clients also send events we have no handler for: such a payload is not
bad input but an :class:`UnknownEvent`, which the runner accepts and logs.
"""

from __future__ import annotations

import json
import re

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
    # Newer clients (reference §1, Part A2); see events/subagent_start.py etc.
    "SubagentStart": {"agent_id": (str, False), "agent_type": (str, False)},
    "SubagentStop": {"stop_hook_active": (bool, False), "agent_id": (str, False), "agent_type": (str, False),
                     "last_assistant_message": (str, False), "agent_transcript_path": (str, False)},
    "StopFailure": {"last_assistant_message": (str, False)},
    "PermissionRequest": {"tool_name": (str, False), "tool_input": (dict, False)},
    "PermissionDenied": {"tool_name": (str, False), "tool_input": (dict, False), "reason": (str, False)},
    "PostCompact": {"trigger": (str, False), "compact_summary": (str, False)},
    # An MCP server asks the person (captured from 2.1.332): a session waiting on a person.
    "Elicitation": {"mcp_server_name": (str, False), "message": (str, False), "mode": (str, False)},
    "ElicitationResult": {"mcp_server_name": (str, False), "mode": (str, False), "action": (str, False)},
}

# Bounds of the fields we store and print.
MAX_ID_CHARS = 256  # Claude Code's ids are 36-char UUIDs or short "toolu_..." strings
MAX_NAME_CHARS = 256  # tool names (mcp__server__tool), event, agent type, model, reasons
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux
MAX_DEPTH = 64  # real tool inputs nest a handful of levels; canonical hashing recurses
MAX_DURATION_MS = 10**12  # about 31 years; SQLite integers end at 2**63
_IDS = ("session_id", "tool_use_id", "agent_id", "prompt_id")
_NAMES = ("tool_name", "agent_type", "permission_mode", "source", "model", "reason", "trigger",
          "notification_type", "title")
_PATHS = ("cwd", "transcript_path")
DEEP_MARKER = "[nested too deeply]"
# A lone surrogate can only come from a \uD800-\uDFFF escape (raw ones are not UTF-8).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")

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

    __slots__ = ("raw", "event", "notes")

    def __init__(self, raw: dict[str, Any], notes: list[str] | None = None) -> None:
        self.raw = raw
        self.event: str = raw["hook_event_name"]
        # What was repaired in this payload (bad input that is still acted on).
        self.notes: list[str] = notes or []

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


def too_large(size: int, max_bytes: int) -> str:
    """The message for a payload over ``runtime.max_payload_bytes`` (also the server's, which stops reading at it)."""
    return f"payload of {size} bytes is over the {max_bytes}-byte limit"


def parse(data: bytes, expected_event: str, max_bytes: int) -> Payload:
    """Decode and validate one payload for ``expected_event``."""
    if len(data) > max_bytes:
        raise PayloadError(too_large(len(data), max_bytes))
    if not data.strip():
        raise PayloadError("empty stdin: expected one JSON object")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadError(f"stdin is not valid UTF-8 (byte {exc.start})") from None
    try:
        raw = json.loads(text)
    except RecursionError:
        raise PayloadError("stdin is JSON nested too deeply to parse") from None
    except ValueError as exc:
        raise PayloadError(f"stdin is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise PayloadError(f"expected a JSON object, got {type(raw).__name__ if raw is not None else 'null'}")
    notes: list[str] = []
    surrogates = _SURROGATE_ESCAPE.search(text) is not None
    # Only a text with MAX_DEPTH openers can nest that deep: most payloads skip the walk.
    if surrogates or text.count("{") + text.count("[") >= MAX_DEPTH:
        flags: set[str] = set()
        raw = _clean(raw, 0, surrogates, flags)
        if "surrogate" in flags:
            notes.append("a lone surrogate (half a character) replaced with U+FFFD")
        if "deep" in flags:
            notes.append(f"values nested deeper than {MAX_DEPTH} levels replaced with {DEEP_MARKER!r}")
    return validate(raw, expected_event, notes)


def fix_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (a valid string is returned as is)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _clean(value: Any, depth: int, surrogates: bool, flags: set[str]) -> Any:
    """A copy of a parsed value with surrogates fixed and nesting clipped (recursion bounded by MAX_DEPTH)."""
    if isinstance(value, str):
        if surrogates:
            fixed = fix_text(value)
            if fixed is not value:
                flags.add("surrogate")
            return fixed
        return value
    if isinstance(value, (dict, list)):
        if depth >= MAX_DEPTH:
            flags.add("deep")
            return DEEP_MARKER
        if isinstance(value, list):
            return [_clean(v, depth + 1, surrogates, flags) for v in value]
        return {_clean(k, depth, surrogates, flags): _clean(v, depth + 1, surrogates, flags)
                for k, v in value.items()}
    return value


def clip_id(value: str, limit: int = MAX_ID_CHARS) -> str:
    """``value`` itself when short enough; else its start and a hash of the whole (distinct ids stay distinct)."""
    if len(value) <= limit:
        return value
    from hashlib import sha256

    tail = "~" + sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return value[: limit - len(tail)] + tail


def _bound(raw: dict[str, Any], notes: list[str]) -> None:
    """Clip ids and names, drop unusable paths and durations (each with a note)."""
    for name in _IDS:
        value = raw.get(name)
        if isinstance(value, str) and len(value) > MAX_ID_CHARS:
            raw[name] = clip_id(value)
            notes.append(f"{name} of {len(value)} chars clipped to {MAX_ID_CHARS}")
    for name in _NAMES:
        value = raw.get(name)
        if isinstance(value, str) and len(value) > MAX_NAME_CHARS:
            raw[name] = value[:MAX_NAME_CHARS]
            notes.append(f"{name} of {len(value)} chars clipped to {MAX_NAME_CHARS}")
    for name in _PATHS:
        value = raw.get(name)
        if isinstance(value, str) and (len(value) > MAX_PATH_CHARS or "\0" in value):
            del raw[name]
            why = "holds a NUL" if "\0" in value else f"is {len(value)} chars (over {MAX_PATH_CHARS})"
            notes.append(f"{name} ignored: it {why}")
    duration = raw.get("duration_ms")
    if isinstance(duration, (int, float)) and not isinstance(duration, bool) and not (
        -MAX_DURATION_MS <= duration <= MAX_DURATION_MS  # also false for NaN
    ):
        del raw["duration_ms"]
        notes.append(f"duration_ms ignored: {str(duration)[:40]} is not a duration")


_EVENT_NAME = re.compile(r"[A-Z][A-Za-z0-9]{1,63}")


def validate(raw: dict[str, Any], expected_event: str, notes: list[str] | None = None) -> Payload:
    """Check ``raw`` against ``expected_event``'s fields; bound what is too long (see the module docstring)."""
    notes = [] if notes is None else notes
    event = raw.get("hook_event_name")
    if not isinstance(event, str):
        raise PayloadError("missing hook_event_name")
    # Only a name shaped like the client's event names is an event we don't know yet; anything else
    # (a lone surrogate, 3 MB of text) is bad input, refused and counted as such.
    if event != expected_event and event not in EVENT_FIELDS and _EVENT_NAME.fullmatch(event):
        session_id = raw.get("session_id")
        raise UnknownEvent(event, session_id if isinstance(session_id, str) else None)
    if event != expected_event:
        shown = event[:60].encode("ascii", "backslashreplace").decode("ascii")
        raise PayloadError(f"this is the {expected_event} hook, but the payload is for {shown}")
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
    _bound(raw, notes)
    return Payload(raw, notes)
