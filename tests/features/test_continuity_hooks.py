"""The continuity features through the installed console scripts, as Claude Code runs them."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from support.continuity import add_task, clean_env, cli, hook, place_transcript, store
from support.repo import FIXTURES
from support.waiting import wait_for

SID = "5f0c2a8e-3b1d-4c6e-9a7f-2d4b8e1c0a93"


def fixture_payload(name: str, **over: object) -> dict:
    data = json.loads((FIXTURES / name).read_text())
    data.update(over)
    return data


@pytest.fixture
def env(tmp_path: Path, migrated_store: Path) -> dict[str, str]:
    """An isolated environment whose store is at the current schema, as `agent-hook init` leaves it.

    A copy of the store conftest.migrated_store made with the package's own migration rather than
    an `agent-hook init` process per test (~0.1 s of CPU each): no test here is about creating it.
    """
    e = clean_env(tmp_path)
    home = Path(e["AGENT_HOOKS_HOME"])
    home.mkdir(mode=0o700)
    shutil.copy2(migrated_store, home / "store.db")  # keeps its 0600 mode
    return e


def start(env: dict[str, str], sid: str, tmp_path: Path, **extra_env: str) -> None:
    tp = place_transcript(tmp_path, sid)
    proc = hook("agent-hook-session-start", fixture_payload("SessionStart-startup.json", session_id=sid,
                                                            transcript_path=str(tp)), {**env, **extra_env})
    assert proc.returncode == 0, proc.stderr


def test_precompact_prints_the_task_and_sessionstart_compact_injects_it(env: dict[str, str], tmp_path: Path) -> None:
    add_task(env, "T-42", "Add cursor pagination to GET /orders", "endpoint done; tests next")
    task_env = {**env, "AGENT_HOOKS_TASK_ID": "T-42"}
    start(task_env, SID, tmp_path)
    tp = str(place_transcript(tmp_path, SID))
    hook("agent-hook-user-prompt-submit", fixture_payload("UserPromptSubmit.json", session_id=SID, transcript_path=tp),
         task_env)
    pre = hook("agent-hook-pre-compact", fixture_payload("PreCompact-manual.json", session_id=SID, transcript_path=tp),
               task_env)
    assert pre.returncode == 0, pre.stderr
    text = pre.stdout.decode()
    assert not text.lstrip().startswith("{")  # plain stdout, not JSON
    assert "Task id: T-42" in text and "Task: Add cursor pagination to GET /orders" in text
    assert "Progress so far: endpoint done; tests next" in text and "carry on" in text
    after = hook("agent-hook-session-start", fixture_payload("SessionStart-compact.json", session_id=SID,
                                                             transcript_path=tp), task_env)
    doc = json.loads(after.stdout)
    ctx = doc["hookSpecificOutput"]["additionalContext"]
    assert ctx == text.strip()
    conn = store(env)
    assert conn.execute("SELECT compactions FROM sessions WHERE session_id = ?", (SID,)).fetchone()[0] == 1
    assert conn.execute("SELECT detail FROM session_events WHERE session_id = ? AND event = 'PreCompact'",
                        (SID,)).fetchall() == [("manual",)]


def test_reminder_without_task_uses_the_first_prompt(env: dict[str, str], tmp_path: Path) -> None:
    start(env, SID, tmp_path)
    hook("agent-hook-user-prompt-submit", fixture_payload("UserPromptSubmit.json", session_id=SID), env)
    prompt = fixture_payload("UserPromptSubmit.json")["prompt"]
    pre = hook("agent-hook-pre-compact", fixture_payload("PreCompact-manual.json", session_id=SID), env)
    assert f"Goal (the session's first prompt): {' '.join(prompt.split())}"[:60] in pre.stdout.decode()
    # A startup SessionStart of a worker says nothing.
    other = hook("agent-hook-session-start", fixture_payload("SessionStart-startup.json", session_id="other"), env)
    assert other.stdout == b""


def test_lead_gets_the_other_sessions_worker_gets_nothing(env: dict[str, str], tmp_path: Path) -> None:
    add_task(env, "T-1", "Port the billing cron to the new scheduler")
    start(env, "worker-session-1", tmp_path, AGENT_HOOKS_AGENT="alice", AGENT_HOOKS_TASK_ID="T-1")
    start(env, "worker-session-2", tmp_path, AGENT_HOOKS_AGENT="bob")
    bob = {**env, "AGENT_HOOKS_AGENT": "bob"}
    hook("agent-hook-pre-tool-use", fixture_payload("PreToolUse-Bash.json", session_id="worker-session-2"), bob)
    hook("agent-hook-post-tool-use", fixture_payload("PostToolUse-Bash.json", session_id="worker-session-2"), bob)
    worker = hook("agent-hook-session-start", fixture_payload("SessionStart-startup.json", session_id="w3"),
                  {**env, "AGENT_HOOKS_AGENT": "carol"})
    assert worker.stdout == b""
    lead = hook("agent-hook-session-start", fixture_payload("SessionStart-startup.json", session_id="lead-1"),
                {**env, "AGENT_HOOKS_ROLE": "lead", "AGENT_HOOKS_AGENT": "boss"})
    ctx = json.loads(lead.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "alice, session worker-s" in ctx and "task T-1: Port the billing cron" in ctx
    assert "bob, session worker-s" in ctx and "Bash ok" in ctx and "carol" in ctx
    assert "boss" not in ctx and "Do not duplicate their work" in ctx


def test_stop_stores_a_searchable_summary(env: dict[str, str], tmp_path: Path) -> None:
    start(env, SID, tmp_path, AGENT_HOOKS_AGENT="alice")
    tp = str(place_transcript(tmp_path, SID))
    hook("agent-hook-post-tool-use-failure", fixture_payload("PostToolUseFailure-Bash.json", session_id=SID), env)
    stop = hook("agent-hook-stop", fixture_payload("Stop.json", session_id=SID, transcript_path=tp,
                                                   last_assistant_message="Tidied notes.txt and saved the deploy memo."),
                {**env, "AGENT_HOOKS_AGENT": "alice"})
    assert stop.returncode == 0 and stop.stdout == b"", stop.stderr
    shown = json.loads(cli(["summary", "show", SID, "--json"], env).stdout)
    assert shown["source"] == "extractive"
    assert "Outcome: Tidied notes.txt and saved the deploy memo." in shown["summary"]
    assert "/home/dev/acme/notes.txt" in shown["summary"] and "Commands run (1): exit 3" in shown["summary"]
    hits = json.loads(cli(["summary", "search", "deploy memo", "--json"], env).stdout)
    assert [h["session_id"] for h in hits] == [SID] and hits[0]["kind"] == "session"
    found = json.loads(cli(["memory", "search", "deploy", "memo", "--json"], env).stdout)["hits"]
    assert [(h["kind"], h.get("session_id")) for h in found] == [("session", SID)]
    assert json.loads(cli(["memory", "search", "deploy", "memo", "--agent", "bob", "--json"], env).stdout)["hits"] == []
    assert cli(["summary", "show", SID[:8]], env).stdout.startswith(f"# session {SID}")
    assert cli(["summary", "search", "zebra quokka"], env).stdout.strip() == "no matching session summaries"
    missing = cli(["summary", "show", "nope"], env, check=False)
    assert missing.returncode != 0 and "no summary" in missing.stderr
    # The next Stop replaces it (one row per session).
    hook("agent-hook-stop", fixture_payload("Stop.json", session_id=SID, last_assistant_message="Second turn."), env)
    conn = store(env)
    assert conn.execute("SELECT count(*) FROM session_summaries").fetchone()[0] == 1
    assert "Second turn." in conn.execute("SELECT summary FROM session_summaries").fetchone()[0]


def test_stop_survives_a_missing_or_hostile_transcript(env: dict[str, str], tmp_path: Path) -> None:
    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"type": "user", "message": {"content": "SECRET-PROMPT"}}) + "\n")
    for path in ("/nonexistent/x.jsonl", str(secret), "relative.jsonl"):
        stop = hook("agent-hook-stop", fixture_payload("Stop.json", session_id=SID, transcript_path=path), env)
        assert stop.returncode == 0 and stop.stdout == b""
    text = store(env).execute("SELECT summary FROM session_summaries").fetchone()[0]
    assert "SECRET-PROMPT" not in text and "Outcome:" in text
    status = cli(["status", "--json"], env).stdout
    assert status and json.loads(status)["errors"] == 0


def _config(env: dict[str, str], text: str) -> None:
    path = Path(env["AGENT_HOOKS_HOME"]) / "config.toml"
    path.write_text(text)


def test_summarizer_command_replaces_the_extractive_summary(env: dict[str, str], tmp_path: Path) -> None:
    prog = tmp_path / "summarize.py"
    prog.write_text("import os, sys\ndata = sys.stdin.read()\n"
                    "print('LLM SUMMARY of', len(data), 'chars; nested =', os.environ.get('AGENT_HOOKS_NESTED'))\n"
                    "print('first line was:', data.splitlines()[0])\n")
    _config(env, f"[summary]\nsummarizer_command = {json.dumps([sys.executable, str(prog)])}\ntimeout_s = 30\n")
    start(env, SID, tmp_path)
    tp = str(place_transcript(tmp_path, SID))
    stop = hook("agent-hook-stop", fixture_payload("Stop.json", session_id=SID, transcript_path=tp), env)
    assert stop.returncode == 0 and stop.stdout == b""
    conn = store(env)
    row = wait_for(lambda: conn.execute("SELECT summary, source FROM session_summaries WHERE source = 'command'")
                   .fetchone(), 20, "the summarizer worker to replace the summary")
    assert row[0].startswith("LLM SUMMARY of") and "nested = 1" in row[0]
    assert f"first line was: Session {SID}" in row[0]
    hits = json.loads(cli(["summary", "search", "LLM SUMMARY", "--json"], env).stdout)
    assert hits and hits[0]["source"] == "command"


def test_failing_summarizer_keeps_the_extractive_summary_and_logs(env: dict[str, str], tmp_path: Path) -> None:
    _config(env, f"[summary]\nsummarizer_command = {json.dumps([sys.executable, '-c', 'import sys; sys.exit(3)'])}\n")
    start(env, SID, tmp_path)
    hook("agent-hook-stop", fixture_payload("Stop.json", session_id=SID), env)
    log = Path(env["AGENT_HOOKS_HOME"]) / "logs" / "errors.log"
    wait_for(lambda: log.exists() and "summarizer exit 3" in log.read_text(), 20, "the summarizer's exit in its log")
    assert store(env).execute("SELECT source FROM session_summaries").fetchone() == ("extractive",)


def test_cleanup_commands_run_detached_with_results_recorded(env: dict[str, str], tmp_path: Path) -> None:
    marker = tmp_path / "cleaned"
    release = tmp_path / "stop-has-answered"
    commands = [
        # Writes its marker only once the test has seen Stop answer (a condition, not a sleep). A Stop
        # that waited for it would see it killed at timeout_s, and its row would not say done-shell.
        f"i=0; while [ ! -e {release} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; "
        f"echo cleaned $AGENT_HOOKS_SESSION_ID > {marker}; echo done-shell",
        [sys.executable, "-c", "import sys; print('bad'); sys.exit(4)"],
        "sleep 60",
    ]
    _config(env, f"[cleanup]\ncommands = {json.dumps(commands)}\ntimeout_s = 3\n")
    start(env, SID, tmp_path)
    stop = hook("agent-hook-stop", fixture_payload("Stop.json", session_id=SID), env)
    assert stop.returncode == 0 and stop.stdout == b""
    # Stop did not wait for the first command (it waits for this test before writing its marker).
    assert not marker.exists()
    release.touch()
    conn = store(env)
    rows = wait_for(lambda: conn.execute("SELECT command, exit_code, timed_out, output_tail FROM cleanup_runs"
                                         " ORDER BY id").fetchall() if conn.execute(
        "SELECT count(*) FROM cleanup_runs").fetchone()[0] == 3 else None, 30, "three cleanup runs")
    assert rows, "cleanup worker did not record three runs"
    assert rows[0][1:] == (0, 0, "done-shell") and marker.read_text().strip() == f"cleaned {SID}"
    assert rows[1][1:3] == (4, 0) and rows[1][3] == "bad" and json.loads(rows[1][0])[0] == sys.executable
    assert rows[2][1:3] == (None, 1)


def test_one_cleanup_at_a_time_per_session(env: dict[str, str], tmp_path: Path) -> None:
    """Stop fires every turn: while a session's cleanup runs, another Stop leaves it the work."""
    import subprocess

    from agent_hooks.features.detach import session_lock
    from agent_hooks.paths import Paths

    _config(env, '[cleanup]\ncommands = ["true"]\n')
    start(env, SID, tmp_path)
    worker = [sys.executable, "-m", "agent_hooks.features.cleanup", SID]
    held = session_lock(Paths(env).lock_dir, "cleanup", SID)  # as a running worker would
    assert held is not None
    try:
        assert subprocess.run(worker, env=env, timeout=30).returncode == 0
        assert store(env).execute("SELECT count(*) FROM cleanup_runs").fetchone()[0] == 0
    finally:
        os.close(held)
    assert subprocess.run(worker, env=env, timeout=30).returncode == 0
    assert store(env).execute("SELECT count(*) FROM cleanup_runs").fetchone()[0] == 1


def test_status_shows_stalled_sessions(env: dict[str, str], tmp_path: Path) -> None:
    start(env, "busy", tmp_path)
    # Working: it took its prompt (a session that has had none is awaiting it, never stalled).
    hook("agent-hook-user-prompt-submit", fixture_payload("UserPromptSubmit.json", session_id="busy"), env)
    start(env, "waiting", tmp_path)
    hook("agent-hook-stop", fixture_payload("Stop.json", session_id="waiting"), env)
    start(env, "gone", tmp_path)
    hook("agent-hook-session-end", fixture_payload("SessionEnd.json", session_id="gone"), env)
    data = json.loads(cli(["status", "--json"], env).stdout)
    states = {s["session_id"]: s["state"] for s in data["sessions"]}
    assert states == {"busy": "live", "waiting": "awaiting", "gone": "ended"}
    time.sleep(1.2)
    quick = {**env, "AGENT_HOOKS__HEARTBEAT__STALLED_AFTER_S": "1"}
    data = json.loads(cli(["status", "--json"], quick).stdout)
    by_id = {s["session_id"]: s for s in data["sessions"]}
    assert by_id["busy"]["state"] == "stalled" and by_id["busy"]["stalled_for_s"] > 0
    assert by_id["waiting"]["state"] == "awaiting" and by_id["gone"]["state"] == "ended"
    assert by_id["waiting"]["stalled_for_s"] is None and data["stalled_after_s"] == 1
    text = cli(["status"], quick).stdout
    assert "stalled" in text and "live: 0  awaiting: 1  stalled: 1  ended: 1" in text
    # Any hook call is a heartbeat: the session is live again.
    hook("agent-hook-pre-tool-use", fixture_payload("PreToolUse-Read.json", session_id="busy"), env)
    data = json.loads(cli(["status", "--json"], quick).stdout)
    assert {s["session_id"]: s["state"] for s in data["sessions"]}["busy"] == "live"


def _imports(exe: str, payload: dict, env: dict[str, str]) -> set[str]:
    proc = hook(exe, payload, {**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0
    return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}


@pytest.mark.parametrize(("exe", "fixture"), [("agent-hook-session-start", "SessionStart-compact.json"),
                                              ("agent-hook-pre-compact", "PreCompact-manual.json"),
                                              ("agent-hook-stop", "Stop.json")])
@pytest.mark.parametrize("spawning", [False, True])
def test_continuity_paths_keep_the_hook_import_diet(env: dict[str, str], tmp_path: Path, exe: str, fixture: str,
                                                    spawning: bool) -> None:
    # The rare branches too: a lead, a task, a transcript; with spawning, a summarizer and cleanup to start.
    if spawning:
        _config(env, f"[summary]\nsummarizer_command = {json.dumps([sys.executable, '-c', 'print(1)'])}\n"
                     f"[cleanup]\ncommands = [\"true\"]\n")
    add_task(env, "T-1", "a task")
    start(env, "other", tmp_path)
    run_env = {**env, "AGENT_HOOKS_ROLE": "lead", "AGENT_HOOKS_TASK_ID": "T-1"}
    tp = str(place_transcript(tmp_path, SID))
    imported = _imports(exe, fixture_payload(fixture, session_id=SID, transcript_path=tp), run_env)
    assert "agent_hooks.features.transcript" in imported  # the check sees our own imports
    heavy = {m for m in imported if m.split(".")[0] in ("click", "httpx", "sqlite_utils", "filelock")}
    assert not heavy, f"hook path loaded {sorted(heavy)}"
    if not spawning:
        # Nothing beyond what the plainest hook (PreToolUse) loads, apart from our own modules.
        floor = _imports("agent-hook-pre-tool-use", fixture_payload("PreToolUse-Read.json", session_id=SID), env)
        extra = {m for m in imported - floor if not m.startswith("agent_hooks")}
        assert not extra, f"continuity path loaded {sorted(extra)}"


def test_stop_on_a_huge_transcript_reads_only_its_tail(env: dict[str, str], tmp_path: Path) -> None:
    start(env, SID, tmp_path)
    hook("agent-hook-user-prompt-submit", fixture_payload("UserPromptSubmit.json", session_id=SID, prompt="Big job"), env)
    tp = place_transcript(tmp_path, SID)
    big = json.dumps({"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "toolu_big", "content": "z" * 1_000_000}]}})
    early = json.dumps({"type": "assistant", "message": {"id": "m0", "content": [
        {"type": "tool_use", "id": "toolu_early", "name": "Write", "input": {"file_path": "/w/early.txt"}}]}})
    late = json.dumps({"type": "assistant", "message": {"id": "m9", "content": [
        {"type": "tool_use", "id": "toolu_late", "name": "Edit", "input": {"file_path": "/w/late.txt"}}]}})
    with open(tp, "a") as f:
        f.write(early + "\n")
        for _ in range(30):
            f.write(big + "\n")
        f.write("{broken json\n" + late + "\n" + '{"type": "assistant", "message": {"content": [{"type": "te')
    assert tp.stat().st_size > 30_000_000
    stop = hook("agent-hook-stop", fixture_payload("Stop.json", session_id=SID, transcript_path=str(tp),
                                                   last_assistant_message="Big job done."), env)
    assert stop.returncode == 0 and stop.stdout == b"", stop.stderr
    text = store(env).execute("SELECT summary FROM session_summaries").fetchone()[0]
    assert "Goal (first prompt): Big job" in text and "Outcome: Big job done." in text
    assert "/w/late.txt" in text and "/w/early.txt" not in text
    assert "(only the newest part of a long transcript was read)" in text


def test_summarizer_never_overwrites_a_newer_stop(env: dict[str, str], tmp_path: Path) -> None:
    prog = tmp_path / "slow_summarize.py"
    log = tmp_path / "runs.log"
    release = tmp_path / "second-stop-recorded"
    # The first run holds until the test has recorded the second Stop (a condition, not a fixed
    # sleep): its output arrives after a newer stop, which is the case under test.
    prog.write_text(
        "import os, sys, time\n"
        "outcome = next(l for l in sys.stdin.read().splitlines() if l.startswith('Outcome:'))\n"
        f"open({str(log)!r}, 'a').write(outcome + '\\n')\n"
        "end = time.monotonic() + 30\n"
        f"while 'first turn' in outcome and not os.path.exists({str(release)!r}) and time.monotonic() < end:\n"
        "    time.sleep(0.05)\n"
        "print('COMMAND', outcome)\n")
    _config(env, f"[summary]\nsummarizer_command = {json.dumps([sys.executable, str(prog)])}\n")
    start(env, SID, tmp_path)
    hook("agent-hook-stop", fixture_payload("Stop.json", session_id=SID, last_assistant_message="first turn"), env)
    wait_for(log.exists, 20, "the worker's log")  # the worker is running the command for the first Stop
    hook("agent-hook-stop", fixture_payload("Stop.json", session_id=SID, last_assistant_message="second turn"), env)
    release.touch()
    conn = store(env)
    row = wait_for(lambda: conn.execute(
        "SELECT summary FROM session_summaries WHERE source = 'command' AND summary LIKE '%second turn%'").fetchone(),
        30, "the second turn's summary")
    assert row == ("COMMAND Outcome: second turn",)
    # The first run's output never replaced the newer extractive summary; one worker ran both, in turn.
    assert log.read_text().splitlines() == ["Outcome: first turn", "Outcome: second turn"]
