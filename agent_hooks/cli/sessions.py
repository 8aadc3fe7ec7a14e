"""session list / show / reset-guards (the guard fields per session are in cli/guards.py)."""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

import click

from agent_hooks.cli.common import NotFound, echo_json, iso, open_store, paths, writing
from agent_hooks.cli.guards import guard_fields
from agent_hooks.cli.ids import SESSIONS, resolve
from agent_hooks.cli.status import collect, waiting_text
from agent_hooks.cli.table import STATE_WIDTH, cell
from agent_hooks.features import persist as persist_mod

CALL_COLUMNS = ("id", "tool_use_id", "tool_name", "decision", "rule", "reason", "outcome", "poll_rule",
                "input_hash", "output_hash", "error", "duration_ms", "started_at", "ended_at", "command")


def describe(conn: sqlite3.Connection, session_id: str, limit: int) -> dict[str, Any] | None:
    """The `session show --json` shape (fields are only ever added)."""
    cur = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,))
    row = cur.fetchone()
    if row is None:
        return None
    session = dict(zip([d[0] for d in cur.description], row, strict=True))
    for key in ("first_seen_at", "last_seen_at", "ended_at", "cancelled_at", "forked_at"):
        session[key] = iso(session.get(key))
    session.update(guard_fields(conn, session_id).get(session_id, {}))
    calls = []
    for values in conn.execute(
        f"SELECT {', '.join(CALL_COLUMNS)} FROM tool_calls WHERE session_id = ? ORDER BY id DESC LIMIT ?",
        (session_id, limit),
    ):
        call = dict(zip(CALL_COLUMNS, values, strict=True))
        call["started_at"], call["ended_at"] = iso(call["started_at"]), iso(call["ended_at"])
        calls.append(call)
    calls.reverse()
    session["recent_tool_calls"] = calls
    from agent_hooks.features import subagents

    subs = subagents.of_session(conn, session_id)
    for rec in subs["running"] + subs["finished"]:
        rec["started_at"], rec["stopped_at"] = iso(rec["started_at"]), iso(rec["stopped_at"])
    session["subagents"] = subs
    for key in ("waiting_since", "persist_last_at", "pressure_noticed_at"):
        session[key] = iso(session.get(key))
    from agent_hooks import config as config_mod
    from agent_hooks import fleet
    from agent_hooks.features import approvals

    own = fleet.host_name(config_mod.load_lenient(paths(), os.environ)[0])
    from agent_hooks.notify.outbox import attach

    session["approvals"] = attach(conn, [approvals.public(r, own) for r in approvals.listing(conn, "all", session_id,
                                                                                               limit)])
    return session


@click.group()
def session() -> None:
    """List sessions, inspect one and its guards (a unique prefix of a session id is enough)."""


STATES = ("live", "awaiting", "stalled", "ended")


@session.command(name="list")
@click.option("--state", type=click.Choice(STATES), multiple=True, help="Only sessions in this state (repeatable).")
@click.option("--agent", default=None, help="Only this agent's sessions.")
@click.option("--task", "task_id", default=None, help="Only the sessions of this task.")
@click.option("--tmux", default=None, help="Only the sessions in this tmux session.")
@click.option("--cancelled", is_flag=True, help="Only cancelled sessions.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100000), help="Most sessions listed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the items of `status --json`).")
def list_cmd(state: tuple[str, ...], agent: str | None, task_id: str | None, tmux: str | None, cancelled: bool,
             limit: int, as_json: bool) -> None:
    """List sessions, most recent activity first, filtered by state, agent, task, tmux session."""
    sessions = [
        s for s in collect()["sessions"]
        if (not state or s["state"] in state) and (agent is None or s["agent"] == agent)
        and (task_id is None or s["task_id"] == task_id) and (tmux is None or s["tmux_session"] == tmux)
        and (not cancelled or s.get("cancelled"))
    ][:limit]
    if as_json:
        echo_json({"sessions": sessions})
        return
    if not sessions:
        click.echo("no sessions match" if (state or agent or task_id or tmux or cancelled) else "no sessions recorded")
        return
    click.echo(f"{'SESSION':36}  {'STATE':{STATE_WIDTH}} {'TOOLS':>6}  {'LAST ACTIVITY':20}  {'AGENT':12} {'TASK':16} TMUX")
    for s in sessions:
        click.echo(f"{cell(s['session_id'], 36)}  {cell(s['state'], STATE_WIDTH)} {s['tool_calls']:>6}  "
                   f"{cell(s['last_activity_at'], 20)}  {cell(s['agent'], 12)} {cell(s['task_id'], 16)}"
                   f" {cell(s['tmux_session'])}")


@session.command(name="show")
@click.argument("session_id")
@click.option("--limit", default=20, show_default=True, help="How many recent tool calls to list.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(session_id: str, limit: int, as_json: bool) -> None:
    """Show a session (id or unique prefix): task, cancellation, guard counts, recent tool calls and decisions."""
    store = open_store()
    if store is None:
        raise NotFound(f"no session {session_id!r} recorded (no store yet)")
    try:
        data = describe(store.conn, resolve(store.conn, SESSIONS, session_id, "session"), limit)
    finally:
        store.close()
    if data is None:
        raise NotFound(f"no session {session_id!r} recorded")
    if as_json:
        echo_json(data)
        return
    for key in ("session_id", "state", "agent", "role", "cwd", "tmux_session", "task_id", "last_seen_at"):
        click.echo(f"{key:14} {cell(data.get(key))}")
    if data.get("parent_session_id") or data.get("forked_at"):
        click.echo(f"{'forked from':14} {cell(data.get('parent_session_id'))}")
    cancelled = f"yes ({cell(data['cancelled_by'])}): {cell(data['cancel_reason'])}" if data["cancelled"] else "no"
    click.echo(f"{'cancelled':14} {cancelled}")
    click.echo(f"{'tool calls':14} {data['tool_calls']}  warned {data['warned']}  denied {data['denied']}")
    if data.get("waiting_on"):
        click.echo(f"{'waiting on':14} {waiting_text(data['waiting_on'], data.get('waiting_detail'))}"
                   f" (since {data.get('waiting_since') or '-'})")
    if data.get("persist_last"):
        click.echo(f"{'persistence':14} {cell(persist_mod.for_person(data['persist_last']), limit=240)}"
                   f" ({data.get('persist_last_at') or '-'})")
    if data.get("cost_usd") or data.get("cost_unpriced"):
        from agent_hooks.cli.cost import usd_text

        unpriced = f" ({data['cost_unpriced']} message(s) unpriced)" if data.get("cost_unpriced") else ""
        click.echo(f"{'cost':14} {usd_text(data['cost_usd'])}{unpriced}")
    if data.get("context_pct") is not None:
        click.echo(f"{'context':14} {data['context_pct']:.0f}% (notice given {data.get('pressure_noticed_at') or '-'})")
    for kind in ("running", "finished"):
        for sub in data["subagents"][kind]:
            click.echo(f"{'subagent':14} {kind:8} {cell(sub['agent_id'], 40)}  {cell(sub['agent_type'], 24)}"
                       f"  {cell(sub['last_message'], limit=120, empty='')}")
    if data["approvals"]:
        from agent_hooks.features.approvals import summary as approval_summary

        click.echo(f"\n{'APPROVAL':12}  {'ASKED':20}  {'STATE':9}  {'ANSWER':56}  REQUEST")
        for a in data["approvals"]:
            ans = a["answer"] or {}
            said = ""
            if ans:
                said = f"{ans.get('decision') or '-'} by {ans.get('by') or '-'} via {ans.get('via') or '-'}"
                if ans.get("waited_ms") is not None:
                    said += f" after {ans['waited_ms'] / 1000:.1f} s"
            row = {**a, "tool_input": json.dumps(a["tool_input"]), "questions": json.dumps(a["questions"])}
            click.echo(f"{a['id']:12}  {cell(iso(a['created_at']), 20)}  {a['state']:9}  {cell(said, 56, empty='-')}"
                       f"  {approval_summary(row, 80)}")
            detail = (ans.get("message") or ans.get("note") or "") if ans else ""
            if ans and ans.get("answers"):
                detail = "; ".join(f"{q} -> {v}" for q, v in ans["answers"].items())
            if detail:
                click.echo(f"{'':14}{cell(detail, 120)}")
            if a.get("notifications"):
                from agent_hooks.cli.approvals import delivery_text

                click.echo(f"{'':14}notified: {cell(delivery_text(a['notifications']), 160)}")
    if data["recent_tool_calls"]:
        click.echo(f"\n{'ID':>6}  {'STARTED':20}  {'TOOL':14} {'DECISION':8} {'OUTCOME':8} {'RULE':16} COMMAND")
        for c in data["recent_tool_calls"]:
            # What the call ran (its command, file path, URL...), clipped to one line.
            click.echo(f"{c['id']:>6}  {cell(c['started_at'], 20)}  {cell(c['tool_name'], 14)} "
                       f"{cell(c['decision'], 8)} {cell(c['outcome'], 8)} {cell(c['rule'], 16, empty='')}"
                       f" {cell(c.get('command'), limit=100, empty='')}")


@session.command(name="reset-guards")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def reset_guards(session_id: str, as_json: bool) -> None:
    """Start the session's loop and polling history afresh (calls so far no longer count)."""
    with writing() as conn:
        session_id = resolve(conn, SESSIONS, session_id, "session")
        conn.execute(
            "UPDATE sessions SET guards_since_id ="
            " (SELECT coalesce(max(id), 0) FROM tool_calls WHERE session_id = ?) WHERE session_id = ?",
            (session_id, session_id),
        )
    if as_json:
        echo_json({"session_id": session_id, "reset": True})
        return
    click.echo(f"session {session_id}: loop and polling history reset")


COMMANDS = [session]
