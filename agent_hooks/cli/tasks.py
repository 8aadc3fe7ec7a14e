"""task create / describe / assign / progress / show / list / cancel / uncancel, and cancel / uncancel.

A cancel mark is a row in the store, so the cancelled agent's very next hook
call (PreToolUse or UserPromptSubmit) sees it: no signal, no polling, no network.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import click

from agent_hooks import money
from agent_hooks.cli import persist as persist_cli  # task persist / done / blocked
from agent_hooks.cli.common import NotFound, echo_json, iso, open_store, plural, writing
from agent_hooks.cli.ids import SESSIONS, TASKS, resolve
from agent_hooks.cli.table import cell
from agent_hooks.features import cost as cost_mod
from agent_hooks.features import persist as persist_mod
from agent_hooks.output import one_line

TASK_COLUMNS = ("task_id", "description", "progress", "state", "cancel_reason", "cancelled_at", "created_at",
                "updated_at")

def ensure_task(conn: sqlite3.Connection, task_id: str, now: float) -> bool:
    """Create the task row when missing; True when it was created."""
    return conn.execute(
        "INSERT INTO tasks (task_id, state, created_at, updated_at) VALUES (?, 'open', ?, ?)"
        " ON CONFLICT (task_id) DO NOTHING",
        (task_id, now, now),
    ).rowcount > 0


def _task_id(value: str) -> str:
    value = value.strip()
    if not value:
        raise click.ClickException("the task id is empty")
    return value


JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


@click.group()
def task() -> None:
    """Tasks: what sessions work on (a description and a progress text), and their cancellation.

    `task cancel TASK_ID --reason ...` stops every session of the task, present
    and future, at its next hook call; `task uncancel` lifts it.
    """


@task.command(name="create")
@click.argument("task_id")
@click.option("--description", "-d", default=None, help="What the task is.")
@persist_cli.create_options
@click.option("--budget-usd", type=click.FloatRange(min=0), default=None, metavar="USD",
              help="What the task may cost: once spent, its sessions' tool calls are denied.")
@JSON_OPTION
def create(task_id: str, description: str | None, as_json: bool, persist_on: bool = False,
           max_continuations: int | None = None, budget_usd: float | None = None) -> None:
    """Create a task (sessions join it with $AGENT_HOOKS_TASK_ID or `task assign`)."""
    task_id = _task_id(task_id)
    if max_continuations is not None and not persist_on:
        raise click.ClickException("--max-continuations goes with --persist")
    with writing() as conn:
        if not ensure_task(conn, task_id, time.time()):
            raise click.ClickException(_exists_hint(task_id, description, persist_on, max_continuations))
        if description is not None:
            conn.execute("UPDATE tasks SET description = ? WHERE task_id = ?", (description, task_id))
        if persist_on:
            persist_cli.set_persist(conn, task_id, True, max_continuations)
        if budget_usd is not None:
            _set_budget(conn, task_id, budget_usd)
        record = task_record(conn, task_id)
    budget_text = f" (budget {money.usd(budget_usd)})" if budget_usd else ""
    _done(as_json, record, f"task {task_id}: created" + (" (persists)" if persist_on else "") + budget_text)


def _set_budget(conn: sqlite3.Connection, task_id: str, usd: float) -> float:
    """Set (0: remove) a task's budget; its spend is recounted from its sessions' messages."""
    conn.execute("UPDATE tasks SET budget_usd = ? WHERE task_id = ?", (usd or None, task_id))
    return cost_mod.refresh_task_spent(conn, task_id)


@task.command(name="budget")
@click.argument("task_id")
@click.argument("usd", type=click.FloatRange(min=0))
@JSON_OPTION
def budget_cmd(task_id: str, usd: float, as_json: bool) -> None:
    """Set what a task may cost in USD (0 removes the budget); creates the task if needed.

    Once its sessions have spent it, PreToolUse denies their tool calls and a
    persisting task lets its workers stop. At budgets.notice_pct (80 %) the
    agent is told what is left.
    """
    task_id = _task_id(task_id)
    with writing() as conn:
        ensure_task(conn, task_id, time.time())
        spent = _set_budget(conn, task_id, usd)
        conn.execute("UPDATE tasks SET updated_at = ? WHERE task_id = ?", (time.time(), task_id))
        record = task_record(conn, task_id)
    text = (f"task {task_id}: budget {money.usd(usd)}, {money.usd(spent)} spent" if usd
            else f"task {task_id}: no budget ({money.usd(spent)} spent)")
    _done(as_json, record, text)


def _exists_hint(task_id: str, description: str | None, persist_on: bool, max_continuations: int | None) -> str:
    """What to run instead of creating an existing task: the command that does what was asked."""
    word = persist_mod.shell_word(task_id)
    fixes = []
    if persist_on:
        budget = f" --max-continuations {max_continuations}" if max_continuations is not None else ""
        fixes.append(f"agent-hook task persist {word}{budget}")
    if description is not None:
        fixes.append(f"agent-hook task describe {word} '<description>'")
    if not fixes:
        fixes.append(f"agent-hook task show {word}")
    return f"task {task_id!r} exists; to change it: {' and '.join(fixes)}"


@task.command(name="describe")
@click.argument("task_id")
@click.argument("text")
@JSON_OPTION
def describe_cmd(task_id: str, text: str, as_json: bool) -> None:
    """Set a task's description (creating the task if needed)."""
    _update(task_id, "description", text, as_json)


@task.command(name="progress")
@click.argument("task_id")
@click.argument("text")
@JSON_OPTION
def progress(task_id: str, text: str, as_json: bool) -> None:
    """Record a task's progress text (what is done, what is next); creates the task if needed."""
    _update(task_id, "progress", text, as_json)


def _done(as_json: bool, data: object, text: str) -> None:
    if as_json:
        echo_json(data)
    else:
        click.echo(text)


def _update(task_id: str, column: str, text: str, as_json: bool) -> None:
    # Exact ids only: these create the task when missing, and a prefix must not redirect the write.
    task_id = _task_id(task_id)
    now = time.time()
    with writing() as conn:
        ensure_task(conn, task_id, now)
        conn.execute(f"UPDATE tasks SET {column} = ?, updated_at = ? WHERE task_id = ?", (text, now, task_id))
        record = task_record(conn, task_id)
    _done(as_json, record, f"task {task_id}: {column} recorded")


@task.command(name="assign")
@click.argument("session_id")
@click.argument("task_id")
@JSON_OPTION
def assign(session_id: str, task_id: str, as_json: bool) -> None:
    """Make a recorded session (id or unique prefix) part of a task (creating the task if needed).

    A session started with $AGENT_HOOKS_TASK_ID keeps that task: the variable wins.
    """
    task_id = _task_id(task_id)
    with writing() as conn:
        try:
            session_id = resolve(conn, SESSIONS, session_id, "session")
        except NotFound:
            raise NotFound(f"no session {session_id!r} recorded (start it with AGENT_HOOKS_TASK_ID={task_id} "
                           "instead)") from None
        conn.execute("UPDATE sessions SET task_id = ? WHERE session_id = ?", (task_id, session_id))
        ensure_task(conn, task_id, time.time())
        cost_mod.refresh_task_spent(conn, task_id)  # what the session spent before counts for its new task
        record = task_record(conn, task_id)
    _done(as_json, record, f"session {session_id}: task {task_id}")


def task_record(conn: sqlite3.Connection, task_id: str) -> dict[str, Any] | None:
    """The `task show --json` shape (fields are only ever added)."""
    row = conn.execute(f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    sessions = conn.execute(
        "SELECT session_id, state, cancelled_at, cancel_reason, last_seen_at, tmux_session, agent FROM sessions"
        " WHERE task_id = ? ORDER BY last_seen_at DESC",
        (task_id,),
    ).fetchall()
    if row is None and not sessions:
        return None
    rec: dict[str, Any] = dict(zip(TASK_COLUMNS, row, strict=True)) if row else {"task_id": task_id, "state": "open"}
    for key in ("cancelled_at", "created_at", "updated_at"):
        rec[key] = iso(rec.get(key))
    rec["cancelled"] = rec.get("state") == "cancelled"
    if row:
        rec.update(persist_cli.persist_fields(conn, task_id))
    budget = conn.execute("SELECT budget_usd FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    rec["budget_usd"] = budget[0] if budget else None
    rec.update(_spend(conn, task_id))
    rec["sessions"] = [
        {"session_id": sid, "state": state, "cancelled": at is not None, "cancel_reason": reason,
         "last_activity_at": iso(seen), "tmux_session": tmux, "agent": agent}
        for sid, state, at, reason, seen, tmux, agent in sessions
    ]
    return rec


@task.command(name="show")
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(task_id: str, as_json: bool) -> None:
    """Show a task (id or unique prefix): description, progress, state, and its sessions."""
    store = open_store()
    if store is None:
        raise NotFound(f"no task {task_id!r} recorded (no store yet)")
    try:
        data = task_record(store.conn, resolve(store.conn, TASKS, task_id, "task"))
    finally:
        store.close()
    if data is None:
        raise NotFound(f"no task {task_id!r} recorded")
    if as_json:
        echo_json(data)
        return
    for key in ("task_id", "state", "description", "progress", "cancel_reason", "cancelled_at", "updated_at",
                "done_note", "blocked_reason"):
        if data.get(key) is not None or key in ("task_id", "state"):
            click.echo(f"{key:14} {cell(data.get(key), limit=2000)}")
    if data.get("cost_usd") or data.get("budget_usd"):
        click.echo(f"{'cost':14} {_money(data)}")
    if data.get("persists"):
        click.echo(f"{'persists':14} yes, continuations {data['continuations']} of {data['max_continuations']}")
    if data.get("last_bypass"):
        click.echo(f"{'let go':14} {cell(data['last_bypass'])} ({data.get('last_bypass_at')})")
    for s in data["sessions"]:
        mark = "  CANCELLED" if s["cancelled"] else ""
        click.echo(f"  session {cell(s['session_id'])}  {cell(s['state'])}  {cell(s['last_activity_at'])}{mark}")


def _spend(conn: sqlite3.Connection, task_id: str) -> dict[str, Any]:
    """{"cost_usd", "unpriced"}: what the task's sessions cost (priced messages), and whether some are unpriced."""
    usd, unpriced = conn.execute(
        "SELECT coalesce(sum(m.usd), 0), count(*) - count(m.usd) FROM cost_messages m JOIN sessions s"
        " ON s.session_id = m.session_id WHERE s.task_id = ?", (task_id,)).fetchone()
    return {"cost_usd": float(usd), "unpriced": bool(unpriced)}


def list_tasks(conn: sqlite3.Connection, state: str | None, limit: int) -> list[dict[str, Any]]:
    """The `task list --json` items, most recently updated first."""
    # A task named only by its sessions ($AGENT_HOOKS_TASK_ID) has no row yet: it is open.
    rows = conn.execute(
        "WITH ids(task_id) AS (SELECT task_id FROM tasks UNION SELECT task_id FROM sessions WHERE task_id IS NOT NULL)"
        " SELECT ids.task_id, coalesce(t.state, 'open') AS st, t.description, t.progress,"
        " coalesce(t.updated_at, (SELECT max(last_seen_at) FROM sessions s WHERE s.task_id = ids.task_id)) AS upd,"
        " t.cancel_reason,"
        " (SELECT count(*) FROM sessions s WHERE s.task_id = ids.task_id),"
        " (SELECT count(*) FROM sessions s WHERE s.task_id = ids.task_id AND s.state != 'ended'), t.budget_usd"
        " FROM ids LEFT JOIN tasks t ON t.task_id = ids.task_id WHERE (? IS NULL OR coalesce(t.state, 'open') = ?)"
        " ORDER BY upd DESC LIMIT ?",
        (state, state, limit),
    ).fetchall()
    return [{"task_id": r[0], "state": r[1], "cancelled": r[1] == "cancelled", "description": r[2],
             "progress": r[3], "updated_at": iso(r[4]), "cancel_reason": r[5], "sessions": r[6],
             "sessions_not_ended": r[7], "budget_usd": r[8], **_spend(conn, r[0])} for r in rows]


@task.command(name="list")
@click.option("--state", type=click.Choice(["open", "cancelled", "done", "blocked"]), default=None, help="Only tasks in this state.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100000), help="Most tasks listed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_cmd(state: str | None, limit: int, as_json: bool) -> None:
    """List tasks, most recently updated first, with their sessions and state."""
    store = open_store()
    tasks: list[dict[str, Any]] = []
    if store is not None:
        try:
            tasks = list_tasks(store.conn, state, limit)
        finally:
            store.close()
    if as_json:
        echo_json({"tasks": tasks})
        return
    if not tasks:
        click.echo("no tasks recorded" + (f" in state {state}" if state else ""))
        return
    click.echo(f"{'TASK':24} {'STATE':10} {'SESSIONS':>8}  {'COST':>20}  {'UPDATED':20}  DESCRIPTION")
    for t in tasks:
        click.echo(f"{cell(t['task_id'], 24)} {cell(t['state'], 10)} {t['sessions']:>8}  {_money(t):>20}"
                   f"  {cell(t['updated_at'], 20)}  {cell(one_line(t['description'] or '-', 60))}")


def _money(t: dict[str, Any]) -> str:
    """'$1.20', '$1.20 of $5.00' with a budget, marked when part of it is unpriced."""
    from agent_hooks.cli.cost import usd_text

    text = usd_text(t["cost_usd"], t["unpriced"])
    return f"{text} of {money.usd(t['budget_usd'])}" if t.get("budget_usd") else text


def _selector_options(fn: Any) -> Any:
    fn = click.option("--server", default=None, metavar="URL",
                      help="Send it to this command center (agent-hook server) instead of this host's store.")(fn)
    fn = click.option("--host", default=None, metavar="NAME", help="With --server and --tmux: the host of that tmux session.")(fn)
    fn = click.option("--tmux", "tmux", default=None, metavar="NAME", help="The live sessions in this tmux session.")(fn)
    fn = click.option("--task", "task_id", default=None, metavar="TASK_ID", help="A task: all its sessions, present and future.")(fn)
    return click.argument("session_id", required=False)(fn)


OPENCLAW_PREFIX = "oc-"  # OpenClaw sessions' cards and requests (agent_hooks.openclaw.frames)


def _select(session_id: str | None, task_id: str | None, tmux: str | None) -> None:
    given = [x for x in (session_id, task_id, tmux) if x]
    if len(given) != 1:
        raise click.UsageError("say what to cancel: give exactly one of SESSION_ID (or a unique prefix), "
                               "--task TASK_ID, --tmux NAME")


def _tmux_sessions(conn: sqlite3.Connection, name: str) -> list[str]:
    rows = conn.execute(
        "SELECT session_id FROM sessions WHERE tmux_session = ? AND state != 'ended'", (name,)
    ).fetchall()
    if not rows:
        raise NotFound(f"no live session recorded in tmux session {name!r}")
    return [r[0] for r in rows]


def do_cancel(session_id: str | None, task_id: str | None, tmux: str | None, reason: str) -> dict[str, Any]:
    """Mark the selection cancelled; what was cancelled (the `cancel --json` shape)."""
    now = time.time()
    with writing() as conn:
        if task_id:
            # Exact task id: cancelling a task nobody runs yet is how future sessions are stopped.
            task_id = _task_id(task_id)
            ensure_task(conn, task_id, now)
            conn.execute(
                "UPDATE tasks SET state = 'cancelled', cancel_reason = ?, cancelled_at = ?, updated_at = ?"
                " WHERE task_id = ?",
                (reason, now, now, task_id),
            )
            n = conn.execute("SELECT count(*) FROM sessions WHERE task_id = ?", (task_id,)).fetchone()[0]
            return {"task_id": task_id, "sessions": [], "task_sessions": n, "reason": reason, "cancelled": True}
        targets = [resolve(conn, SESSIONS, session_id, "session")] if session_id else _tmux_sessions(conn, tmux or "")
        for sid in targets:
            conn.execute("UPDATE sessions SET cancelled_at = ?, cancel_reason = ? WHERE session_id = ?",
                         (now, reason, sid))
    return {"task_id": None, "sessions": targets, "reason": reason, "cancelled": True}


def do_uncancel(session_id: str | None, task_id: str | None, tmux: str | None) -> dict[str, Any]:
    """Lift the cancellation of the selection; what was lifted (the `uncancel --json` shape)."""
    now = time.time()
    with writing() as conn:
        if task_id:
            task_id = resolve(conn, TASKS, task_id, "task")
            if not conn.execute(
                "UPDATE tasks SET state = 'open', cancel_reason = NULL, cancelled_at = NULL, updated_at = ?"
                " WHERE task_id = ? AND state = 'cancelled'",
                (now, task_id),
            ).rowcount:
                raise click.ClickException(f"task {task_id!r} is not cancelled")
            return {"task_id": task_id, "sessions": [], "cancelled": False}
        if session_id:
            targets = [resolve(conn, SESSIONS, session_id, "session")]
        else:
            targets = [r[0] for r in conn.execute("SELECT session_id FROM sessions WHERE tmux_session = ?", (tmux,))]
            if not targets:
                raise NotFound(f"no session recorded in tmux session {tmux!r}")
        for sid in targets:
            conn.execute("UPDATE sessions SET cancelled_at = NULL, cancel_reason = NULL WHERE session_id = ?", (sid,))
    return {"task_id": None, "sessions": targets, "cancelled": False}


def _cancel_text(result: dict[str, Any]) -> str:
    if result["task_id"]:
        if result["cancelled"]:
            return f"task {result['task_id']}: cancelled ({plural(result['task_sessions'], 'session')} recorded)"
        return f"task {result['task_id']}: no longer cancelled"
    verb = "cancelled" if result["cancelled"] else "no longer cancelled"
    return "\n".join(f"session {sid}: {verb}" for sid in result["sessions"])


REASON_HELP = "Why: the agent reads it, so say what to do instead if anything."


def _need_reason(reason: str | None) -> str:
    if not reason or not reason.strip():
        raise click.UsageError("give --reason: the agent reads it (say why, and what to do instead if anything)")
    return reason


@click.command()
@_selector_options
@click.option("--reason", default=None, help=REASON_HELP + "  [required]")
@JSON_OPTION
def cancel(session_id: str | None, task_id: str | None, tmux: str | None, reason: str | None, as_json: bool,
           server: str | None, host: str | None) -> None:
    """Cancel a session (id or unique prefix), a task, or the sessions of a tmux session.

    From its next hook call the agent's tool calls are denied and new prompts
    are blocked, with REASON; `agent-hook uncancel` lifts it. With --server, the
    command center marks it and the session's own host applies it (within 2 s).
    """
    _select(session_id, task_id, tmux)
    if not server and session_id and session_id.startswith(OPENCLAW_PREFIX):
        # An OpenClaw session lives on the server's gateway connection: the server aborts its run (docs/openclaw.md).
        from agent_hooks.cli.fleet import local_server

        server = local_server()
    if server:
        from agent_hooks.cli.fleet import remote

        click.echo("\n".join(remote(server, "cancel", session_id, task_id, tmux, _need_reason(reason), host)))
        return
    result = do_cancel(session_id, task_id, tmux, _need_reason(reason))
    _done(as_json, result, _cancel_text(result))


@click.command()
@_selector_options
@JSON_OPTION
def uncancel(session_id: str | None, task_id: str | None, tmux: str | None, as_json: bool, server: str | None,
             host: str | None) -> None:
    """Lift a cancellation (same selectors as `cancel`, --server too)."""
    _select(session_id, task_id, tmux)
    if not server and session_id and session_id.startswith(OPENCLAW_PREFIX):
        from agent_hooks.cli.fleet import local_server

        server = local_server()  # the server says why an OpenClaw run cannot be uncancelled
    if server:
        from agent_hooks.cli.fleet import remote

        click.echo("\n".join(remote(server, "uncancel", session_id, task_id, tmux, None, host)))
        return
    result = do_uncancel(session_id, task_id, tmux)
    _done(as_json, result, _cancel_text(result))


@task.command(name="cancel")
@click.argument("task_id")
@click.option("--reason", default=None, help=REASON_HELP + "  [required]")
@JSON_OPTION
def task_cancel(task_id: str, reason: str | None, as_json: bool) -> None:
    """Cancel TASK_ID: every session of it, present and future, stops at its next hook call.

    The same as `agent-hook cancel --task TASK_ID`.
    """
    result = do_cancel(None, task_id, None, _need_reason(reason))
    _done(as_json, result, _cancel_text(result))


@task.command(name="uncancel")
@click.argument("task_id")
@JSON_OPTION
def task_uncancel(task_id: str, as_json: bool) -> None:
    """Lift the cancellation of TASK_ID (the same as `agent-hook uncancel --task TASK_ID`)."""
    result = do_uncancel(None, task_id, None)
    _done(as_json, result, _cancel_text(result))


for _command in persist_cli.TASK_COMMANDS:
    task.add_command(_command)

COMMANDS = [task, cancel, uncancel]
