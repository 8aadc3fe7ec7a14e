"""task persist / done / blocked, and `task create --persist`: a task that holds its workers at Stop.

See features/persist.py for what Stop does with it and docs/persistence.md.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import click

from agent_hooks.cli.common import echo_json, iso, load_config, writing
from agent_hooks.features import persist as persist_mod

PERSIST_COLUMNS = ("persist", "max_continuations", "continuations", "done_note", "done_at", "blocked_reason",
                   "blocked_at", "last_bypass", "last_bypass_at")


def set_persist(conn: sqlite3.Connection, task_id: str, on: bool, max_continuations: int | None) -> None:
    """Turn persistence on (with a fresh continuation budget) or off."""
    if max_continuations is not None and max_continuations < 0:
        raise click.ClickException("--max-continuations must be 0 or more")
    conn.execute(
        "UPDATE tasks SET persist = ?, max_continuations = coalesce(?, max_continuations),"
        " continuations = CASE WHEN ? THEN 0 ELSE continuations END, updated_at = ? WHERE task_id = ?",
        (1 if on else 0, max_continuations, on, time.time(), task_id),
    )


def persist_fields(conn: sqlite3.Connection, task_id: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The persistence part of `task show --json` (fields are only ever added)."""
    row = conn.execute(f"SELECT {', '.join(PERSIST_COLUMNS)} FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    rec: dict[str, Any] = dict(zip(PERSIST_COLUMNS, row, strict=True)) if row else {}
    cfg = config or load_config()
    rec["persists"] = persist_mod.enabled_for(rec.get("persist"), cfg)
    if rec.get("max_continuations") is None:
        rec["max_continuations"] = int(cfg["persist"]["max_continuations"])
    rec["continuations"] = int(rec.get("continuations") or 0)
    for key in ("done_at", "blocked_at", "last_bypass_at"):
        rec[key] = iso(rec.get(key))
    return rec


def _existing(conn: sqlite3.Connection, task_id: str) -> str:
    row = conn.execute("SELECT state FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    if row is None:
        raise click.ClickException(f"no task {task_id!r} recorded")
    return row[0]


# Every command that changes things takes --json (it prints the task's persistence record).
JSON = click.option("--json", "as_json", is_flag=True, help="Print the task's persistence fields as JSON.")


def _report(task_id: str, as_json: bool, text: str) -> None:
    if not as_json:
        click.echo(text)
        return
    with writing() as conn:
        state = _existing(conn, task_id)
        echo_json({"task_id": task_id, "state": state, **persist_fields(conn, task_id)})


@click.command(name="persist")
@click.argument("task_id")
@click.option("--off", is_flag=True, help="Stop holding the task's workers.")
@click.option("--max-continuations", type=int, default=None, metavar="N",
              help="Stop blocks the task may cost (default: persist.max_continuations).")
@JSON
def persist_cmd(task_id: str, off: bool, max_continuations: int | None, as_json: bool = False) -> None:
    """Make a task hold its workers at Stop until it is done or blocked (--off: no longer).

    Turning it on grants a fresh continuation budget.
    """
    with writing() as conn:
        _existing(conn, task_id)
        set_persist(conn, task_id, not off, max_continuations)
    _report(task_id, as_json, f"task {task_id}: {'no longer persists' if off else 'persists'}")


@click.command(name="done")
@click.argument("task_id")
@click.option("--note", default=None, help="What was done (kept on the task).")
@JSON
def done_cmd(task_id: str, note: str | None, as_json: bool = False) -> None:
    """Mark a task done: its workers may stop. (Allowed even where other guards deny.)"""
    _finish(task_id, "done", note, as_json)


@click.command(name="blocked")
@click.argument("task_id")
@click.argument("reason")
@JSON
def blocked_cmd(task_id: str, reason: str, as_json: bool = False) -> None:
    """Mark a task blocked, with REASON: its workers may stop and a lead sees why."""
    if not reason.strip():
        raise click.ClickException("say why the task is blocked")
    _finish(task_id, "blocked", reason, as_json)


def _finish(task_id: str, state: str, text: str | None, as_json: bool = False) -> None:
    now = time.time()
    with writing() as conn:
        current = _existing(conn, task_id)
        if current == "cancelled":
            raise click.ClickException(f"task {task_id!r} was cancelled; leave your report with"
                                       f" `agent-hook task progress {persist_mod.shell_word(task_id)} '<report>'`")
        if state == "done":
            conn.execute("UPDATE tasks SET state = 'done', done_note = ?, done_at = ?, updated_at = ? WHERE task_id = ?",
                         (text, now, now, task_id))
        else:
            conn.execute("UPDATE tasks SET state = 'blocked', blocked_reason = ?, blocked_at = ?, updated_at = ?"
                         " WHERE task_id = ?", (text, now, now, task_id))
    _report(task_id, as_json, f"task {task_id}: {state}")


def create_options(fn: Any) -> Any:
    """`task create --persist [--max-continuations N]`."""
    fn = click.option("--max-continuations", type=int, default=None, metavar="N",
                      help="With --persist: Stop blocks the task may cost.")(fn)
    return click.option("--persist", "persist_on", is_flag=True,
                         help="Hold the task's workers at Stop until it is done or blocked.")(fn)


# Subcommands of `agent-hook task` (cli/tasks.py adds them to its group).
TASK_COMMANDS = [persist_cmd, done_cmd, blocked_cmd]
COMMANDS: list[click.Command] = []
