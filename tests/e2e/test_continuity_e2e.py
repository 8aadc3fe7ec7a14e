"""Continuity under the real client: goal reminders across /compact, lead awareness, summaries, stalled."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from typing import Any

import pytest
from harness import BIN_DIR, E2E, REPO, TRANSPORTS
from model_server import text, tool_use

from agent_hooks.claude_code import PINNED

FIXTURES = REPO / "tests" / "fixtures" / f"claude-code-{PINNED}"
TASK_ID = "T-ORD-142"
TASK = "Add cursor pagination to GET /orders and keep the 46 existing tests green"


def agent_hook(e2e: E2E, *args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = e2e.env(env_extra)
    proc = subprocess.run([str(BIN_DIR / "agent-hook"), *args], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc


def add_task(e2e: E2E, task_id: str, description: str, progress: str | None = None) -> None:
    agent_hook(e2e, "init")
    conn = sqlite3.connect(e2e.store_path, isolation_level=None)
    try:
        now = time.time()
        conn.execute("INSERT INTO tasks (task_id, description, progress, state, created_at, updated_at)"
                     " VALUES (?, ?, ?, 'open', ?, ?)", (task_id, description, progress, now, now))
    finally:
        conn.close()


def record_worker(e2e: E2E, session_id: str, agent: str, task_id: str | None, tool: str = "Bash") -> None:
    """A worker running beside the lead, as our hooks record it (its hook calls, real payloads)."""
    env = e2e.env({"AGENT_HOOKS_AGENT": agent, **({"AGENT_HOOKS_TASK_ID": task_id} if task_id else {})})
    for exe, fixture in (("agent-hook-session-start", "SessionStart-startup.json"),
                         ("agent-hook-user-prompt-submit", "UserPromptSubmit.json"),
                         ("agent-hook-pre-tool-use", f"PreToolUse-{tool}.json"),
                         ("agent-hook-post-tool-use", f"PostToolUse-{tool}.json")):
        payload = json.loads((FIXTURES / fixture).read_text())
        payload.update(session_id=session_id, cwd=str(e2e.workspace))
        proc = subprocess.run([str(BIN_DIR / exe)], input=json.dumps(payload), env=env, capture_output=True,
                              text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr


# Over http PreCompact's reminder goes as a JSON object of its lines (the only answer an http hook may give).
@pytest.mark.parametrize("transport", TRANSPORTS, indirect=True)
def test_task_goal_survives_compaction(e2e: E2E) -> None:
    add_task(e2e, TASK_ID, TASK, "cursor encoding done; the handler is next")
    task_env = {"AGENT_HOOKS_TASK_ID": TASK_ID}
    e2e.server.set_script([
        [tool_use("Bash", {"command": "echo step-one", "description": "first step"})],
        [text("First step done.")],
    ])
    first = e2e.run("Start on the pagination task.", env_extra=task_env)
    assert first.ok, e2e.describe()
    sid = first.session_id
    e2e.server.add_turns([[text("Second step done.")]])
    assert e2e.run("Continue with the handler.", resume=sid, env_extra=task_env).ok, e2e.describe()

    compacted = e2e.compact(sid, "keep the open questions", env_extra=task_env)
    assert compacted.returncode == 0, e2e.describe()
    (summary_request,) = e2e.server.messages("compact")
    # PreCompact's stdout reached the summarisation instructions, after the user's /compact text.
    assert "keep the open questions" in summary_request.text
    assert f"Task id: {TASK_ID}" in summary_request.text and f"Task: {TASK}" in summary_request.text
    assert "Progress so far: cursor encoding done; the handler is next" in summary_request.text
    assert ('"instructions": [' in summary_request.text) == (e2e.transport == "http")

    e2e.server.add_turns([[text("Handler done.")]])
    after = e2e.run("Go on.", resume=sid, env_extra=task_env)
    assert after.ok, e2e.describe()
    requests = e2e.server.messages()
    position = requests.index(summary_request)
    first_after = next(r for r in requests[position + 1:] if r.kind == "main")
    # SessionStart(compact) re-injected the reminder verbatim into the first request after compaction.
    assert f"Task: {TASK}" in first_after.text and "carry on with this goal" in first_after.text
    (session,) = e2e.query("SELECT compactions, task_id FROM sessions WHERE session_id = ?", sid)
    assert session == {"compactions": 1, "task_id": TASK_ID}
    assert e2e.errors() == []


def test_lead_first_request_lists_the_live_workers(e2e: E2E) -> None:
    add_task(e2e, "T-BILL-7", "Port the billing cron jobs to the new scheduler")
    record_worker(e2e, "11111111-aaaa-4bbb-8ccc-000000000001", "worker-alice", "T-BILL-7", tool="Bash")
    record_worker(e2e, "22222222-aaaa-4bbb-8ccc-000000000002", "worker-bob", None, tool="Edit")
    e2e.server.set_script([[text("I see what the workers do.")]])
    lead = e2e.run("Plan the next tasks.", env_extra={"AGENT_HOOKS_ROLE": "lead", "AGENT_HOOKS_AGENT": "the-lead"})
    assert lead.ok, e2e.describe()
    first = e2e.server.messages("main")[0]
    assert "Other agent sessions live on this host" in first.text
    assert "worker-alice, session 11111111" in first.text
    assert "task T-BILL-7: Port the billing cron jobs to the new scheduler" in first.text
    assert "worker-bob, session 22222222" in first.text and "Edit ok" in first.text
    assert "Do not duplicate their work" in first.text

    # A worker starting beside them gets no such block.
    e2e.server.add_turns([[text("Working.")]])
    assert e2e.run("Do a task.", env_extra={"AGENT_HOOKS_AGENT": "worker-carol"}).ok, e2e.describe()
    assert "Other agent sessions live on this host" not in e2e.server.messages("main")[-1].text
    assert e2e.errors() == []


def test_stopped_session_summary_is_stored_and_searchable(e2e: E2E) -> None:
    marker = e2e.root / "cleanup-ran"
    report = e2e.workspace / "quarterly-report.md"
    e2e.server.set_script([
        [tool_use("Write", {"file_path": str(report), "content": "# Q3\nrevenue up\n"})],
        [tool_use("Bash", {"command": "wc -l quarterly-report.md", "description": "count lines"})],
        [tool_use("Bash", {"command": "exit 7", "description": "fail on purpose"})],
        [text("Drafted the quarterly report with the revenue figures.")],
    ])
    env_extra = {"AGENT_HOOKS_AGENT": "writer",
                 "AGENT_HOOKS__CLEANUP__COMMANDS": json.dumps([f"echo $AGENT_HOOKS_SESSION_ID > {marker}"])}
    run = e2e.run("Draft the quarterly report.", env_extra=env_extra)
    assert run.ok, e2e.describe()
    sid = run.session_id

    (row,) = e2e.query("SELECT summary, source, agent FROM session_summaries WHERE session_id = ?", sid)
    assert row["source"] == "extractive" and row["agent"] == "writer"
    summary = row["summary"]
    assert "Goal (first prompt): Draft the quarterly report." in summary
    assert "Outcome: Drafted the quarterly report with the revenue figures." in summary
    assert str(report) in summary, summary  # from the real transcript under $HOME/.claude/projects
    assert "wc -l quarterly-report.md" in summary and "Exit code 7" in summary

    hits = json.loads(agent_hook(e2e, "summary", "search", "revenue figures", "--json").stdout)
    assert [h["session_id"] for h in hits] == [sid] and hits[0]["kind"] == "session"
    # The proof: past sessions are found by memory search.
    found = json.loads(agent_hook(e2e, "memory", "search", "revenue figures", "--json").stdout)["hits"]
    assert [(h["kind"], h.get("session_id")) for h in found] == [("session", sid)]

    # The cleanup command ran detached after Stop, and its result was recorded.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not e2e.query("SELECT 1 FROM cleanup_runs WHERE session_id = ?", sid):
        time.sleep(0.2)
    (cleanup,) = e2e.query("SELECT exit_code, timed_out FROM cleanup_runs WHERE session_id = ?", sid)
    assert cleanup == {"exit_code": 0, "timed_out": 0} and marker.read_text().strip() == sid
    assert e2e.errors() == []


def _start_client(e2e: E2E, prompt: str, env_extra: dict[str, str]) -> subprocess.Popen:
    """The client in the background (its own process group), as a long-running agent."""
    e2e.settings_path.write_text(json.dumps(e2e.settings, indent=1), encoding="utf-8")
    cmd = [str(e2e.claude), "-p", prompt, "--settings", str(e2e.settings_path), "--allowedTools", "Bash",
           "--output-format", "json"]
    return subprocess.Popen(cmd, cwd=e2e.workspace, env=e2e.env(env_extra), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _status(e2e: E2E, threshold_s: int) -> dict[str, Any]:
    out = agent_hook(e2e, "status", "--json", env_extra={"AGENT_HOOKS__HEARTBEAT__STALLED_AFTER_S": str(threshold_s)})
    return json.loads(out.stdout)


def test_session_without_activity_shows_as_stalled(e2e: E2E) -> None:
    # The agent hangs in a long tool call: no hook call comes while it runs.
    # Not a bare `sleep`: newer clients (2.1.331) refuse a leading long sleep before it runs.
    hang = "python3 -c 'import time; time.sleep(25)'"
    e2e.server.set_script([[tool_use("Bash", {"command": hang, "description": "hang"})], [text("Woke up.")]])
    proc = _start_client(e2e, "Wait for the build.", {"AGENT_HOOKS_AGENT": "sleepy"})
    try:
        deadline = time.monotonic() + 60
        pending: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not pending:
            time.sleep(0.3)
            if e2e.store_path.exists():
                try:
                    pending = e2e.query("SELECT session_id FROM tool_calls WHERE outcome = 'pending'")
                except sqlite3.OperationalError:
                    pending = []
        assert pending, e2e.describe()
        sid = pending[0]["session_id"]
        (session,) = [s for s in _status(e2e, 900)["sessions"] if s["session_id"] == sid]
        assert session["state"] == "live" and session["stalled_for_s"] is None
        time.sleep(3)
        (session,) = [s for s in _status(e2e, 2)["sessions"] if s["session_id"] == sid]
        assert session["state"] == "stalled", session
        assert session["stalled_for_s"] > 0 and session["agent"] == "sleepy"
        assert proc.poll() is None  # the client is still there, stuck in its tool call
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait(timeout=30)
