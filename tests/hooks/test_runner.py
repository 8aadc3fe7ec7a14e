"""The runner's promises: bad input, internal errors and a stuck store all end in exit 0."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest

from support.repo import fixture_payload
from support.scripts import BIN, error_log, run_exe, run_hook, store_rows

BAD_INPUTS = {
    "empty": b"",
    "whitespace": b"  \n",
    "not-json": b"{this is not json",
    "array": b'[{"hook_event_name": "PreToolUse"}]',
    "string": b'"PreToolUse"',
    "null": b"null",
    "invalid-utf8": b'{"hook_event_name": "PreToolUse", "session_id": "\xff\xfe"}',
    "missing-session": json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}}).encode(),
    "missing-event": json.dumps({"session_id": "s1"}).encode(),
}


def _wrong_types() -> dict[str, bytes]:
    cases = {}
    base = fixture_payload("PreToolUse-Bash.json")
    for field, value in (("session_id", 42), ("tool_input", "rm -rf /"), ("tool_name", ["Bash"]), ("cwd", {"a": 1})):
        bad = dict(base)
        bad[field] = value
        cases[f"wrong-{field}"] = json.dumps(bad).encode()
    return cases


@pytest.mark.parametrize("name,data", sorted({**BAD_INPUTS, **_wrong_types()}.items()))
def test_bad_input_is_one_stderr_line_exit_0_and_logged(name: str, data: bytes, hooks_home: Path) -> None:
    proc = run_exe("agent-hook-pre-tool-use", data)
    assert proc.returncode == 0
    assert proc.stdout == b""
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("agent-hooks: PreToolUse:")
    log = error_log(hooks_home)
    assert log and log[-1]["kind"] == "bad_input" and log[-1]["event"] == "PreToolUse"


def test_bad_input_is_counted_in_the_store(hooks_home: Path) -> None:
    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0
    run_exe("agent-hook-pre-tool-use", b"not json")
    rows = store_rows(hooks_home, "SELECT kind, event FROM errors")
    assert [tuple(r) for r in rows] == [("bad_input", "PreToolUse")]


def test_five_megabyte_payload(hooks_home: Path) -> None:
    payload = fixture_payload("PreToolUse-Write.json")
    payload["tool_input"]["content"] = "x" * (5 * 1024 * 1024)
    proc = run_exe("agent-hook-pre-tool-use", payload)
    assert proc.returncode == 0 and proc.stdout == b""
    assert b"over the" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert error_log(hooks_home)[-1]["kind"] == "bad_input"


def test_large_payload_under_the_limit_is_recorded(hooks_home: Path) -> None:
    payload = fixture_payload("PreToolUse-Write.json")
    payload["tool_input"]["content"] = "y" * (1024 * 1024)
    proc = run_exe("agent-hook-pre-tool-use", payload)
    assert proc.returncode == 0 and proc.stderr == b""
    assert store_rows(hooks_home, "SELECT count(*) FROM tool_calls")[0][0] == 1


def test_corrupt_store_fails_open_and_is_logged(hooks_home: Path) -> None:
    hooks_home.mkdir(parents=True)
    (hooks_home / "store.db").write_bytes(b"this is not a database" * 200)
    proc = run_hook(fixture_payload("PreToolUse-Bash.json"))
    assert proc.returncode == 0
    assert proc.stdout == b""
    assert b"Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and b"internal error" in proc.stderr
    entry = error_log(hooks_home)[-1]
    assert entry["kind"] == "error" and "DatabaseError" in entry["message"]
    assert "Traceback" in entry["traceback"]
    assert entry["session_id"] == fixture_payload("PreToolUse-Bash.json")["session_id"]


def test_locked_store_hits_the_deadline_and_answers_fail_open(hooks_home: Path) -> None:
    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0
    blocker = sqlite3.connect(hooks_home / "store.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        env = {"AGENT_HOOKS_DEADLINE_MS": "300", "AGENT_HOOKS_BUSY_TIMEOUT_MS": "20000"}
        started = time.monotonic()
        proc = run_hook(fixture_payload("PreToolUse-Bash.json"), env=env)
        elapsed = time.monotonic() - started
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert proc.returncode == 0 and proc.stdout == b""
    assert b"deadline of 300 ms passed" in proc.stderr
    # The busy timeout (20 s) was not what ended it: the deadline was.
    assert elapsed < 15
    # Fail-open is not lost: the call was spooled, and is not in the store yet.
    assert error_log(hooks_home)[-1]["kind"] == "spooled"
    assert store_rows(hooks_home, "SELECT count(*) FROM tool_calls")[0][0] == 0


def _hook_with_late_payload(home: Path, payload: bytes | None, late_s: float,
                            env: dict[str, str]) -> tuple[subprocess.CompletedProcess[bytes], float]:
    """Start PostToolUse, write its payload ``late_s`` later (never, if None); the result and its wall time."""
    full = dict(os.environ, AGENT_HOOKS_HOME=str(home), **env)
    started = time.monotonic()
    proc = subprocess.Popen([str(BIN / "agent-hook-post-tool-use")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full)
    time.sleep(late_s)
    if payload is not None:
        out, err = proc.communicate(payload, timeout=30)
    else:  # stdin stays open: the payload never comes
        assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=30)
        proc.stdin.close()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), time.monotonic() - started


def test_a_payload_that_comes_after_the_deadline_is_still_recorded(hooks_home: Path) -> None:
    """A starved client writes late; the deadline counts from the read, so the call is kept."""
    payload = fixture_payload("PostToolUse-Bash.json")
    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0  # the store exists
    proc, elapsed = _hook_with_late_payload(hooks_home, json.dumps(payload).encode(), 2.0,
                                            {"AGENT_HOOKS_DEADLINE_MS": "1000"})
    assert proc.returncode == 0 and proc.stdout == b"", proc.stderr
    assert b"deadline" not in proc.stderr
    rows = store_rows(hooks_home, "SELECT tool_use_id FROM tool_calls")
    assert [r[0] for r in rows] == [payload["tool_use_id"]]


def test_a_payload_that_never_comes_ends_before_the_clients_timeout(hooks_home: Path) -> None:
    hooks_home.mkdir(parents=True)
    (hooks_home / "config.toml").write_text("[install]\nhook_timeout_s = 2\n")
    proc, elapsed = _hook_with_late_payload(hooks_home, None, 0.0, {"AGENT_HOOKS_DEADLINE_MS": "300"})
    assert proc.returncode == 0 and proc.stdout == b""
    assert b"deadline of 300 ms passed before the payload was read" in proc.stderr
    # Waited past its own deadline for the payload, but answered a second before Claude Code's 2 s.
    assert 0.5 < elapsed < 2.0, elapsed


def test_invalid_config_file_runs_on_defaults_and_says_so(hooks_home: Path) -> None:
    hooks_home.mkdir(parents=True)
    (hooks_home / "config.toml").write_text("[runtime\ndeadline_ms = ")
    proc = run_hook(fixture_payload("PreToolUse-Bash.json"))
    assert proc.returncode == 0 and proc.stdout == b""
    assert b"configuration: file ignored" in proc.stderr
    assert store_rows(hooks_home, "SELECT count(*) FROM tool_calls")[0][0] == 1
    assert error_log(hooks_home)[-1]["kind"] == "config"


@pytest.mark.parametrize("toml", [
    '[runtime]\ndeadline_ms = "soon"\n',
    "runtime = 5\n",
    '[loops]\nwindow = "x"\n',
    '[[polling.extra_rules]]\nname = "x"\ncommand = "watch"\nmax_calls = "many"\n',
    '[loops.tools.Bash]\nrepeat_warn = "x"\n',
])
def test_a_bad_setting_costs_that_setting_not_the_hooks_work(toml: str, hooks_home: Path) -> None:
    hooks_home.mkdir(parents=True)
    (hooks_home / "config.toml").write_text(toml)
    payload = fixture_payload("PreToolUse-Bash.json")
    proc = run_hook(payload)
    assert proc.returncode == 0 and proc.stdout == b""
    assert len(proc.stderr.splitlines()) == 1 and b"configuration:" in proc.stderr
    assert store_rows(hooks_home, "SELECT count(*) FROM tool_calls")[0][0] == 1
    assert store_rows(hooks_home, "SELECT count(*) FROM errors")[0][0] == 0


def test_a_bad_variable_keeps_the_rest_of_the_file(hooks_home: Path) -> None:
    hooks_home.mkdir(parents=True)
    (hooks_home / "config.toml").write_text('[identity]\nagent = "ada"\n')
    proc = run_hook(fixture_payload("SessionStart-startup.json"), env={"AGENT_HOOKS_DEADLINE_MS": "soon"})
    assert proc.returncode == 0 and b"AGENT_HOOKS_DEADLINE_MS" in proc.stderr
    assert store_rows(hooks_home, "SELECT agent FROM sessions")[0][0] == "ada"


def test_unreadable_config_file_is_not_fatal(hooks_home: Path) -> None:
    hooks_home.mkdir(parents=True)
    (hooks_home / "config.toml").mkdir()  # a directory where the file should be
    proc = run_hook(fixture_payload("PreToolUse-Bash.json"))
    assert proc.returncode == 0 and proc.stdout == b""
    assert store_rows(hooks_home, "SELECT count(*) FROM tool_calls")[0][0] == 1


def test_files_are_private(hooks_home: Path) -> None:
    run_hook(fixture_payload("PreToolUse-Bash.json"))
    run_exe("agent-hook-pre-tool-use", b"junk")
    for path in [hooks_home / "store.db", hooks_home / "logs" / "errors.log"]:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert mode == 0o600, (path, oct(mode))
    assert stat.S_IMODE(os.stat(hooks_home).st_mode) == 0o700


def test_store_is_wal_with_current_schema(hooks_home: Path) -> None:
    from agent_hooks import schema, store

    run_hook(fixture_payload("SessionStart-startup.json"))
    conn = sqlite3.connect(hooks_home / "store.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION == len(schema.MIGRATIONS)
    names = [r[0] for r in conn.execute("SELECT name FROM _sqlite_migrations ORDER BY id")]
    assert names == schema.MIGRATIONS


HEAVY = ("click", "httpx", "sqlite_utils", "filelock", "starlette", "uvicorn", "anyio", "httptools", "uvloop", "yaml")


@pytest.mark.parametrize("name", ["PreToolUse-Bash.json", "PostToolUse-Bash.json", "PostToolUseFailure-Bash.json",
                                  "SessionStart-startup.json", "UserPromptSubmit.json", "Stop.json",
                                  "PreCompact-manual.json", "SessionEnd.json"])
def test_steady_state_hook_imports_only_the_standard_library(name: str, hooks_home: Path) -> None:
    from support.scripts import EXECUTABLES

    payload = fixture_payload(name)
    run_hook(payload)  # the first call may create the store (sqlite-utils, filelock)
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    exe = BIN / EXECUTABLES[payload["hook_event_name"]]
    proc = subprocess.run([str(exe)], input=json.dumps(payload).encode(), capture_output=True, env=env, timeout=30)
    assert proc.returncode == 0
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
    assert "agent_hooks.runner" in imported  # the check sees our own imports
    loaded_heavy = {m for m in imported if m.split(".")[0] in HEAVY}
    assert not loaded_heavy, f"hook path loaded {sorted(loaded_heavy)}"


def test_migrating_store_loads_sqlite_utils_only_when_behind(hooks_home: Path) -> None:
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    exe = BIN / "agent-hook-pre-tool-use"
    data = json.dumps(fixture_payload("PreToolUse-Bash.json")).encode()
    first = subprocess.run([str(exe)], input=data, capture_output=True, env=env, timeout=30)
    # A new store is created from the schema's snapshot (agent_hooks/schema_head.py), stdlib only.
    assert b"agent_hooks.schema_head" in first.stderr and b"sqlite_utils" not in first.stderr
    from agent_hooks import store

    conn = sqlite3.connect(hooks_home / "store.db")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm003_guards'")
    conn.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION - 1}")
    conn.commit()
    conn.close()
    behind = subprocess.run([str(exe)], input=data, capture_output=True, env=env, timeout=30)
    assert b"sqlite_utils" in behind.stderr  # migrated the store that was behind
    second = subprocess.run([str(exe)], input=data, capture_output=True, env=env, timeout=30)
    assert b"sqlite_utils" not in second.stderr


def test_a_store_missing_one_migration_gets_it_by_name(hooks_home: Path) -> None:
    """Migrations are recorded by name: a store that skipped one (built by a branch that
    lacked it) is behind, and the next hook applies exactly the missing one."""
    from agent_hooks import schema, store

    run_hook(fixture_payload("SessionStart-startup.json"))
    conn = sqlite3.connect(hooks_home / "store.db")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm003_guards'")
    conn.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION - 1}")
    conn.commit()
    conn.close()
    assert run_hook(fixture_payload("PreToolUse-Bash.json")).returncode == 0
    names = [r[0] for r in store_rows(hooks_home, "SELECT name FROM _sqlite_migrations ORDER BY id")]
    assert sorted(names) == sorted(schema.MIGRATIONS) and names[-1] == "m003_guards"
    assert store_rows(hooks_home, "PRAGMA user_version")[0][0] == store.SCHEMA_VERSION
    assert store_rows(hooks_home, "SELECT count(*) FROM tool_calls")[0][0] == 1
