"""Heartbeat: every hook call is one (sessions.touch sets ``last_seen_at``); readers derive ``stalled``.

A session is *stalled* when its stored state is ``live`` (it was working:
not ``awaiting`` input after Stop, not ``ended``) and no hook call came for
``heartbeat.stalled_after_s`` seconds. Awaiting sessions are idle by design
(a human or a lead owes them a prompt), so they never count as stalled.
The derivation is read-side only: nothing is written when a session stalls,
and its next hook call makes it live again.
"""

from __future__ import annotations

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STALLED = "stalled"


def stalled_after(config: dict[str, Any]) -> float:
    return float(config["heartbeat"]["stalled_after_s"])


def derive(state: str | None, last_seen_at: float | None, now: float, stalled_after_s: float) -> tuple[str, float | None]:
    """(shown state, seconds stalled beyond the threshold or None) for one session row."""
    state = state or "live"
    if state != "live" or last_seen_at is None:
        return state, None
    idle = now - last_seen_at
    if idle > stalled_after_s:
        return STALLED, round(idle - stalled_after_s, 1)
    return state, None
