"""status: sessions with state (live, awaiting, stalled, ended), tool-call count, last activity; error count."""

from __future__ import annotations

import time
from typing import Any

import click

from agent_hooks import errorlog, spool
from agent_hooks.cli.common import (
    echo_json,
    iso,
    load_config,
    open_store,
    paths,
    plural,
)
from agent_hooks.cli.guards import guard_fields
from agent_hooks.cli.table import STATE_WIDTH, cell
from agent_hooks.features import heartbeat, subagents
from agent_hooks.features import persist as persist_mod

SESSION_COLUMNS = ("session_id", "state", "tool_calls", "last_seen_at", "cwd", "tmux_session", "agent", "role",
                   "task_id", "compactions", "waiting_on", "waiting_detail", "waiting_since", "persist_last",
                   "cost_usd", "cost_unpriced")
# Shown states, in the order the summary line counts them.
STATES = ("live", "awaiting", "stalled", "ended", "needs_input", "error")


def collect() -> dict[str, Any]:
    """The documented ``status --json`` shape (fields are only ever added).

    ``errors`` counts the errors not yet marked seen (`agent-hook errors seen`), as doctor does.
    """
    store = open_store()
    stalled_after_s = heartbeat.stalled_after(load_config())
    now = time.time()
    if store is None:
        errors = errorlog.report(paths(), None, limit=0)
        return {"sessions": [], "errors": errors["unseen"], "errors_seen_at": None, "spool": spool.counts(paths(), None)}
    try:
        rows = store.conn.execute(
            f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions ORDER BY last_seen_at DESC"
        ).fetchall()
        # The same count as doctor's: errors since they were last marked seen.
        errors = errorlog.report(paths(), store.conn, limit=0)
        guards = guard_fields(store.conn)
        # Calls answered fail-open before their write committed, and replayed since.
        spooled = spool.counts(paths(), store.conn)
        subs = subagents.counts(store.conn)
        tasks = {tid: (state, used) for tid, state, used in store.conn.execute(
            "SELECT task_id, state, coalesce(continuations, 0) FROM tasks")}
    finally:
        store.close()
    sessions = []
    for row in rows:
        rec = dict(zip(SESSION_COLUMNS, row, strict=True))
        seen = rec.pop("last_seen_at")
        rec["state"], rec["stalled_for_s"] = heartbeat.derive(rec["state"], seen, now, stalled_after_s)
        rec["last_activity_at"] = iso(seen)
        rec["idle_s"] = round(now - seen, 1) if seen is not None else None
        sessions.append(
            {k: rec[k] for k in ("session_id", "state", "tool_calls", "last_activity_at", "cwd",
                                 "tmux_session", "agent", "role", "idle_s", "stalled_for_s", "task_id",
                                 "compactions")}
        )
        # Guard fields: cancelled, cancel_reason, warned, denied, last_decision, ...
        sessions[-1].update(guards.get(rec["session_id"], {}))
        # What it waits on (needs_input: the tool asked about; error: the error's kind), the last
        # persistence decision, and its subagents.
        running, finished = subs.get(rec["session_id"], (0, 0))
        sessions[-1].update(waiting_on=rec["waiting_on"], waiting_detail=rec["waiting_detail"],
                            waiting_since=iso(rec["waiting_since"]), persist=rec["persist_last"],
                            subagents_running=running, subagents_finished=finished)
        # The task's state (open, done, blocked, cancelled) and the continuations it cost.
        state, used = tasks.get(rec["task_id"], (None, 0))
        sessions[-1].update(task_state=state, task_continuations=used)
        # What the session has cost so far (priced messages), and how many could not be priced.
        sessions[-1].update(cost_usd=rec["cost_usd"] or 0.0, cost_unpriced=rec["cost_unpriced"] or 0)
    return {"sessions": sessions, "errors": errors["unseen"], "errors_seen_at": iso(errors["seen_at"]),
            "stalled_after_s": stalled_after_s, "spool": spooled}


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON shape.")
def status(as_json: bool) -> None:
    """Show sessions with their state, tool calls and last activity, and the error count.

    State is live, needs_input (a permission dialog is open: the tool is shown),
    error (the turn ended on an API error: its kind is shown), awaiting (at its
    prompt: a new session waiting for its first one, a turn that ended, or a
    prompt that was blocked because its task was cancelled), ended, or stalled: live but without any hook call for
    heartbeat.stalled_after_s seconds (a session waiting on a person never is).
    """
    data = collect()
    if as_json:
        echo_json(data)
        return
    if not data["sessions"]:
        click.echo("no sessions recorded")
    else:
        click.echo(f"{'SESSION':36}  {'STATE':{STATE_WIDTH}} {'TOOLS':>6}  {'LAST ACTIVITY':20}  {'IDLE':>6}  {'AGENT':12}"
                   f" {'GUARDS':12} CWD")
        for s in data["sessions"]:
            click.echo(
                f"{cell(s['session_id'], 36)}  {cell(s['state'], STATE_WIDTH)} {s['tool_calls']:>6}  "
                f"{cell(s['last_activity_at'], 20)}  {_idle(s['idle_s']):>6}  {cell(s['agent'], 12)} {_guards(s):12}"
                f" {cell(s['cwd'])}"
            )
            for note in _notes(s):
                click.echo(f"    {note}")
        counts: dict[str, int] = {}
        for s in data["sessions"]:
            counts[s["state"]] = counts.get(s["state"], 0) + 1
        # The waiting states are counted after the classic four, and only when present.
        click.echo("  ".join(f"{k}: {counts.get(k, 0)}" for k in STATES
                             if k in ("live", "awaiting", "stalled", "ended") or counts.get(k)))
    if data["errors"]:
        click.echo(f"{plural(data['errors'], 'error')} not yet marked seen: `agent-hook errors` lists them,"
                   " `agent-hook errors seen` marks them seen")
    else:
        click.echo("errors: none" + (f" since {data['errors_seen_at']}" if data.get("errors_seen_at") else ""))
    sp = data["spool"]
    if sp["spooled"]:
        click.echo(f"spool: {sp['spooled']} calls spooled, {sp['replayed']} replayed, {sp['pending']} pending"
                   + (f", {sp['failed']} failed" if sp["failed"] else ""))


def _notes(s: dict[str, Any]) -> list[str]:
    """Lines under a session: what it waits on, its persistence, its subagents."""
    notes = []
    if s.get("waiting_on") in ("needs_input", "error") or (s.get("waiting_on") == "awaiting" and s.get("waiting_detail")):
        notes.append(f"{waiting_text(s['waiting_on'], s.get('waiting_detail'))} (since {s.get('waiting_since') or '-'})")
    if s.get("persist"):
        notes.append(f"persistence: {cell(persist_mod.for_person(s['persist']), limit=240)}"
                     f" (task {cell(s.get('task_id'))}: {s.get('task_state') or '-'},"
                     f" {s.get('task_continuations', 0)} continuation(s))")
    if s.get("cost_usd") or s.get("cost_unpriced"):
        from agent_hooks.cli.cost import usd_text

        notes.append(f"cost: {usd_text(s['cost_usd'], s['cost_unpriced'])}")
    if s.get("subagents_running") or s.get("subagents_finished"):
        notes.append(f"subagents: {s['subagents_running']} running, {s['subagents_finished']} finished")
    return notes


def waiting_text(waiting_on: str, detail: str | None) -> str:
    """What a session waits on, as status, session show and the board all say it: "needs input: Bash:
    ls", "error: rate_limit", "awaiting: its first prompt", "awaiting: its prompt was blocked (...)"."""
    what = "needs input" if waiting_on == "needs_input" else waiting_on
    return f"{what}: {cell(detail)}" if detail else what


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
