"""The hook runtime under the real client: records, context, compaction, fail-open."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import HOOK_EXECUTABLES, E2E, hook_commands
from model_server import text, tool_use

HERE = Path(__file__).resolve().parent


def test_settings_wire_every_event_to_our_executables(e2e: E2E) -> None:
    wired = hook_commands(e2e.settings)
    for event, exe in HOOK_EXECUTABLES.items():
        commands = wired.get(event, [])
        assert any(Path(c.split()[0]).name == exe for c in commands), (event, commands)
        for command in commands:
            assert Path(command.split()[0]).is_file(), command


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
            assert row["outcome"] == "failure" and row["output_hash"] is None, row
            assert "Exit code 3" in row["error"], row
        else:
            assert row["outcome"] == "success" and row["output_hash"] and row["error"] is None, row

    events = [r["event"] for r in e2e.query("SELECT event FROM session_events WHERE session_id = ? ORDER BY id", sid)]
    assert events == ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"], events
    assert e2e.errors() == []
