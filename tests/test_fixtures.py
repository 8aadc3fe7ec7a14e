"""Every captured payload of the real client (2.1.197) through the installed executables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import EXECUTABLES, FIXTURES, fixture_payload, run_exe, run_hook, store_rows

PAYLOADS = sorted(p.name for p in FIXTURES.glob("*.json"))


def test_fixtures_present() -> None:
    assert len(PAYLOADS) >= 20


@pytest.mark.parametrize("name", [n for n in PAYLOADS if not n.startswith("SubagentStop")])
def test_fixture_through_its_executable(name: str, hooks_home: Path) -> None:
    payload = fixture_payload(name)
    proc = run_hook(payload)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    if out.strip():
        # stdout is protocol: one JSON object, or plain text only for PreCompact.
        if payload["hook_event_name"] != "PreCompact":
            doc = json.loads(out)
            assert isinstance(doc, dict)
    assert b"Traceback" not in proc.stderr
    rows = store_rows(hooks_home, "SELECT * FROM sessions WHERE session_id = ?", (payload["session_id"],))
    assert len(rows) == 1
    session = rows[0]
    assert session["cwd"] == payload["cwd"]
    assert session["transcript_path"] == payload["transcript_path"]
    assert session["last_event"] == payload["hook_event_name"]
    assert session["first_seen_at"] <= session["last_seen_at"]


def test_subagent_stop_payload_is_another_events(hooks_home: Path) -> None:
    payload = fixture_payload("SubagentStop.json")
    proc = run_exe("agent-hook-stop", payload)
    assert proc.returncode == 0
    assert proc.stdout == b""
    assert b"payload is for SubagentStop" in proc.stderr


@pytest.mark.parametrize("event,exe", sorted(EXECUTABLES.items()))
def test_every_executable_refuses_another_events_payload(event: str, exe: str, hooks_home: Path) -> None:
    other = "Stop.json" if event != "Stop" else "SessionEnd.json"
    proc = run_exe(exe, fixture_payload(other))
    assert proc.returncode == 0
    assert proc.stdout == b""
    assert f"this is the {event} hook".encode() in proc.stderr


def test_a_whole_session_records_every_tool_call(hooks_home: Path) -> None:
    sequence = [
        "SessionStart-startup.json", "UserPromptSubmit.json",
        "PreToolUse-Read.json",  # toolu_0001 in this session
        "PreToolUse-Edit.json", "PostToolUse-Edit.json",
        "PreToolUse-Bash.json", "PostToolUseFailure-Bash.json",
        "PreToolUse-Write.json", "PostToolUse-Write.json",
        "PreToolUse-Glob.json", "PostToolUse-Glob.json",
        "PreToolUse-Grep.json", "PostToolUse-Grep.json",
        "PostToolUse-Read.json",
        "Stop.json", "SessionEnd.json",
    ]
    for name in sequence:
        assert run_hook(fixture_payload(name)).returncode == 0
    sid = fixture_payload("Stop.json")["session_id"]
    calls = {r["tool_use_id"]: r for r in store_rows(hooks_home, "SELECT * FROM tool_calls WHERE session_id = ?", (sid,))}
    assert set(calls) == {"toolu_0001", "toolu_0002", "toolu_0003", "toolu_0005", "toolu_0006", "toolu_0007"}
    assert calls["toolu_0003"]["outcome"] == "failure"
    assert calls["toolu_0003"]["error"] == "Exit code 3"
    assert calls["toolu_0003"]["duration_ms"] == 39
    for tid in ("toolu_0001", "toolu_0002", "toolu_0005", "toolu_0006", "toolu_0007"):
        assert calls[tid]["outcome"] == "success", tid
        assert calls[tid]["output_hash"] and len(calls[tid]["output_hash"]) == 64
        assert calls[tid]["duration_ms"] is not None
    assert calls["toolu_0002"]["tool_name"] == "Edit"
    session = store_rows(hooks_home, "SELECT * FROM sessions WHERE session_id = ?", (sid,))[0]
    assert session["state"] == "ended"
    assert session["tool_calls"] == 6
    assert session["first_prompt"] == "tidy notes"
    events = [r["event"] for r in store_rows(hooks_home, "SELECT event FROM session_events WHERE session_id = ? ORDER BY id", (sid,))]
    assert events == ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"]


def test_unknown_fields_are_kept_and_missing_optional_ones_tolerated(hooks_home: Path) -> None:
    payload = fixture_payload("PreToolUse-Bash.json")
    payload["some_future_field"] = {"nested": [1, 2, 3]}
    for key in ("transcript_path", "cwd", "prompt_id", "permission_mode", "effort", "tool_use_id"):
        payload.pop(key)
    proc = run_hook(payload)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    row = store_rows(hooks_home, "SELECT * FROM tool_calls")[0]
    assert row["tool_use_id"] is None and row["tool_name"] == "Bash"
