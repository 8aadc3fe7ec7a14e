"""A card's spend over time for the board: burn rate, today's spend, the chart's points (stdlib only).

Samples are a session's running cost at moments: ``(at, total_usd)``, oldest first. A local card's come
from its priced messages (complete: the total was 0 before the first); another host's from the totals
its forwarded events carried (not complete: the center may have started watching a session that had
already spent, so what came before the first sample is not counted as spent in a window).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

BURN_WINDOW_S = 600.0  # the burn rate is the spend of the last 10 minutes, per hour
CHART_POINTS = 200  # the session page's chart keeps at most this many points


def total_at(samples: list[tuple[float, float]], at: float, complete: bool) -> float:
    """The running total at time ``at``: the last sample at or before it; before the first, 0 for a
    complete series, else the first sample's total (spend before the center saw it is not counted)."""
    base = 0.0 if complete or not samples else samples[0][1]
    for when, usd in samples:
        if when > at:
            break
        base = usd
    return base


def spent_since(samples: list[tuple[float, float]], since: float, complete: bool) -> float:
    """Dollars spent after ``since`` (never negative)."""
    if not samples:
        return 0.0
    return max(0.0, samples[-1][1] - total_at(samples, since, complete))


def burn_rate(samples: list[tuple[float, float]], now: float, complete: bool,
              window: float = BURN_WINDOW_S) -> float:
    """Dollars per hour over the last ``window`` seconds."""
    return spent_since(samples, now - window, complete) * 3600.0 / window


def day_start(now: float) -> float:
    """The start of the local day ``now`` falls in (budgets and `cost daily` count local days)."""
    t = time.localtime(now)
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))


def samples(conn: sqlite3.Connection, card_id: str, local: bool,
            since: float | None = None) -> list[tuple[float, float]]:
    """A card's cost samples, oldest first: a local session's priced messages summed as they came, or
    the totals another host's events carried. With ``since``, only what a window from then needs: the
    total before it as one sample, then each sample after (a card is rebuilt on every event, and a long
    session has thousands of messages)."""
    out: list[tuple[float, float]] = []
    args: list[object]
    if local:
        total = 0.0
        cond, args = "", [card_id]
        if since is not None:
            before = conn.execute("SELECT max(at), sum(usd) FROM cost_messages WHERE session_id = ? AND at < ?"
                                  " AND usd IS NOT NULL", (card_id, since)).fetchone()
            if before[0] is not None:
                total = float(before[1] or 0.0)
                out.append((float(before[0]), total))
            cond, args = " AND at >= ?", [card_id, since]
        for at, usd in conn.execute("SELECT at, usd FROM cost_messages WHERE session_id = ? AND usd IS NOT NULL"
                                    + cond + " ORDER BY at, rowid", args):
            total += usd
            out.append((float(at), total))
        return out
    cond, args = "", [card_id]
    if since is not None:
        out += [(float(a), float(u)) for a, u in conn.execute(
            "SELECT at, usd FROM fleet_cost_samples WHERE fleet_id = ? AND at < ? ORDER BY at DESC, rowid DESC"
            " LIMIT 1", (card_id, since))]
        cond, args = " AND at >= ?", [card_id, since]
    out += [(float(a), float(u)) for a, u in conn.execute(
        "SELECT at, usd FROM fleet_cost_samples WHERE fleet_id = ?" + cond + " ORDER BY at, rowid", args)]
    return out


def chart(series: list[tuple[float, float]], limit: int = CHART_POINTS) -> list[list[float]]:
    """At most ``limit`` points of a series for the chart, evenly picked, always keeping the last."""
    if len(series) <= limit:
        return [[a, round(u, 6)] for a, u in series]
    step = len(series) / (limit - 1)
    picked = [series[int(i * step)] for i in range(limit - 1)] + [series[-1]]
    return [[a, round(u, 6)] for a, u in picked]


def card_cost(conn: sqlite3.Connection, card_id: str, local: bool, total: float | None, now: float,
              budget: float | None, spent: float | None, session_budget: float) -> dict[str, Any]:
    """The card's ``cost``: total, burn rate, today's spend, and the budget it counts against (the task's
    if it has one, else [budgets] session_usd) with the share used; ``near`` at 80 % or more."""
    since = min(day_start(now), now - BURN_WINDOW_S)
    # No total, no samples (both are written together): no queries for the many cards without a cost.
    series = samples(conn, card_id, local, since) if total is not None else []
    usd = max(float(total or 0.0), series[-1][1] if series else 0.0)
    out: dict[str, Any] = {"usd": round(usd, 6),
                           "burn_usd_h": round(burn_rate(series, now, local), 6),
                           "today_usd": round(spent_since(series, day_start(now), local), 6),
                           "budget_usd": None, "spent_usd": None, "budget_of": None, "budget_pct": None,
                           "near": False}
    if budget:
        # This host's count of the task's spend, and at least what this card spent (another host's
        # session spends on the task without this host's store knowing).
        out.update(budget_usd=budget, spent_usd=round(max(float(spent or 0.0), usd), 6), budget_of="task")
    elif session_budget > 0:
        out.update(budget_usd=session_budget, spent_usd=round(usd, 6), budget_of="session")
    if out["budget_usd"]:
        out["budget_pct"] = round(100.0 * out["spent_usd"] / out["budget_usd"], 1)
        out["near"] = out["budget_pct"] >= 80.0
    return out
