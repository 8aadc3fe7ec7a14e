"""status: sessions with state, tool-call count, last activity; error count."""

from __future__ import annotations

from typing import Any

import click

from agent_hooks.cli.common import echo_json, iso, open_store
from agent_hooks.cli.sessions import guard_fields

SESSION_COLUMNS = ("session_id", "state", "tool_calls", "last_seen_at", "cwd", "tmux_session", "agent", "role")


def collect() -> dict[str, Any]:
    """The documented ``status --json`` shape (fields are only ever added)."""
    store = open_store()
    if store is None:
        return {"sessions": [], "errors": 0}
    try:
        rows = store.conn.execute(
            f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions ORDER BY last_seen_at DESC"
        ).fetchall()
        errors = store.conn.execute("SELECT count(*) FROM errors").fetchone()[0]
        guards = guard_fields(store.conn)
    finally:
        store.close()
    sessions = []
    for row in rows:
        rec = dict(zip(SESSION_COLUMNS, row))
        rec["last_activity_at"] = iso(rec.pop("last_seen_at"))
        sessions.append(
            {k: rec[k] for k in ("session_id", "state", "tool_calls", "last_activity_at", "cwd",
                                 "tmux_session", "agent", "role")}
        )
        # Guard fields (issue 4): task_id, cancelled, cancel_reason, warned, denied, last_decision, ...
        sessions[-1].update(guards.get(rec["session_id"], {}))
    return {"sessions": sessions, "errors": errors}


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON shape.")
def status(as_json: bool) -> None:
    """Show sessions with their state, tool calls and last activity, and the error count."""
    data = collect()
    if as_json:
        echo_json(data)
        return
    if not data["sessions"]:
        click.echo("no sessions recorded")
    else:
        click.echo(f"{'SESSION':36}  {'STATE':9} {'TOOLS':>6}  {'LAST ACTIVITY':20}  {'AGENT':12} CWD")
        for s in data["sessions"]:
            click.echo(
                f"{s['session_id'][:36]:36}  {s['state']:9} {s['tool_calls']:>6}  {s['last_activity_at'] or '-':20}"
                f"  {(s['agent'] or '-')[:12]:12} {s['cwd'] or '-'}"
            )
    click.echo(f"errors: {data['errors']}" + ("  (see `agent-hook paths` for the error log)" if data["errors"] else ""))


COMMANDS = [status]
