"""A new store created at the current schema in one step, with the standard library only.

Bringing an empty file through every migration (:mod:`agent_hooks.schema`) imports
sqlite-utils (and, through it, numpy and every installed plugin's entry points when they
are there) and runs each migration in its own transaction: about 200 ms of CPU, paid by
the first hook or command that meets a new store, i.e. by every new installation and by
every test's fresh store. The end state is always the same, so it is kept as SQL
(``data/schema.sql``, written by ``python -m agent_hooks.schema`` from a store
migrated step by step) and replayed in one transaction: a few milliseconds.

Only an empty file takes this path; a store that exists and is behind still migrates
step by step. The snapshot names the migrations it stands for; when they are not the
code's (a migration added without rewriting the file), it is not used, and
tests/hooks/test_schema_head.py fails until the file is rewritten.
"""

from __future__ import annotations

import os
import sqlite3

HEAD_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "schema.sql")
# sqlite-utils' record of applied migrations (sqlite_utils.migrations.Migrations), and our set's name.
MIGRATIONS_TABLE = "_sqlite_migrations"
MIGRATION_SET_NAME = "agent-hooks"
_HEADER = "-- agent-hooks schema, migrations: "


def chmod_private(path: str) -> None:
    """The store and its WAL files are the user's only (0600)."""
    for suffix in ("", "-wal", "-shm"):
        try:
            os.chmod(path + suffix, 0o600)
        except FileNotFoundError:
            pass


def _read_head() -> tuple[list[str], str] | None:
    try:
        with open(HEAD_FILE, encoding="utf-8") as f:
            first = f.readline()
            body = f.read()
    except OSError:
        return None
    if not first.startswith(_HEADER):
        return None
    return first[len(_HEADER):].strip().split(","), body


def create_if_empty(path: str, version: int) -> list[str] | None:
    """Create the current schema in the empty store at ``path``; return the migrations it stands for.

    None (nothing done) when the file already has a schema, or the snapshot does not stand
    for exactly ``version`` migrations: the caller then migrates step by step. The caller
    holds ``PATH.migrate.lock``.
    """
    head = _read_head()
    if head is None or len(head[0]) != version:
        return None
    names, body = head
    if not all(name.isidentifier() for name in names):
        return None
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] != 0 or \
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] != 0:
            return None
        conn.execute("PRAGMA journal_mode=WAL")
        import datetime  # only here: ~1 ms, and only a new store needs a timestamp

        # The format sqlite-utils records (str of an aware UTC datetime), so `applied` reads the same.
        at = str(datetime.datetime.now(datetime.UTC))
        rows = ",".join(f"('{MIGRATION_SET_NAME}', '{name}', '{at}')" for name in names)
        try:
            # One script, one transaction: the schema, sqlite-utils' record of the migrations, the version.
            conn.executescript(f"BEGIN IMMEDIATE;\n{body}\n"
                               f"INSERT INTO [{MIGRATIONS_TABLE}] (migration_set, name, applied_at) VALUES {rows};\n"
                               f"PRAGMA user_version = {version};\nCOMMIT;")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()
    chmod_private(path)
    return names


def dump(conn: sqlite3.Connection, names: list[str]) -> str:
    """The snapshot text of the migrated store on ``conn`` (schema and any rows the migrations wrote).

    Statements are replayed in the order SQLite recorded them; objects a statement creates by
    itself (an FTS5 table's shadow tables, sqlite_sequence, automatic indexes) are left out.
    """
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    statements: list[str] = []
    tables: list[str] = []  # created by a statement of their own, not virtual: their rows are kept too
    for kind, name, sql in conn.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                                        "AND name NOT LIKE 'sqlite_%' ORDER BY rowid").fetchall():
        if scratch.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone():
            continue
        scratch.execute(sql)
        statements.append(sql)
        if kind == "table" and not sql.upper().startswith("CREATE VIRTUAL") and name != MIGRATIONS_TABLE:
            tables.append(name)
    for name in tables:
        for row in conn.execute(f"SELECT * FROM [{name}]"):
            values = ", ".join(str(scratch.execute("SELECT quote(?)", (v,)).fetchone()[0]) for v in row)
            statements.append(f"INSERT INTO [{name}] VALUES ({values})")
    scratch.close()
    return _HEADER + ",".join(names) + "\n" + ";\n\n".join(statements) + ";\n"
