"""task create / describe / assign / progress / show, and cancel / uncancel.

A cancel mark is a row in the store, so the cancelled agent's very next hook
call (PreToolUse or UserPromptSubmit) sees it: no signal, no polling, no network.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import click

from agent_hooks.cli import persist as persist_cli  # task persist / done / blocked (issue 17)
from agent_hooks.cli.common import echo_json, iso, open_store, writing

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


@click.group()
def task() -> None:
    """Tasks: what sessions work on (a description and a progress text), and their cancellation."""


@task.command(name="create")
@click.argument("task_id")
@click.option("--description", "-d", default=None, help="What the task is.")
@persist_cli.create_options
def create(task_id: str, description: str | None, persist_on: bool = False,
           max_continuations: int | None = None) -> None:
    """Create a task (sessions join it with $AGENT_HOOKS_TASK_ID or `task assign`)."""
    task_id = _task_id(task_id)
    if max_continuations is not None and not persist_on:
        raise click.ClickException("--max-continuations goes with --persist")
    with writing() as conn:
        if not ensure_task(conn, task_id, time.time()):
            raise click.ClickException(f"task {task_id!r} exists; use `agent-hook task describe`")
        if description is not None:
            conn.execute("UPDATE tasks SET description = ? WHERE task_id = ?", (description, task_id))
        if persist_on:
            persist_cli.set_persist(conn, task_id, True, max_continuations)
    click.echo(f"task {task_id}: created" + (" (persists)" if persist_on else ""))


@task.command(name="describe")
@click.argument("task_id")
@click.argument("text")
def describe_cmd(task_id: str, text: str) -> None:
    """Set a task's description (creating the task if needed)."""
    _update(task_id, "description", text)


@task.command(name="progress")
@click.argument("task_id")
@click.argument("text")
def progress(task_id: str, text: str) -> None:
    """Record a task's progress text (what is done, what is next); creates the task if needed."""
    _update(task_id, "progress", text)


def _update(task_id: str, column: str, text: str) -> None:
    task_id = _task_id(task_id)
    now = time.time()
    with writing() as conn:
        ensure_task(conn, task_id, now)
        conn.execute(f"UPDATE tasks SET {column} = ?, updated_at = ? WHERE task_id = ?", (text, now, task_id))
    click.echo(f"task {task_id}: {column} recorded")


@task.command(name="assign")
@click.argument("session_id")
@click.argument("task_id")
def assign(session_id: str, task_id: str) -> None:
    """Make a recorded session part of a task (creating the task if needed).

    A session started with $AGENT_HOOKS_TASK_ID keeps that task: the variable wins.
    """
    task_id = _task_id(task_id)
    with writing() as conn:
        updated = conn.execute(
            "UPDATE sessions SET task_id = ? WHERE session_id = ?", (task_id, session_id)
        ).rowcount
        if not updated:
            raise click.ClickException(
                f"no session {session_id!r} recorded (start it with AGENT_HOOKS_TASK_ID={task_id} instead)"
            )
        ensure_task(conn, task_id, time.time())
    click.echo(f"session {session_id}: task {task_id}")


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
    rec: dict[str, Any] = dict(zip(TASK_COLUMNS, row)) if row else {"task_id": task_id, "state": "open"}
    for key in ("cancelled_at", "created_at", "updated_at"):
        rec[key] = iso(rec.get(key))
    rec["cancelled"] = rec.get("state") == "cancelled"
    if row:
        rec.update(persist_cli.persist_fields(conn, task_id))
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
    """Show a task: description, progress, state, and its sessions."""
    store = open_store()
    data = None
    if store is not None:
        try:
            data = task_record(store.conn, task_id)
        finally:
            store.close()
    if data is None:
        raise click.ClickException(f"no task {task_id!r} recorded")
    if as_json:
        echo_json(data)
        return
    for key in ("task_id", "state", "description", "progress", "cancel_reason", "cancelled_at", "updated_at",
                "done_note", "blocked_reason"):
        if data.get(key) is not None or key in ("task_id", "state"):
            click.echo(f"{key:14} {data.get(key)}")
    if data.get("persists"):
        click.echo(f"{'persists':14} yes, continuations {data['continuations']} of {data['max_continuations']}")
    if data.get("last_bypass"):
        click.echo(f"{'let go':14} {data['last_bypass']} ({data.get('last_bypass_at')})")
    for s in data["sessions"]:
        mark = "  CANCELLED" if s["cancelled"] else ""
        click.echo(f"  session {s['session_id']}  {s['state']}  {s['last_activity_at'] or '-'}{mark}")


def _selector_options(fn: Any) -> Any:
    fn = click.option("--tmux", "tmux", default=None, metavar="NAME", help="The live sessions in this tmux session.")(fn)
    fn = click.option("--task", "task_id", default=None, metavar="TASK_ID", help="A task: all its sessions, present and future.")(fn)
    return click.argument("session_id", required=False)(fn)


def _select(session_id: str | None, task_id: str | None, tmux: str | None) -> None:
    given = [x for x in (session_id, task_id, tmux) if x]
    if len(given) != 1:
        raise click.ClickException("give exactly one of SESSION_ID, --task TASK_ID, --tmux NAME")


def _tmux_sessions(conn: sqlite3.Connection, name: str) -> list[str]:
    rows = conn.execute(
        "SELECT session_id FROM sessions WHERE tmux_session = ? AND state != 'ended'", (name,)
    ).fetchall()
    if not rows:
        raise click.ClickException(f"no live session recorded in tmux session {name!r}")
    return [r[0] for r in rows]


@click.command()
@_selector_options
@click.option("--reason", required=True, help="Why: the agent reads it, so say what to do instead if anything.")
def cancel(session_id: str | None, task_id: str | None, tmux: str | None, reason: str) -> None:
    """Cancel a session, a task, or the sessions of a tmux session.

    From its next hook call the agent's tool calls are denied and new prompts
    are blocked, with REASON; `agent-hook uncancel` lifts it.
    """
    _select(session_id, task_id, tmux)
    now = time.time()
    with writing() as conn:
        if task_id:
            ensure_task(conn, task_id, now)
            conn.execute(
                "UPDATE tasks SET state = 'cancelled', cancel_reason = ?, cancelled_at = ?, updated_at = ?"
                " WHERE task_id = ?",
                (reason, now, now, task_id),
            )
            n = conn.execute("SELECT count(*) FROM sessions WHERE task_id = ?", (task_id,)).fetchone()[0]
            message = f"task {task_id}: cancelled ({n} session(s) recorded)"
        else:
            targets = [session_id] if session_id else _tmux_sessions(conn, tmux or "")
            for sid in targets:
                if not conn.execute(
                    "UPDATE sessions SET cancelled_at = ?, cancel_reason = ? WHERE session_id = ?",
                    (now, reason, sid),
                ).rowcount:
                    raise click.ClickException(f"no session {sid!r} recorded")
            message = "\n".join(f"session {sid}: cancelled" for sid in targets)
    click.echo(message)


@click.command()
@_selector_options
def uncancel(session_id: str | None, task_id: str | None, tmux: str | None) -> None:
    """Lift a cancellation (same selectors as `cancel`)."""
    _select(session_id, task_id, tmux)
    now = time.time()
    with writing() as conn:
        if task_id:
            if not conn.execute(
                "UPDATE tasks SET state = 'open', cancel_reason = NULL, cancelled_at = NULL, updated_at = ?"
                " WHERE task_id = ? AND state = 'cancelled'",
                (now, task_id),
            ).rowcount:
                raise click.ClickException(f"task {task_id!r} is not cancelled")
            message = f"task {task_id}: no longer cancelled"
        else:
            if session_id:
                targets = [session_id]
            else:
                rows = conn.execute("SELECT session_id FROM sessions WHERE tmux_session = ?", (tmux,)).fetchall()
                targets = [r[0] for r in rows]
                if not targets:
                    raise click.ClickException(f"no session recorded in tmux session {tmux!r}")
            for sid in targets:
                if not conn.execute(
                    "UPDATE sessions SET cancelled_at = NULL, cancel_reason = NULL WHERE session_id = ?", (sid,)
                ).rowcount:
                    raise click.ClickException(f"no session {sid!r} recorded")
            message = "\n".join(f"session {sid}: no longer cancelled" for sid in targets)
    click.echo(message)


for _command in persist_cli.TASK_COMMANDS:
    task.add_command(_command)

COMMANDS = [task, cancel, uncancel]
