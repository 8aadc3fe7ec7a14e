"""Queue area: the forwarding outbox drains, and its dead letters."""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_hooks.checks import OK, WARN, Check, Context, check
from agent_hooks.cli.common import iso, plural
from agent_hooks.paths import Paths


@check("queue", order=70)
def queue(ctx: Context) -> list[Check]:
    """Queued and dead events, and the age of the oldest queued one."""
    return check_queue(ctx.paths, ctx.conn, ctx.cfg, ctx.now)


def check_queue(p: Paths, conn: sqlite3.Connection | None, cfg: dict[str, Any], now: float) -> list[Check]:
    """The outbox: queued and dead events, and the age of the oldest queued one."""
    if conn is None:
        return []
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'outbox'").fetchone():
        return [Check("queue", WARN, "no outbox table in the store (schema behind)", "run agent-hook init")]
    cols = {row[1] for row in conn.execute("PRAGMA table_info(outbox)")}
    total = conn.execute("SELECT count(*) FROM outbox").fetchone()[0]
    by_state: dict[str, int] = {}
    if "state" in cols:
        by_state = dict(conn.execute("SELECT state, count(*) FROM outbox GROUP BY state").fetchall())
    dead = sum(n for s, n in by_state.items() if s and "dead" in s)
    queued = total - dead
    oldest = None
    if "created_at" in cols and queued:
        where = "WHERE state NOT LIKE '%dead%'" if "state" in cols else ""
        oldest = conn.execute(f"SELECT min(created_at) FROM outbox {where}").fetchone()[0]
    data = {"queued": queued, "dead": dead, "oldest_queued_at": iso(oldest) if oldest else None}
    stale_s = float(cfg["doctor"]["queue_stale_s"])
    checks = []
    if oldest and now - oldest > stale_s:
        checks.append(Check("queue", WARN, f"{plural(queued, 'event')} queued, the oldest for {int(now - oldest)} s: "
                            "the queue is not draining", "check the ingest server line above; "
                            "the next hook call restarts the drainer", data))
    else:
        checks.append(Check("queue", OK, f"queue healthy: {queued} queued", data=data))
    if dead:
        last = None
        if "last_error" in cols:
            row = conn.execute("SELECT last_error FROM outbox WHERE state LIKE '%dead%' ORDER BY id DESC LIMIT 1").fetchone()
            last = row[0] if row else None
        checks.append(Check("queue", WARN, plural(dead, "dead letter") + (f"; last error: {last}" if last else ""),
                            "inspect and retry them with agent-hook queue (see docs/forwarding.md)", data))
    return checks
