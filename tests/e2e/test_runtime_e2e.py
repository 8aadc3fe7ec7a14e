"""The hook runtime under the real client: records, context, compaction, fail-open."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from harness import BIN_DIR, E2E, HOOK_EXECUTABLES, TRANSPORTS, hook_commands, install_settings
from model_server import text, tool_use

from agent_hooks.hashing import digest
from agent_hooks.wiring.entries import handler_words

HERE = Path(__file__).resolve().parent


def test_settings_wire_every_event_to_our_executables(e2e: E2E) -> None:
    wired = hook_commands(e2e.settings)
    for event, exe in HOOK_EXECUTABLES.items():
        commands = wired.get(event, [])
        # Each command is our launcher (docs/settings.md); handler_words gives what it runs.
        targets = [handler_words({"command": c})[0] for c in commands]
        assert any(Path(t).name == exe for t in targets), (event, commands)
        for target in targets:
            assert Path(target).is_file(), target


@pytest.mark.parametrize("transport", TRANSPORTS, indirect=True)
def test_session_with_tool_calls_is_recorded(e2e: E2E) -> None:
    notes = e2e.workspace / "notes.txt"
    e2e.server.set_script([
        [text("Writing the file."),
         tool_use("Write", {"file_path": str(notes), "content": "alpha\nbeta\n"}, id="toolu_write")],
        [tool_use("Read", {"file_path": str(notes)}, id="toolu_read")],
        [tool_use("Edit", {"file_path": str(notes), "old_string": "beta", "new_string": "gamma"}, id="toolu_edit")],
        [tool_use("Bash", {"command": "cat notes.txt", "description": "show the file"}, id="toolu_bash_ok")],
        [tool_use("Bash", {"command": "exit 3", "description": "fail on purpose"}, id="toolu_bash_fail")],
        [text("All steps done.")],
    ])
    rc, result, stdout, stderr = e2e.run("Edit notes.txt, then run two commands.")
    assert rc == 0, e2e.describe()
    assert result and result["is_error"] is False and result["result"] == "All steps done.", stdout
    assert e2e.server.remaining == 0 and e2e.server.extra_turns == 0, e2e.describe()
    assert notes.read_text() == "alpha\ngamma\n"
    sid = result["session_id"]

    # The client really ran the tools: their results went back to the model.
    results = {r["tool_use_id"]: r for r in e2e.server.tool_results()}
    assert set(results) == {"toolu_write", "toolu_read", "toolu_edit", "toolu_bash_ok", "toolu_bash_fail"}
    assert results["toolu_bash_fail"].get("is_error") is True
    assert "gamma" in str(results["toolu_bash_ok"]["content"])

    (session,) = e2e.query("SELECT * FROM sessions")
    assert session["session_id"] == sid
    assert session["cwd"] == str(e2e.workspace)
    assert session["state"] == "ended"
    assert session["first_prompt"] == "Edit notes.txt, then run two commands."
    assert session["tool_calls"] == 5

    calls = {r["tool_use_id"]: r for r in e2e.query("SELECT * FROM tool_calls WHERE session_id = ?", sid)}
    expected = {"toolu_write": "Write", "toolu_read": "Read", "toolu_edit": "Edit",
                "toolu_bash_ok": "Bash", "toolu_bash_fail": "Bash"}
    assert {k: v["tool_name"] for k, v in calls.items()} == expected
    for tool_use_id, row in calls.items():
        assert row["input_hash"] and row["started_at"] and row["ended_at"], row
        assert isinstance(row["duration_ms"], int) and row["duration_ms"] >= 0, row
        if tool_use_id == "toolu_bash_fail":
            # A failure's output is its error (the polling guard's no-progress rule compares it).
            assert row["outcome"] == "failure" and row["output_hash"] == digest({"error": row["error"]}), row
            assert "Exit code 3" in row["error"], row
        else:
            assert row["outcome"] == "success" and row["output_hash"] and row["error"] is None, row

    events = [r["event"] for r in e2e.query("SELECT event FROM session_events WHERE session_id = ? ORDER BY id", sid)]
    assert events == ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"], events
    assert e2e.errors() == []


def _context_hook(event: str) -> str:
    return f"{sys.executable} {HERE / 'context_hook.py'} {event}"


def test_context_from_session_start_and_prompt_hooks_reaches_the_model(e2e: E2E) -> None:
    e2e.add_hook("SessionStart", _context_hook("SessionStart"))
    e2e.add_hook("UserPromptSubmit", _context_hook("UserPromptSubmit"))
    e2e.server.set_script([[text("Noted.")]])
    first = e2e.run("first prompt")
    assert first.ok, e2e.describe()
    sid = first.session_id

    (request,) = e2e.server.messages("main")
    assert f"E2E-CONTEXT SessionStart source=startup session={sid}" in request.text
    assert f"E2E-CONTEXT UserPromptSubmit prompt=first prompt session={sid}" in request.text

    # A resumed session gets the context of its own SessionStart(resume) and prompt.
    e2e.server.add_turns([[text("Still here.")]])
    second = e2e.run("second prompt", resume=sid)
    assert second.ok and second.result["result"] == "Still here.", e2e.describe()
    latest = e2e.server.messages("main")[-1]
    assert f"E2E-CONTEXT SessionStart source=resume session={sid}" in latest.text
    assert f"E2E-CONTEXT UserPromptSubmit prompt=second prompt session={sid}" in latest.text
    # Our own hooks ran beside the test hook and recorded both starts.
    starts = e2e.query("SELECT detail FROM session_events WHERE event = 'SessionStart' ORDER BY id")
    assert [r["detail"] for r in starts] == ["startup", "resume"]


def test_manual_compaction_fires_pre_compact_and_session_start_compact(e2e: E2E) -> None:
    e2e.server.set_script([
        [tool_use("Bash", {"command": "echo one", "description": "first step"})],
        [text("First step done.")],
    ])
    first = e2e.run("Run the first step.")
    assert first.ok, e2e.describe()
    sid = first.session_id
    e2e.server.add_turns([[text("Second step done.")]])
    assert e2e.run("Now the second step.", resume=sid).ok, e2e.describe()

    compacted = e2e.compact(sid, "keep the step names")
    assert compacted.returncode == 0, e2e.describe()
    (summary_request,) = e2e.server.messages("compact")
    assert "keep the step names" in summary_request.text
    assert summary_request.turn is None and e2e.server.remaining == 0 and e2e.server.extra_turns == 0

    events = e2e.query("SELECT event, detail FROM session_events WHERE session_id = ? ORDER BY id", sid)
    pairs = [(r["event"], r["detail"]) for r in events]
    assert ("PreCompact", "manual") in pairs, pairs
    assert ("SessionStart", "compact") in pairs, pairs
    assert pairs.index(("PreCompact", "manual")) < pairs.index(("SessionStart", "compact")), pairs

    # The session carries on after the compaction, from the summary.
    e2e.server.add_turns([[text("Third step done.")]])
    after = e2e.run("And the third.", resume=sid)
    assert after.ok and after.result["result"] == "Third step done.", e2e.describe()
    assert "Summary: the user asked" in e2e.server.messages("main")[-1].text
    assert e2e.errors() == []


def test_crashing_hooks_leave_the_session_running(e2e: E2E) -> None:
    # Garbage where the store should be: every hook fails on opening it.
    garbage = b"this is not a database\x00\xff" * 200
    e2e.store_path.write_bytes(garbage)
    e2e.server.set_script([
        [text("Step one."), tool_use("Bash", {"command": "echo survived > out.txt", "description": "write"})],
        [tool_use("Read", {"file_path": str(e2e.workspace / "out.txt")})],
        [text("Finished despite the hooks.")],
    ])
    rc, result, stdout, stderr = e2e.run("Do the steps.")
    assert rc == 0, e2e.describe()
    assert result and result["is_error"] is False, stdout
    assert result["result"] == "Finished despite the hooks."
    assert e2e.server.remaining == 0 and e2e.server.extra_turns == 0, e2e.describe()
    assert (e2e.workspace / "out.txt").read_text() == "survived\n"
    # Nothing of the failure was shown: not on the client's output, not to the model.
    assert "agent-hooks" not in stdout + stderr and "hook error" not in (stdout + stderr).lower()
    for request in e2e.server.messages():
        assert "agent-hooks" not in request.text and "internal error" not in request.text
    # ... but every failed hook call was counted in the error log.
    errors = e2e.errors()
    counted = {(e["event"], e["kind"]) for e in errors}
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"):
        assert (event, "error") in counted, (event, errors)
    assert all(e["session_id"] == result["session_id"] for e in errors), errors
    assert e2e.store_path.read_bytes() == garbage


def test_the_client_is_wired_by_settings_install(e2e: E2E, tmp_path: Path) -> None:
    # The settings the client gets are the ones the CLI writes for a user, nothing hand-made.
    again = install_settings(tmp_path / "again.json", e2e.env())
    assert json.loads(e2e.settings_path.read_text()) == again == e2e.settings
    targets = [handler_words({"command": c})[0] for cs in hook_commands(again).values() for c in cs]
    assert targets and all(Path(t).parent == BIN_DIR for t in targets), targets


def test_an_event_we_have_no_handler_for_is_accepted_and_noted(e2e: E2E) -> None:
    # PostToolBatch (sent by the clients we test) has no executable of ours: wired to one anyway,
    # as a user might, every call is accepted, noted, and not counted as an error.
    e2e.add_hook("PostToolBatch", str(BIN_DIR / "agent-hook-post-tool-use"))
    e2e.server.set_script([
        [tool_use("Bash", {"command": "echo batch", "description": "one call"}, id="toolu_batch")],
        [text("Batched.")],
    ])
    run = e2e.run("Run one command.")
    assert run.ok, e2e.describe()
    notices = [json.loads(line) for line in (e2e.agent_home / "logs" / "notices.log").read_text().splitlines()]
    assert notices and {(n["event"], n["kind"], n["session_id"]) for n in notices} == {
        ("PostToolBatch", "unknown_event", run.session_id)}
    assert "no agent-hooks handler for PostToolBatch events" in notices[0]["message"]
    assert e2e.errors() == []
    (call,) = e2e.query("SELECT tool_use_id, outcome FROM tool_calls")
    assert call == {"tool_use_id": "toolu_batch", "outcome": "success"}
