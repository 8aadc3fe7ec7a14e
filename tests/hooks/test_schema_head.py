"""A new store is created from the snapshot of the current schema, the same as one migrated step by step.

The first process to meet a new store used to import sqlite-utils and run every migration
(about 200 ms of CPU); agent_hooks/schema_head.py replays data/schema.sql in one stdlib
transaction instead. These tests hold the snapshot to the migrations it stands for.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from agent_hooks import schema, schema_head
from agent_hooks.store import SCHEMA_VERSION, Store


def _shape(path: Path) -> dict[str, object]:
    conn = sqlite3.connect(path)
    try:
        return {
            "objects": sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
                              key=lambda r: (r[0], r[1])),
            "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
            "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
            "migrations": conn.execute("SELECT id, migration_set, name FROM _sqlite_migrations ORDER BY id").fetchall(),
        }
    finally:
        conn.close()


def test_the_snapshot_is_the_current_schema(tmp_path: Path) -> None:
    stepped = tmp_path / "stepped.db"
    assert schema.migrate(str(stepped), step_by_step=True) == schema.MIGRATIONS
    conn = sqlite3.connect(stepped)
    try:
        text = schema_head.dump(conn, list(schema.MIGRATIONS))
    finally:
        conn.close()
    assert Path(schema_head.HEAD_FILE).read_text() == text, (
        "agent_hooks/data/schema.sql is not the current schema: rewrite it with `python -m agent_hooks.schema`")


def test_a_new_store_from_the_snapshot_equals_one_migrated_step_by_step(tmp_path: Path) -> None:
    stepped, snap = tmp_path / "stepped.db", tmp_path / "snap.db"
    schema.migrate(str(stepped), step_by_step=True)
    assert schema_head.create_if_empty(str(snap), SCHEMA_VERSION) == schema.MIGRATIONS
    assert _shape(snap) == _shape(stepped)
    assert stat.S_IMODE(os.stat(snap).st_mode) == 0o600
    # sqlite-utils reads the record as its own: nothing is pending, and a second migrate does nothing.
    import sqlite_utils

    assert schema.MIGRATION_SET.pending(sqlite_utils.Database(str(snap))) == []
    assert schema.migrate(str(snap)) == []
    # The schema works: a hook's writes land.
    store = Store(str(snap))
    with store.write() as conn:
        conn.execute("INSERT INTO sessions (session_id, first_seen_at, last_seen_at) VALUES ('s', 1, 1)")
    store.close()


def test_only_an_empty_store_at_the_snapshots_version_takes_it(tmp_path: Path) -> None:
    # A snapshot standing for other migrations than the code's is not used.
    assert schema_head.create_if_empty(str(tmp_path / "a.db"), SCHEMA_VERSION + 1) is None
    assert _tables(tmp_path / "a.db") == set()
    # A store that exists and is behind migrates step by step, keeping its rows.
    behind = tmp_path / "behind.db"
    import sqlite_utils

    db = sqlite_utils.Database(str(behind))
    schema.MIGRATION_SET.apply(db, stop_before=schema.MIGRATIONS[-1])
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    db.execute("INSERT INTO sessions (session_id, first_seen_at, last_seen_at) VALUES ('kept', 1, 1)")
    db.conn.commit()
    db.close()
    assert schema_head.create_if_empty(str(behind), SCHEMA_VERSION) is None
    Store(str(behind)).close()
    fresh = tmp_path / "fresh.db"
    schema.migrate(str(fresh), step_by_step=True)
    assert _shape(behind)["user_version"] == SCHEMA_VERSION
    assert {r[:2] for r in _shape(behind)["objects"]} == {r[:2] for r in _shape(fresh)["objects"]}
    conn = sqlite3.connect(behind)
    assert conn.execute("SELECT session_id FROM sessions").fetchall() == [("kept",)]
    conn.close()


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()


def test_the_first_hook_on_a_new_store_stays_on_the_standard_library(hooks_home: Path) -> None:
    """The hook path's rule holds on a new store too: no sqlite-utils (nor numpy through it)."""
    payload = json.dumps({"session_id": "s-new", "hook_event_name": "SessionStart", "source": "startup",
                          "cwd": str(hooks_home), "transcript_path": ""})
    code = ("import sys, io, json\n"
            f"sys.stdin = io.TextIOWrapper(io.BytesIO({payload!r}.encode()))\n"
            "from agent_hooks.events import session_start\n"
            "from agent_hooks.runner import run\n"
            "run(session_start.EVENT, session_start.handle, fast_exit=False)\n"
            "sys.stderr.write(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('sqlite_utils', 'numpy', 'click', 'httpx', 'filelock'))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == []
    found = list(hooks_home.rglob("*.db"))
    assert found, "the hook created no store"
    assert _shape(found[0])["user_version"] == SCHEMA_VERSION
