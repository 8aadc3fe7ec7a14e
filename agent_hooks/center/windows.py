"""Spend over time: 5-hour windows and weeks as ccusage counts them, the burn rate, and forecasts. Pure.

Windows are ccusage's session blocks (its ``identifySessionBlocks``, ccusage 17): messages in time
order; a window starts at the first message's hour (UTC, minutes cut off) and takes every message
until one comes more than 5 hours after the window's start, or more than 5 hours after the message
before it; that one starts the next window. A quiet time longer than 5 hours between two windows is a
gap (ccusage lists it; it holds no spend). A window is active while it has not ended and its last
message is less than 5 hours old. Weeks are ccusage's ``weekly`` report: each message's local day,
moved back to the week's first day (Sunday unless ``budgets.week_start`` says otherwise).

The burn rate is the dollars of the last hour (``BURN_S``). A forecast says when, at that rate, a
limit is reached: ``(limit - spent) / rate`` from now, or never when nothing burns.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

WINDOW_S = 5 * 3600.0
BURN_S = 3600.0
WEEK_DAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")

# An entry: (epoch seconds, USD or None when unpriced, tokens of the four kinds summed).
Entry = tuple[float, float | None, int]


def floor_hour(at: float) -> float:
    """The UTC hour ``at`` falls in (ccusage's floorToHour: setUTCMinutes(0, 0, 0))."""
    return at - (at % 3600.0)


def iso(at: float) -> str:
    """ccusage's block id form: '2026-11-25T10:00:00.000Z'."""
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(at * 1000) % 1000:03d}Z"


def blocks(entries: list[Entry], now: float, length: float = WINDOW_S) -> list[dict[str, Any]]:
    """The windows over ``entries`` (any order), oldest first, gaps included (``gap: true``)."""
    out: list[dict[str, Any]] = []
    start: float | None = None
    current: list[Entry] = []
    for entry in sorted(entries, key=lambda e: e[0]):
        at = entry[0]
        if start is None:
            start, current = floor_hour(at), [entry]
            continue
        last = current[-1][0]
        if at - start > length or at - last > length:
            out.append(_block(start, current, now, length))
            if at - last > length:
                out.append({"id": "gap-" + iso(last + length), "start": last + length, "end": at, "gap": True,
                            "active": False, "usd": 0.0, "tokens": 0, "messages": 0})
            start, current = floor_hour(at), [entry]
        else:
            current.append(entry)
    if start is not None and current:
        out.append(_block(start, current, now, length))
    return out


def _block(start: float, entries: list[Entry], now: float, length: float) -> dict[str, Any]:
    last = entries[-1][0]
    end = start + length
    usd = sum(e[1] or 0.0 for e in entries)
    return {"id": iso(start), "start": start, "end": end, "last_at": last, "gap": False,
            "active": now - last < length and now < end, "usd": usd, "tokens": sum(e[2] for e in entries),
            "messages": len(entries), "unpriced": sum(1 for e in entries if e[1] is None)}


def current(block_list: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The active window, if any."""
    for b in reversed(block_list):
        if b["active"]:
            return b
    return None


def week_start(at: float, start_day: str = "sunday") -> str:
    """The first day (local, YYYY-MM-DD) of the week ``at`` falls in, as ccusage's weekly report groups."""
    day = dt.date.fromtimestamp(at)
    first = WEEK_DAYS.index(start_day) if start_day in WEEK_DAYS else 0
    shift = ((day.weekday() + 1) % 7 - first) % 7  # weekday(): Monday 0; ccusage's getDay(): Sunday 0
    return (day - dt.timedelta(days=shift)).isoformat()


def week_bounds(at: float, start_day: str = "sunday") -> tuple[float, float]:
    """The local week ``at`` falls in: (its first moment, the first moment of the next)."""
    first = dt.date.fromisoformat(week_start(at, start_day))
    begin = time.mktime(first.timetuple())
    end = time.mktime((first + dt.timedelta(days=7)).timetuple())
    return begin, end


def weeks(entries: list[Entry], start_day: str = "sunday") -> dict[str, dict[str, Any]]:
    """{week's first day: {usd, tokens, messages}}, oldest first."""
    out: dict[str, dict[str, Any]] = {}
    for at, usd, tokens in sorted(entries, key=lambda e: e[0]):
        w = out.setdefault(week_start(at, start_day), {"usd": 0.0, "tokens": 0, "messages": 0})
        w["usd"] += usd or 0.0
        w["tokens"] += tokens
        w["messages"] += 1
    return out


def burn_rate(entries: list[Entry], now: float, span: float = BURN_S) -> float:
    """Dollars per hour over the last ``span`` seconds (messages after now - span, up to now)."""
    spent = sum(usd or 0.0 for at, usd, _ in entries if now - span < at <= now)
    return spent * 3600.0 / span


def forecast(spent: float, rate_h: float, limit: float, now: float, ends: float | None) -> dict[str, Any]:
    """When ``limit`` is reached at ``rate_h`` dollars an hour from ``spent`` now.

    ``reach_at``: the moment (None when nothing burns and it is not reached); ``reached``: already;
    ``within``: it is reached before ``ends`` (the window's or the week's end; None: no end)."""
    out: dict[str, Any] = {"limit_usd": limit, "spent_usd": spent, "burn_usd_h": rate_h, "reached": spent >= limit,
                           "reach_at": None, "within": False, "ends": ends}
    if spent >= limit:
        out["reach_at"], out["within"] = now, True
    elif rate_h > 0:
        out["reach_at"] = now + (limit - spent) / rate_h * 3600.0
        out["within"] = ends is None or out["reach_at"] <= ends
    return out
