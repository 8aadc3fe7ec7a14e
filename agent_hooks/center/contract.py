"""The OptimalOS command center's ingest contract as pure functions: states, events, validation.

No I/O here. ``ingest.py`` (HTTP) and ``fleet.py`` (the store) call these, and
the unit tests check every event from every state against the contract's table
(shared reference ``ingest-contract.md``):

    start                                   idle -> running
    running, to_in_progress, tool_use       awaiting_review -> running
    prompt_ready, to_review, awaiting_review  running -> awaiting_review
    exit, completed                         running / awaiting_review -> completed
    exit_error, failed                      running / awaiting_review -> failed
    requeue                                 completed / failed -> idle

A transition the table does not allow leaves the state as it is; ingest still
answers 200 (OptimalOS's state hub ignores it), the board's drag answers 409.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

IDLE, RUNNING, AWAITING_REVIEW, COMPLETED, FAILED = "idle", "running", "awaiting_review", "completed", "failed"
STATES: tuple[str, ...] = (IDLE, RUNNING, AWAITING_REVIEW, COMPLETED, FAILED)

_TO_RUNNING = frozenset({AWAITING_REVIEW})
_TO_REVIEW = frozenset({RUNNING})
_TO_END = frozenset({RUNNING, AWAITING_REVIEW})
_TO_IDLE = frozenset({COMPLETED, FAILED})

# event -> (states it may leave, state it moves to). All twelve names of the contract.
EVENTS: dict[str, tuple[frozenset[str], str]] = {
    "start": (frozenset({IDLE}), RUNNING),
    "running": (_TO_RUNNING, RUNNING),
    "to_in_progress": (_TO_RUNNING, RUNNING),
    "tool_use": (_TO_RUNNING, RUNNING),
    "prompt_ready": (_TO_REVIEW, AWAITING_REVIEW),
    "to_review": (_TO_REVIEW, AWAITING_REVIEW),
    "awaiting_review": (_TO_REVIEW, AWAITING_REVIEW),
    "exit": (_TO_END, COMPLETED),
    "completed": (_TO_END, COMPLETED),
    "exit_error": (_TO_END, FAILED),
    "failed": (_TO_END, FAILED),
    "requeue": (_TO_IDLE, IDLE),
}
# What each event means in the contract's own words (shown by the board's legend).
EVENT_MEANINGS: dict[str, str] = {
    "start": "start", "running": "hook.to_running", "to_in_progress": "hook.to_running",
    "tool_use": "agent.tool_use", "prompt_ready": "agent.prompt_ready", "to_review": "hook.to_review",
    "awaiting_review": "hook.to_review", "exit": "process.exit", "completed": "process.exit",
    "exit_error": "process.exit_error", "failed": "process.exit_error", "requeue": "user.requeue",
}

AGENT_TYPES: tuple[str, ...] = ("claude-code", "openclaw", "shell")
DEFAULT_AGENT_TYPE = "claude-code"
# Any event from a tmux session named so registers it and moves it to running.
AUTO_PREFIX = "agent-"

MAX_BODY_BYTES = 64 * 1024


MAX_ID_CHARS = 256
MAX_METADATA_CHARS = 2000
MAX_TEXT_CHARS = 20000
# A JSON text escape of a UTF-16 surrogate (\ud800-\udfff): a pair is one character, a lone one
# is no text at all, and SQLite refuses to store it (UnicodeEncodeError). Only a body holding
# such an escape is checked further (a raw surrogate is invalid UTF-8, refused by the decoder).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def too_large(size: int | str, limit: int = MAX_BODY_BYTES) -> str:
    """The message for a body over the limit (by its Content-Length, or as read)."""
    return f"body too large ({size} bytes, at most {limit})"


class BodyError(ValueError):
    """A request body the contract refuses; the message says why, ``status`` is the answer's
    (400, or 413 for a body over the limit)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def transition(state: str, event: str) -> str | None:
    """The state ``event`` moves a session in ``state`` to, or None when the table does not allow it."""
    sources, target = EVENTS[event]
    return target if state in sources else None


def targets(state: str) -> dict[str, str]:
    """Every state reachable from ``state`` in one event -> the first event (in table order) that does it."""
    out: dict[str, str] = {}
    for event, (sources, target) in EVENTS.items():
        if state in sources and target not in out:
            out[target] = event
    return out


def event_for_state(state: str, wanted: str) -> str | None:
    """The event a drag from ``state`` to the column ``wanted`` sends, or None when no event does it."""
    return targets(state).get(wanted)


@dataclass(frozen=True)
class IngestBody:
    """A valid ``POST /api/hooks/ingest`` body."""

    event: str
    session_id: str | None
    tmux_session: str | None
    metadata: str | None
    agent_type: str
    cost_usd: float | None = None  # the session's running cost, as its host counted it


@dataclass(frozen=True)
class Registration:
    """A valid ``POST /api/hooks/sessions`` body."""

    tmux_session: str | None
    session_id: str | None
    agent_type: str
    label: str | None
    prompt: str | None
    task_id: str | None
    depends_on: tuple[str, ...]


def parse_json(raw: bytes, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """The request body as a JSON object, or BodyError('invalid JSON ...'); ``limit``: a route whose
    bodies may be larger than the contract's (a host's report, agent_hooks.center.report)."""
    if len(raw) > limit:
        raise BodyError(too_large(len(raw), limit))
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise BodyError("invalid JSON: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BodyError(f"invalid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BodyError(f"invalid JSON: expected an object, got {type(doc).__name__}")
    if _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(doc, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise BodyError("invalid JSON: a lone surrogate escape (\\ud800-\\udfff) is not text") from None
    return doc


def _opt_str(doc: dict[str, Any], key: str, limit: int, clip: bool = False) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BodyError(f"{key} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise BodyError(f"{key} must not contain NUL")
    if len(value) > limit:
        if not clip:
            raise BodyError(f"{key} is too long ({len(value)} characters, at most {limit})")
        value = value[:limit]
    return value or None


def _agent_type(doc: dict[str, Any]) -> str:
    value = _opt_str(doc, "agent_type", 64) or DEFAULT_AGENT_TYPE
    if value not in AGENT_TYPES:
        raise BodyError(f"unknown agent_type {value!r} (one of {', '.join(AGENT_TYPES)})")
    return value


def _ids(doc: dict[str, Any]) -> tuple[str | None, str | None]:
    sid = _opt_str(doc, "session_id", MAX_ID_CHARS)
    tmux = _opt_str(doc, "tmux_session", MAX_ID_CHARS)
    if sid is None and tmux is None:
        raise BodyError("tmux_session or session_id is required")
    return sid, tmux


def parse_ingest(raw: bytes) -> IngestBody:
    """Validate an ingest body: 400 (BodyError) for invalid JSON, a missing or unknown event, or neither id."""
    doc = parse_json(raw)
    event = doc.get("event")
    if event is None or event == "":
        raise BodyError("missing event field")
    if not isinstance(event, str):
        raise BodyError(f"event must be a string, got {type(event).__name__}")
    if event not in EVENTS:
        raise BodyError(f"unknown event type {event[:64]!r} (one of {', '.join(EVENTS)})")
    sid, tmux = _ids(doc)
    return IngestBody(event, sid, tmux, _opt_str(doc, "metadata", MAX_METADATA_CHARS, clip=True), _agent_type(doc),
                      _cost(doc))


# The most a session's running cost may say (agent_hooks.center.numbers: sums and rates of it stay finite).
USD_MAX = 1e9


def _cost(doc: dict[str, Any]) -> float | None:
    """The optional ``cost_usd``: a number of dollars from 0 to USD_MAX."""
    value = doc.get("cost_usd")
    if value is None:
        return None
    # NaN fails both comparisons, infinity the second; a huge int is compared exactly, never cast first.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= USD_MAX:
        shown = repr(value) if not isinstance(value, int) or abs(value) < 10**20 else f"a {len(str(value))}-digit number"
        raise BodyError(f"cost_usd must be a number of dollars from 0 to 1e9, got {shown[:60]}")
    return float(value)


def auto_registration(body: IngestBody) -> str | None:
    """How an event for an unknown session registers it, or None (404).

    ``"start"``: a start for an unknown session (by tmux name or session id) creates it, idle, and the
    start then moves it to running. ``"agent"``: any event from a tmux name with the ``agent-`` prefix
    registers it in running, then applies the event.
    """
    if body.event == "start":
        return "start"
    if body.tmux_session and body.tmux_session.startswith(AUTO_PREFIX):
        return "agent"
    return None


def parse_registration(raw: bytes) -> Registration:
    """Validate a ``POST /api/hooks/sessions`` body (400 via BodyError)."""
    doc = parse_json(raw)
    sid, tmux = _ids(doc)
    depends = doc.get("depends_on")
    if depends is None:
        depends = []
    if not isinstance(depends, list) or not all(isinstance(d, str) and d for d in depends):
        raise BodyError("depends_on must be a list of task ids (strings)")
    return Registration(
        tmux_session=tmux, session_id=sid, agent_type=_agent_type(doc),
        label=_opt_str(doc, "label", 500, clip=True), prompt=_opt_str(doc, "prompt", MAX_TEXT_CHARS, clip=True),
        task_id=_opt_str(doc, "task_id", MAX_ID_CHARS), depends_on=tuple(depends[:100]),
    )


def parse_patch(raw: bytes) -> tuple[str, str]:
    """``{"state": S}`` or ``{"event": E}`` -> ("state", S) or ("event", E); 400 otherwise.

    The contract: "accepts either a state (mapped to the corresponding event) or a direct event name".
    """
    doc = parse_json(raw)
    state, event = doc.get("state"), doc.get("event")
    if state is not None and event is not None:
        raise BodyError("give either state or event, not both")
    if state is not None:
        if not isinstance(state, str) or state not in STATES:
            raise BodyError(f"unknown state {state!r} (one of {', '.join(STATES)})")
        return "state", state
    if event is not None:
        if not isinstance(event, str) or event not in EVENTS:
            raise BodyError(f"unknown event type {event!r} (one of {', '.join(EVENTS)})")
        return "event", event
    raise BodyError("give a state or an event")


def parse_reason(raw: bytes, required: bool) -> str | None:
    """A cancel body ``{"reason": "..."}`` (an empty body is no reason)."""
    doc = parse_json(raw) if raw.strip() else {}
    reason = _opt_str(doc, "reason", 2000, clip=True)
    if required and not reason:
        raise BodyError("reason is required: the agent reads it")
    return reason
