"""One way to name a session, task or summary on the command line: the id, or a unique prefix of it.

``session show 4e1b`` and ``cancel 4e1b`` resolve the same way as ``summary
show 4e1b``: an exact id wins; else the one id that starts with the prefix;
several is an error that lists them; none is :class:`NotFound` (exit 3).
"""

from __future__ import annotations

import sqlite3

import click

from agent_hooks.cli.common import NotFound

# Candidate ids per kind: a query with one column.
SESSIONS = "SELECT session_id FROM sessions"
TASKS = "SELECT task_id FROM tasks UNION SELECT task_id FROM sessions WHERE task_id IS NOT NULL"
SUMMARIES = "SELECT session_id FROM session_summaries"
SHOWN = 10


def resolve(conn: sqlite3.Connection, candidates: str, given: str, what: str) -> str:
    """The full id ``given`` names among ``candidates`` (an SQL query of one column)."""
    given = given.strip()
    if not given:
        raise click.ClickException(f"the {what} id is empty")
    sql = f"WITH c(id) AS ({candidates}) SELECT DISTINCT id FROM c"
    if conn.execute(f"{sql} WHERE id = ?", (given,)).fetchone():
        return given
    # substr, not LIKE: ids are case-sensitive and may hold % or _.
    rows = [r[0] for r in conn.execute(f"{sql} WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT ?",
                                       (len(given), given, SHOWN + 1))]
    if not rows:
        raise NotFound(f"no {what} {given!r} recorded")
    if len(rows) > 1:
        listed = ", ".join(rows[:SHOWN]) + (", ..." if len(rows) > SHOWN else "")
        raise click.ClickException(f"{what} prefix {given!r} is ambiguous: it matches {listed}; give more of the id")
    return rows[0]
