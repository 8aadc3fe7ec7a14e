"""Bounded error storage (the error log rotates, the errors table keeps its newest rows) and a
private configuration cache under umask 022."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

from agent_hooks.store import PRUNE_ERRORS_EVERY

from support.repo import fixture_payload
from support.scripts import BIN, EXECUTABLES, agent_hook, error_log, run_exe, store_rows


def test_one_huge_message_cannot_outgrow_the_log(hooks_home: Path) -> None:
    payload = fixture_payload("PreToolUse-Bash.json")
    # The event name is quoted in the refusal: 3 MB of it once made a 3 MB log line.
    proc = run_exe(EXECUTABLES["PreToolUse"], {**payload, "hook_event_name": "X" * 3_000_000})
    assert proc.returncode == 0 and len(proc.stderr) < 3000
    log = hooks_home / "logs" / "errors.log"
    assert log.stat().st_size < 10_000
    assert error_log(hooks_home)[-1]["kind"] == "bad_input"


def test_rotation_holds_for_every_line(hooks_home: Path) -> None:
    from agent_hooks.paths import Paths
    from agent_hooks.runner import log_error

    paths = Paths({"AGENT_HOOKS_HOME": str(hooks_home)})
    config = {"errors": {"max_log_bytes": 20_000, "max_line_chars": 500}}
    for _ in range(40):
        log_error(paths, "PreToolUse", "error", "M" * 3_000_000, "s" * 1_000_000, "T" * 3_000_000, config)
    log = hooks_home / "logs" / "errors.log"
    assert log.stat().st_size <= 20_000
    assert (hooks_home / "logs" / "errors.log.1").stat().st_size <= 20_000
    entries = error_log(hooks_home)
    assert entries and all(len(e["message"]) < 600 and len(e["traceback"]) < 2100 for e in entries)
    assert all(len(e["session_id"]) <= 256 for e in entries)


def test_errors_table_keeps_the_newest_rows(hooks_home: Path) -> None:
    from agent_hooks.store import PRUNE_ERRORS_EVERY, Store, record_error

    store = Store(str(hooks_home / "store.db"))
    try:
        with store.write() as conn:
            for i in range(300):
                record_error(conn, "PreToolUse", "error", f"error {i}", None, keep_rows=50)
        rows = store.conn.execute("SELECT min(id), max(id), count(*) FROM errors").fetchone()
        assert rows[1] == 300
        assert rows[2] <= 50 + PRUNE_ERRORS_EVERY
        # An old row goes even when the table is small.
        store.conn.execute("UPDATE errors SET at = at - 40 * 86400 WHERE id = 299")
        with store.write() as conn:
            for _ in range(PRUNE_ERRORS_EVERY):
                record_error(conn, "PreToolUse", "error", "new", None)
        assert store.conn.execute("SELECT count(*) FROM errors WHERE id = 299").fetchone()[0] == 0
    finally:
        store.close()


def test_errors_table_is_pruned_by_the_hooks_as_configured(hooks_home: Path) -> None:
    run_exe(EXECUTABLES["SessionStart"], fixture_payload("SessionStart-startup.json"))
    # The errors of earlier hooks (a hook prunes when its row id is a multiple of PRUNE_ERRORS_EVERY):
    # written here, so that ten hook processes cross that mark instead of seventy.
    earlier = 70 - 10
    assert earlier < PRUNE_ERRORS_EVERY < 70
    with sqlite3.connect(hooks_home / "store.db") as conn:
        conn.executemany("INSERT INTO errors (at, event, kind, message) VALUES (?, 'PreToolUse', 'bad_input', 'x')",
                         [(time.time(),)] * earlier)
    conn.close()
    env = {"AGENT_HOOKS__ERRORS__KEEP_ROWS": "5"}
    for _ in range(70 - earlier):
        run_exe(EXECUTABLES["PreToolUse"], b"not json", env=env)
    assert store_rows(hooks_home, "SELECT count(*) FROM errors")[0][0] <= 5 + (70 - PRUNE_ERRORS_EVERY)
    assert store_rows(hooks_home, "SELECT max(id) FROM errors")[0][0] == 70


def test_config_cache_is_private_under_umask_022(hooks_home: Path) -> None:
    hooks_home.mkdir(parents=True, exist_ok=True)
    config = hooks_home / "config.toml"
    config.write_text('[identity]\nagent = "secret-agent"\n')
    config.chmod(0o600)
    # The CLI, run under a permissive umask, parses the file and writes the cache.
    proc = subprocess.run(["sh", "-c", f"umask 022; exec {BIN / 'agent-hook'} queue"], capture_output=True,
                          text=True, env=dict(os.environ), timeout=60)
    assert proc.returncode == 0, proc.stderr
    cache = hooks_home / "config.cache.json"
    assert cache.exists()
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert agent_hook("status").returncode == 0
