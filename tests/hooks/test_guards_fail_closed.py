"""Strict guards (``guards.fail_closed = true``): a PreToolUse that cannot decide denies, saying
why, instead of letting the tool run; the http entry asks Claude Code to block when the server
cannot be reached. Off by default, and the other events fail open either way."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.ports import free_port
from support.repo import fixture_payload
from support.scripts import agent_hook, error_log, run_hook, store_rows
from support.servers import Server, start_server

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")

STRICT = {"AGENT_HOOKS__GUARDS__FAIL_CLOSED": "true"}


def corrupt_store(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "store.db").write_bytes(b"this is not a database" * 200)


def denial(stdout: bytes) -> str:
    """The deny reason of a PreToolUse answer (fails when the answer is not a deny)."""
    doc = json.loads(stdout)
    specific = doc["hookSpecificOutput"]
    assert specific["hookEventName"] == "PreToolUse" and specific["permissionDecision"] == "deny", doc
    return str(specific["permissionDecisionReason"])


def test_an_internal_error_denies_under_strict_guards(hooks_home: Path) -> None:
    corrupt_store(hooks_home)
    proc = run_hook(fixture_payload("PreToolUse-Bash.json"), env=STRICT)
    assert proc.returncode == 0, proc.stderr
    reason = denial(proc.stdout)
    assert "internal error" in reason and "DatabaseError" in reason and "guards.fail_closed" in reason
    assert b"denied (guards.fail_closed)" in proc.stderr and len(proc.stderr.splitlines()) == 1
    # Still an error, logged where doctor looks, with its traceback.
    entry = error_log(hooks_home)[-1]
    assert entry["kind"] == "error" and "DatabaseError" in entry["message"] and "Traceback" in entry["traceback"]


def test_without_strict_guards_the_same_error_fails_open(hooks_home: Path) -> None:
    corrupt_store(hooks_home)
    proc = run_hook(fixture_payload("PreToolUse-Bash.json"), env={"AGENT_HOOKS__GUARDS__FAIL_CLOSED": "false"})
    assert proc.returncode == 0 and proc.stdout == b"" and b"the agent carries on" in proc.stderr


def test_other_events_fail_open_under_strict_guards(hooks_home: Path) -> None:
    corrupt_store(hooks_home)
    proc = run_hook(fixture_payload("PostToolUse-Bash.json"), env=STRICT)
    assert proc.returncode == 0 and proc.stdout == b"" and b"the agent carries on" in proc.stderr


def test_a_passed_deadline_denies_under_strict_guards_and_the_call_is_kept(hooks_home: Path) -> None:
    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0
    blocker = sqlite3.connect(hooks_home / "store.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        env = {**STRICT, "AGENT_HOOKS_DEADLINE_MS": "300", "AGENT_HOOKS_BUSY_TIMEOUT_MS": "20000"}
        proc = run_hook(fixture_payload("PreToolUse-Bash.json"), env=env)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert proc.returncode == 0
    assert "deadline of 300 ms passed" in denial(proc.stdout)
    # Denied, and not lost: the call waits in the spool like any other that missed its write,
    # and its replay records what the client was told: denied, so it never ran.
    assert error_log(hooks_home)[-1]["kind"] == "spooled"
    replay = subprocess.run([sys.executable, "-m", "agent_hooks.spool"], capture_output=True, timeout=60)
    assert replay.returncode == 0, replay.stderr
    rows = store_rows(hooks_home, "SELECT tool_use_id, outcome, decision, rule FROM tool_calls")
    assert [tuple(r) for r in rows] == [(fixture_payload("PreToolUse-Bash.json")["tool_use_id"], "denied", "deny",
                                         "fail_closed")]


def test_bad_input_is_not_an_internal_error_and_still_fails_open(hooks_home: Path) -> None:
    from support.scripts import run_exe

    proc = run_exe("agent-hook-pre-tool-use", b"{this is not json", env=STRICT)
    assert proc.returncode == 0 and proc.stdout == b""


# -- the http transport ----------------------------------------------------------------------------

@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENT_HOOKS__SERVE__PORT", str(free_port()))
    path = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text("{}\n")
    return path


def http_entries(path: Path) -> dict[str, dict[str, Any]]:
    doc = json.loads(path.read_text())
    return {event: h for event, groups in doc["hooks"].items() for g in groups for h in g["hooks"]
            if h.get("type") == "http"}


def test_strict_guards_install_pre_tool_use_and_prompts_with_on_failure_block(settings: Path) -> None:
    agent_hook("settings", "install", "--transport", "http")
    entries = http_entries(settings)
    assert all("onFailure" not in h for h in entries.values())  # off by default
    assert "Stop" in entries and "UserPromptSubmit" in entries
    agent_hook("settings", "install", "--transport", "http", env=STRICT)
    entries = http_entries(settings)
    # The guards: a tool call, and a prompt (a cancelled task's), that the server cannot check are blocked.
    assert entries["PreToolUse"]["onFailure"] == "block" and entries["UserPromptSubmit"]["onFailure"] == "block"
    # Only the guards: a PostToolUse that cannot be recorded must not fail the tool that already ran.
    assert [e for e, h in entries.items() if "onFailure" in h] == ["UserPromptSubmit", "PreToolUse"]
    # Claude Code ignores onFailure on Stop: Stop stays a command hook, which holds a persisting worker
    # without the server.
    assert "Stop" not in entries
    [stop] = [h for g in json.loads(settings.read_text())["hooks"]["Stop"] for h in g["hooks"]]
    assert stop["type"] == "command" and "agent-hook-stop" in stop["command"]
    assert "already up to date" in agent_hook("settings", "install", "--transport", "http", env=STRICT).stdout
    # Turned off again: the next install takes the block away, and Stop goes to the server again.
    agent_hook("settings", "install", "--transport", "http")
    entries = http_entries(settings)
    assert all("onFailure" not in h for h in entries.values()) and "Stop" in entries


@pytest.fixture
def strict_server(hooks_home: Path) -> Iterator[Server]:
    srv = start_server(hooks_home, {**STRICT, "AGENT_HOOKS_DEADLINE_MS": "300"})
    try:
        yield srv
    finally:
        srv.stop()


def test_the_server_denies_past_its_deadline_under_strict_guards(strict_server: Server) -> None:
    agent_hook("init", env=strict_server.env)
    blocker = sqlite3.connect(strict_server.home / "store.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        status, headers, body = strict_server.post(fixture_payload("PreToolUse-Bash.json"))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert status == 200
    assert "deadline of 300 ms passed" in denial(body)
    assert "denied (guards.fail_closed)" in headers["x-agent-hooks-problem"]
    # PostToolUse, the same way: no deny for an event that cannot deny.
    blocker = sqlite3.connect(strict_server.home / "store.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        status, headers, body = strict_server.post(fixture_payload("PostToolUse-Bash.json"))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert status == 200 and body == b""
    # Denied past the deadline, yet not lost: the server's thread commits once the store is free.
    want = fixture_payload("PreToolUse-Bash.json")["tool_use_id"]
    end = time.monotonic() + 15
    while time.monotonic() < end:
        if want in {r[0] for r in store_rows(strict_server.home, "SELECT tool_use_id FROM tool_calls")}:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the PreToolUse answered past its deadline was never recorded")


def test_doctor_names_wiring_that_does_not_match_the_setting(settings: Path, hooks_home: Path) -> None:
    agent_hook("settings", "install", "--transport", "http")  # installed before the setting changed
    (hooks_home / "config.toml").write_text("[guards]\nfail_closed = true\n")
    out = agent_hook("doctor", "--no-run", check=False).stdout
    assert any(line.startswith("!") and 'lacks "onFailure": "block"' in line for line in out.splitlines()), out
    assert "blocks those tool calls" not in out
    down = [line for line in out.splitlines() if "server down" in line]
    assert down and "Claude Code lets the tools through" in down[0], out
    assert any(line.startswith("!") and "http UserPromptSubmit" in line and 'lacks "onFailure": "block"' in line
               for line in out.splitlines()), out
    assert any(line.startswith("!") and "Stop is an http entry" in line for line in out.splitlines()), out
    agent_hook("settings", "install", "--transport", "http")
    out = agent_hook("doctor", "--no-run", check=False).stdout
    assert 'lacks "onFailure"' not in out and "Stop is an http entry" not in out
    down = [line for line in out.splitlines() if "server down" in line]
    assert down and "Claude Code blocks those tool calls" in down[0], out


def test_a_call_denied_past_the_servers_deadline_is_recorded_as_denied(strict_server: Server) -> None:
    """The server answers deny at its deadline under strict guards, and its thread goes on to commit
    the call. That record said what the guards decided (pending: the tool runs), though the client
    was told deny and never ran it: the board showed it running and the loop history counted it.
    It is recorded as the deny the client got (a spooled one is replayed as one already)."""
    agent_hook("init", env=strict_server.env)
    pre = dict(fixture_payload("PreToolUse-Bash.json"), tool_use_id="toolu_past_deadline")
    blocker = sqlite3.connect(strict_server.home / "store.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        status, headers, body = strict_server.post(pre)
        time.sleep(0.5)  # the server's thread waits for the store (busy timeout 2.5 s), then commits
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert status == 200 and "deadline of 300 ms passed" in denial(body)
    rows: list[Any] = []
    end = time.monotonic() + 15
    while time.monotonic() < end:
        rows = store_rows(strict_server.home, "SELECT outcome, decision, rule FROM tool_calls WHERE tool_use_id = ?",
                          ("toolu_past_deadline",))
        if rows and rows[0][0] != "pending":
            break
        time.sleep(0.1)
    assert rows, "the call answered past the deadline was never recorded"
    assert tuple(rows[0]) == ("denied", "deny", "fail_closed"), tuple(rows[0])
