"""status: sessions with state (live, awaiting, stalled, ended), tool-call count, last activity; error count."""

from __future__ import annotations

import time
from typing import Any

import click

from agent_hooks import errorlog
from agent_hooks.cli.common import (
    echo_json,
    iso,
    load_config,
    open_store,
    paths,
    plural,
)
from agent_hooks.cli.sessions import guard_fields
from agent_hooks.features import heartbeat

SESSION_COLUMNS = ("session_id", "state", "tool_calls", "last_seen_at", "cwd", "tmux_session", "agent", "role",
                   "task_id", "compactions")


def collect() -> dict[str, Any]:
    """The documented ``status --json`` shape (fields are only ever added).

    ``errors`` counts the errors not yet marked seen (`agent-hook errors seen`), as doctor does.
    """
    store = open_store()
    stalled_after_s = heartbeat.stalled_after(load_config())
    now = time.time()
    if store is None:
        errors = errorlog.report(paths(), None, limit=0)
        return {"sessions": [], "errors": errors["unseen"], "errors_seen_at": None}
    try:
        rows = store.conn.execute(
            f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions ORDER BY last_seen_at DESC"
        ).fetchall()
        # The same count as doctor's: errors since they were last marked seen.
        errors = errorlog.report(paths(), store.conn, limit=0)
        guards = guard_fields(store.conn)
    finally:
        store.close()
    sessions = []
    for row in rows:
        rec = dict(zip(SESSION_COLUMNS, row))
        seen = rec.pop("last_seen_at")
        rec["state"], rec["stalled_for_s"] = heartbeat.derive(rec["state"], seen, now, stalled_after_s)
        rec["last_activity_at"] = iso(seen)
        rec["idle_s"] = round(now - seen, 1) if seen is not None else None
        sessions.append(
            {k: rec[k] for k in ("session_id", "state", "tool_calls", "last_activity_at", "cwd",
                                 "tmux_session", "agent", "role", "idle_s", "stalled_for_s", "task_id",
                                 "compactions")}
        )
        # Guard fields (issue 4): cancelled, cancel_reason, warned, denied, last_decision, ...
        sessions[-1].update(guards.get(rec["session_id"], {}))
    return {"sessions": sessions, "errors": errors["unseen"], "errors_seen_at": iso(errors["seen_at"]),
            "stalled_after_s": stalled_after_s}


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON shape.")
def status(as_json: bool) -> None:
    """Show sessions with their state, tool calls and last activity, and the error count.

    State is live, awaiting (stopped, waiting for input), ended, or stalled: live
    but without any hook call for heartbeat.stalled_after_s seconds.
    """
    data = collect()
    if as_json:
        echo_json(data)
        return
    if not data["sessions"]:
        click.echo("no sessions recorded")
    else:
        click.echo(f"{'SESSION':36}  {'STATE':9} {'TOOLS':>6}  {'LAST ACTIVITY':20}  {'IDLE':>6}  {'AGENT':12}"
                   f" {'GUARDS':12} CWD")
        for s in data["sessions"]:
            click.echo(
                f"{s['session_id'][:36]:36}  {s['state']:9} {s['tool_calls']:>6}  {s['last_activity_at'] or '-':20}"
                f"  {_idle(s['idle_s']):>6}  {(s['agent'] or '-')[:12]:12} {_guards(s):12} {s['cwd'] or '-'}"
            )
        counts: dict[str, int] = {}
        for s in data["sessions"]:
            counts[s["state"]] = counts.get(s["state"], 0) + 1
        click.echo("  ".join(f"{k}: {counts.get(k, 0)}" for k in ("live", "awaiting", "stalled", "ended")))
    if data["errors"]:
        click.echo(f"{plural(data['errors'], 'error')} not yet marked seen: `agent-hook errors` lists them,"
                   " `agent-hook errors seen` marks them seen")
    else:
        click.echo("errors: none" + (f" since {data['errors_seen_at']}" if data.get("errors_seen_at") else ""))


def _guards(s: dict[str, Any]) -> str:
    """'cancelled', or the warned/denied counts ('-' when the guards never spoke)."""
    if s.get("cancelled"):
        return "cancelled"
    warned, denied = s.get("warned") or 0, s.get("denied") or 0
    return f"w{warned} d{denied}" if warned or denied else "-"


def _idle(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


COMMANDS = [status]
