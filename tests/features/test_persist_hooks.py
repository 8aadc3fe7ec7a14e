"""Persistence through the installed executables: Stop holds, bypasses are recorded and shown,
`task done` / `task blocked` get through the guards, the context-pressure notice, isolation."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from support.scripts import agent_hook, error_log, run_hook, store_rows

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")


def payload(event: str, sid: str, home: Path, **extra: Any) -> dict[str, Any]:
    transcript = Path(os.environ["HOME"]) / ".claude" / "projects" / "-work" / f"{sid}.jsonl"
    return {"session_id": sid, "hook_event_name": event, "cwd": str(home.parent), "transcript_path": str(transcript),
            **extra}


def write_transcript(sid: str, input_tokens: int, extra: list[dict[str, Any]] | None = None) -> None:
    path = Path(os.environ["HOME"]) / ".claude" / "projects" / "-work" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"type": "user", "message": {"role": "user", "content": "work on it"}},
             {"type": "assistant", "message": {"model": "claude-opus-5-5", "role": "assistant", "content": [],
                                               "usage": {"input_tokens": input_tokens, "output_tokens": 5}}}]
    path.write_text("\n".join(json.dumps(x) for x in lines + (extra or [])) + "\n")


def start(sid: str, home: Path, task: str | None = "T-1", role: str = "worker") -> dict[str, str]:
    env = {"AGENT_HOOKS_ROLE": role}
    if task:
        env["AGENT_HOOKS_TASK_ID"] = task
    assert run_hook(payload("SessionStart", sid, home, source="startup"), env).returncode == 0
    run_hook(payload("UserPromptSubmit", sid, home, prompt="go"), env)
    return env


def stop(sid: str, home: Path, env: dict[str, str] | None = None, active: bool = False,
         **extra: Any) -> dict[str, Any] | None:
    proc = run_hook(payload("Stop", sid, home, stop_hook_active=active, last_assistant_message="ok", **extra), env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode().strip()
    return json.loads(out) if out else None


def create_task(*args: str) -> None:
    """`agent-hook task create ARGS` run in this process: the same code writing the same rows as the
    console script, without a process (~50 ms of CPU) for what is only the state before the Stop,
    PreToolUse or PostToolUse under test. The commands a test is about stay subprocesses."""
    from click.testing import CliRunner

    from agent_hooks.cli import cli

    result = CliRunner().invoke(cli, ["task", "create", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output


def task_json(task: str) -> dict[str, Any]:
    return json.loads(agent_hook("task", "show", task, "--json").stdout)


def test_stop_holds_until_task_done(hooks_home: Path):
    env = start("S1", hooks_home)
    create_task("T-1", "--description", "Port the parser", "--persist")
    agent_hook("task", "progress", "T-1", "lexer done")
    write_transcript("S1", 1000)
    out = stop("S1", hooks_home, env)
    assert out and out["decision"] == "block"
    for needle in ("T-1", "Port the parser", "lexer done", "agent-hook task done T-1"):
        assert needle in out["reason"]
    assert task_json("T-1")["continuations"] == 1
    session = json.loads(agent_hook("session", "show", "S1", "--json").stdout)
    assert session["state"] == "live" and session["persist_last"] == "held 1/5"
    agent_hook("task", "done", "T-1", "--note", "parser ported")
    assert stop("S1", hooks_home, env, active=True) is None
    t = task_json("T-1")
    assert t["state"] == "done" and t["done_note"] == "parser ported"
    assert t["last_bypass"].startswith("bypass done")
    status = json.loads(agent_hook("status", "--json").stdout)
    s1 = next(s for s in status["sessions"] if s["session_id"] == "S1")
    assert s1["state"] == "awaiting" and s1["persist"].startswith("bypass done")
    assert s1["task_state"] == "done" and s1["task_continuations"] == 1
    assert "task T-1: done, 1 continuation(s)" in agent_hook("status").stdout
    assert "bypass done" in agent_hook("task", "show", "T-1").stdout


def test_budget_bounds_an_always_stopping_model(hooks_home: Path):
    env = start("S2", hooks_home)
    create_task("T-1", "--persist", "--max-continuations", "3")
    write_transcript("S2", 1000)
    answers = [stop("S2", hooks_home, env, active=i > 0) for i in range(5)]
    assert [bool(a) for a in answers] == [True, True, True, False, False]
    assert task_json("T-1")["continuations"] == 3
    assert "bypass budget" in task_json("T-1")["last_bypass"]
    # A fresh budget from the lead.
    agent_hook("task", "persist", "T-1", "--max-continuations", "1")
    assert stop("S2", hooks_home, env) is not None
    agent_hook("task", "persist", "T-1", "--off")
    assert stop("S2", hooks_home, env) is None


def test_context_full_interrupt_and_api_error_let_go(hooks_home: Path):
    env = start("S3", hooks_home)
    create_task("T-1", "--persist")
    write_transcript("S3", 196_000)
    assert stop("S3", hooks_home, env) is None
    assert "bypass context: context 98% full" in task_json("T-1")["last_bypass"]
    assert json.loads(agent_hook("session", "show", "S3", "--json").stdout)["context_pct"] == 98.0
    write_transcript("S3", 1000, [{"type": "user", "message": {"content": "[Request interrupted by user]"}}])
    assert stop("S3", hooks_home, env) is None
    assert "bypass interrupt" in task_json("T-1")["last_bypass"]
    write_transcript("S3", 1000)
    run_hook(payload("StopFailure", "S3", hooks_home, error="rate_limit"), env)
    assert stop("S3", hooks_home, env) is None
    assert "bypass api_error" in task_json("T-1")["last_bypass"]


def test_cancelled_blocked_lead_stale_and_isolation(hooks_home: Path):
    env = start("S4", hooks_home)
    other = start("S5", hooks_home, task=None)  # same agent, no task
    lead = start("L1", hooks_home, role="lead")
    create_task("T-1", "--persist")
    write_transcript("S4", 100)
    write_transcript("S5", 100)
    write_transcript("L1", 100)
    assert stop("S5", hooks_home, other) is None  # not working on the task: never held
    assert store_rows(hooks_home, "SELECT persist_last FROM sessions WHERE session_id = 'S5'")[0][0] is None
    assert stop("L1", hooks_home, lead) is None
    assert store_rows(hooks_home, "SELECT persist_last FROM sessions WHERE session_id = 'L1'")[0][0].startswith(
        "bypass lead")
    assert stop("S4", hooks_home, env) is not None
    agent_hook("cancel", "--task", "T-1", "--reason", "superseded")
    assert stop("S4", hooks_home, env) is None
    agent_hook("uncancel", "--task", "T-1")
    agent_hook("task", "blocked", "T-1", "no credentials for the staging DB")
    assert stop("S4", hooks_home, env) is None
    assert task_json("T-1")["blocked_reason"] == "no credentials for the staging DB"
    # Stale: a new task, nothing happened for longer than stale_after_s.
    create_task("T-2", "--persist")
    env2 = start("S6", hooks_home, task="T-2")
    write_transcript("S6", 100)
    time.sleep(1.2)
    assert stop("S6", hooks_home, {**env2, "AGENT_HOOKS__PERSIST__STALE_AFTER_S": "1"}) is None
    assert "bypass stale" in task_json("T-2")["last_bypass"]


def test_done_and_blocked_get_through_every_guard(hooks_home: Path):
    env = start("S7", hooks_home)
    create_task("T-1", "--persist")
    agent_hook("cancel", "S7", "--reason", "stop now")

    def pre(command: str) -> dict[str, Any]:
        proc = run_hook(payload("PreToolUse", "S7", hooks_home, tool_name="Bash", tool_input={"command": command},
                                tool_use_id=f"t{time.monotonic_ns()}"), env)
        return json.loads(proc.stdout or b"{}")

    assert pre("ls")["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert pre("agent-hook task done T-1 --note 'finished'") == {}
    assert pre("agent-hook task blocked T-1 'waiting for review'") == {}
    assert pre("agent-hook task done T-9")["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert pre("agent-hook task done T-1 && rm -rf x")["hookSpecificOutput"]["permissionDecision"] == "deny"
    # The loop guard too: the same command over and over is denied, the finish command is not.
    agent_hook("uncancel", "S7")
    env_loop = {**env, "AGENT_HOOKS__LOOPS__REPEAT_BLOCK": "3", "AGENT_HOOKS__LOOPS__REPEAT_WARN": "2"}
    for _ in range(3):
        run_hook(payload("PreToolUse", "S7", hooks_home, tool_name="Bash",
                         tool_input={"command": "agent-hook task done T-1"}), env_loop)
    proc = run_hook(payload("PreToolUse", "S7", hooks_home, tool_name="Bash",
                            tool_input={"command": "agent-hook task done T-1"}), env_loop)
    assert proc.stdout.strip() == b""


def test_context_pressure_notice_once(hooks_home: Path):
    env = start("S8", hooks_home)
    create_task("T-1")

    def post() -> bytes:
        p = payload("PostToolUse", "S8", hooks_home, tool_name="Bash", tool_input={"command": "ls"},
                    tool_response={"stdout": ""}, tool_use_id=f"t{time.monotonic_ns()}")
        run_hook({**p, "hook_event_name": "PreToolUse"}, env)
        return run_hook(p, env).stdout

    write_transcript("S8", 100_000)
    assert post().strip() == b""
    write_transcript("S8", 172_000)
    first = json.loads(post())
    text = first["hookSpecificOutput"]["additionalContext"]
    assert "86%" in text and "agent-hook task progress T-1" in text
    assert post().strip() == b""  # once
    run_hook(payload("PostCompact", "S8", hooks_home, trigger="auto", compact_summary="s"), env)
    assert b"task progress" in post()  # a new crossing after compaction


HEAVY = ("click", "httpx", "sqlite_utils", "filelock", "starlette", "uvicorn", "yaml")


def _imports(exe: str, data: dict[str, Any], env: dict[str, str]) -> set[str]:
    import subprocess

    from support.scripts import BIN

    full = dict(os.environ, PYTHONPROFILEIMPORTTIME="1", **env)
    proc = subprocess.run([str(BIN / exe)], input=json.dumps(data).encode(), capture_output=True, env=full,
                          timeout=30)
    assert proc.returncode == 0
    return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}


def test_new_and_persisting_hook_paths_import_only_the_standard_library(hooks_home: Path):
    from support.repo import FIXTURES_330
    from support.scripts import EXECUTABLES

    env = start("S9", hooks_home)
    create_task("T-1", "--persist")
    write_transcript("S9", 180_000)  # PostToolUse gives the pressure notice, reading the transcript
    calls: list[tuple[str, dict[str, Any]]] = [
        ("agent-hook-post-tool-use", payload("PostToolUse", "S9", hooks_home, tool_name="Bash",
                                             tool_input={"command": "ls"}, tool_response={}, tool_use_id="t9")),
        ("agent-hook-stop", payload("Stop", "S9", hooks_home, stop_hook_active=False)),  # held
    ]
    for name in ("subagent_start.json", "subagent_stop.json", "stop_failure_rate_limit.json",
                 "permission_request_bash.json"):
        data = json.loads((FIXTURES_330 / name).read_text())
        data["session_id"] = "S9"
        calls.append((EXECUTABLES[data["hook_event_name"]], data))
    calls.append(("agent-hook-permission-denied", payload("PermissionDenied", "S9", hooks_home, tool_name="Bash",
                                                          tool_input={"command": "ls"})))
    for exe, data in calls:
        imported = _imports(exe, data, env)
        assert "agent_hooks.runner" in imported
        heavy = {m for m in imported if m.split(".")[0] in HEAVY}
        assert not heavy, f"{exe} loaded {sorted(heavy)}"
    assert "held 1/5" in store_rows(hooks_home, "SELECT persist_last FROM sessions WHERE session_id='S9'")[0][0]
    assert store_rows(hooks_home, "SELECT pressure_noticed_at FROM sessions WHERE session_id='S9'")[0][0]
    compact = json.loads((FIXTURES_330 / "post_compact_manual.json").read_text())
    compact["session_id"] = "S9"
    assert not {m for m in _imports("agent-hook-post-compact", compact, env) if m.split(".")[0] in HEAVY}


def test_a_transcript_line_nested_too_deep_is_skipped_not_an_error(hooks_home: Path):
    """json.loads raises RecursionError, not ValueError, on it: it must not let the worker go."""
    env = start("S10", hooks_home)
    create_task("T-1", "--persist")
    write_transcript("S10", 1000)
    path = Path(os.environ["HOME"]) / ".claude" / "projects" / "-work" / "S10.jsonl"
    with path.open("a") as f:
        f.write("[" * 100_000 + "]" * 100_000 + "\n")
    out = stop("S10", hooks_home, env)
    assert out and out["decision"] == "block"
    assert store_rows(hooks_home, "SELECT count(*) FROM errors")[0][0] == 0


def test_status_says_in_words_that_the_hold_was_let_go_and_shows_whole_states(hooks_home: Path):
    """`status` for a person: the state column fits needs_input, and the persistence line says the
    session was allowed to stop and why, not the record's `bypass stop_hook_active: stop_hook_active ...`."""
    env = start("S7", hooks_home)
    create_task("T-1", "--persist", "--max-continuations", "3")
    write_transcript("S7", 1000)
    answers = [stop("S7", hooks_home, env, active=i > 0) for i in range(4)]
    assert [bool(a) for a in answers] == [True, True, True, False]
    assert store_rows(hooks_home, "SELECT persist_last FROM sessions WHERE session_id = 'S7'")[0][0].startswith(
        "bypass stop_hook_active")
    text = agent_hook("status").stdout
    line = next(x for x in text.splitlines() if "persistence:" in x)
    assert "let go, allowed to stop (held too often in a row): held 3 times in a row" in line, line
    assert "bypass" not in line and "stop_hook_active" not in line and "consecutive" not in line, line
    shown = agent_hook("session", "show", "S7").stdout
    assert "allowed to stop (held too often in a row)" in shown and "stop_hook_active" not in shown
    # A session waiting on a person: its state is printed whole.
    start("S8", hooks_home, task=None)
    run_hook(payload("PermissionRequest", "S8", hooks_home, tool_name="Bash", tool_input={"command": "ls"}))
    row = next(x for x in agent_hook("status").stdout.splitlines() if x.startswith("S8"))
    assert " needs_input " in row and "…" not in row, row
    row = next(x for x in agent_hook("session", "list").stdout.splitlines() if x.startswith("S8"))
    assert " needs_input " in row and "…" not in row, row


# -- where Stop must not hold ---------------------------------------------------------------------

def test_a_task_never_recorded_does_not_hold_even_when_persist_is_the_default(hooks_home: Path):
    # AGENT_HOOKS_TASK_ID names a task nobody created: `task done` cannot end it and its
    # continuation counter cannot move, so holding would block every turn with no way out.
    env = {**start("R1", hooks_home, task="NO-SUCH-TASK"), "AGENT_HOOKS__PERSIST__DEFAULT": "true"}
    write_transcript("R1", 1000)
    for active in (False, True, True):
        assert stop("R1", hooks_home, env, active=active) is None


def test_a_malformed_transcript_line_costs_stop_nothing(hooks_home: Path):
    # The transcript is a file the hook only reads: a line of an unexpected shape (content a
    # number, model a number) must not raise, or the whole Stop record (state, summary, the
    # persistence decision) is lost.
    env = start("R2", hooks_home)
    agent_hook("task", "create", "T-1", "--persist")
    write_transcript("R2", 1000, [{"type": "user", "message": {"content": 5}}])
    out = stop("R2", hooks_home, env)
    assert out and out["decision"] == "block", error_log(hooks_home)
    write_transcript("R2", 1000, [{"type": "assistant", "message": {"model": 7, "content": 5,
                                                                      "usage": {"input_tokens": 10}}}])
    out = stop("R2", hooks_home, env, active=True)
    assert out and out["decision"] == "block", error_log(hooks_home)
    assert error_log(hooks_home) == []
    rows = store_rows(hooks_home, "SELECT persist_last FROM sessions WHERE session_id = 'R2'")
    assert rows[0]["persist_last"] == "held 2/5"


def test_an_error_inside_persistence_lets_go_keeps_the_stop_record_and_leaves_a_trace(hooks_home: Path):
    env = start("R3", hooks_home, task="T-3")
    agent_hook("task", "create", "T-3", "--persist")
    write_transcript("R3", 1000)
    # A row the decision cannot read (SQLite keeps any value in an INTEGER column).
    import sqlite3

    conn = sqlite3.connect(hooks_home / "store.db")
    conn.execute("UPDATE tasks SET max_continuations = 'many' WHERE task_id = 'T-3'")
    conn.commit()
    conn.close()
    assert stop("R3", hooks_home, env) is None  # never a block on our own error
    state = store_rows(hooks_home, "SELECT state FROM sessions WHERE session_id = 'R3'")[0]["state"]
    assert state == "awaiting"  # the rest of Stop's record is kept
    assert any("persist" in e["message"] and "ValueError" in e["message"] for e in error_log(hooks_home))
    assert store_rows(hooks_home, "SELECT count(*) FROM errors WHERE message LIKE 'persist:%'")[0][0] == 1


def test_a_nested_client_our_worker_runs_is_never_held(hooks_home: Path):
    # The summarizer (`claude -p`, AGENT_HOOKS_NESTED=1) inherits the worker's environment,
    # $AGENT_HOOKS_TASK_ID included: it is not working on the task, and holding it would
    # keep a summarizer running and spend the task's continuation budget.
    agent_hook("task", "create", "T-4", "--persist")
    env = {**start("R4", hooks_home, task="T-4"), "AGENT_HOOKS_NESTED": "1"}
    write_transcript("R4", 1000)
    assert stop("R4", hooks_home, env) is None
    assert json.loads(agent_hook("task", "show", "T-4", "--json").stdout)["continuations"] == 0
