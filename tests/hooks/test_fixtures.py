"""Every payload captured from the real client, every version in tests/fixtures, through the installed executables.

The fixtures come from ``tests/e2e/capture_fixtures.py``. A payload for an event
we have an executable for must be recorded by it; a payload for any other event
(newer clients send more) must be accepted with a clear line, not treated as
bad input.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_hooks import claude_code
from agent_hooks.payload import EVENT_FIELDS, parse

from support.repo import FIXTURES, FIXTURES_ROOT, fixture_payload
from support.scripts import EXECUTABLES, error_log, run_exe, run_hook, store_rows

VERSIONS = sorted(p.name.removeprefix("claude-code-") for p in FIXTURES_ROOT.glob("claude-code-*"))
ALL = [(v, p.name) for v in VERSIONS for p in sorted((FIXTURES_ROOT / f"claude-code-{v}").glob("*.json"))]
# Known = an event the package validates (payload.EVENT_FIELDS); each has its executable.
KNOWN = [(v, n) for v, n in ALL if fixture_payload(n, v)["hook_event_name"] in EVENT_FIELDS]
UNKNOWN = [(v, n) for v, n in ALL if fixture_payload(n, v)["hook_event_name"] not in EVENT_FIELDS]
# These tests are about what each payload records, not about creating a store: each starts from
# a migrated one (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")


def _id(case: tuple[str, str]) -> str:
    return f"{case[0]}/{case[1]}"


def test_fixtures_present() -> None:
    assert len(list(FIXTURES.glob("*.json"))) >= 20
    # Every version the package calls tested has its capture, transcripts included.
    for version in claude_code.TESTED:
        d = FIXTURES_ROOT / f"claude-code-{version}"
        assert (d / "SessionStart-startup.json").exists(), d
        assert (d / "transcript-sample.jsonl").exists() and (d / "transcript-compacted-sample.jsonl").exists()
    assert claude_code.NEWEST_TESTED == max(VERSIONS, key=claude_code.parse)


def test_captures_are_sanitized() -> None:
    for d in FIXTURES_ROOT.glob("claude-code-*"):
        for f in d.iterdir():
            text = f.read_text()
            # The capture's temporary home was rewritten as /home/dev everywhere.
            assert "agent-hooks-capture-" not in text and "/tmp/pytest-of-" not in text, f


def test_every_known_event_has_its_executable() -> None:
    assert set(EVENT_FIELDS) == set(EXECUTABLES), "add the new event's executable to tests/support/scripts.EXECUTABLES"


@pytest.mark.parametrize("case", KNOWN, ids=_id)
def test_fixture_through_its_executable(case: tuple[str, str], hooks_home: Path) -> None:
    payload = fixture_payload(case[1], case[0])
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
    assert error_log(hooks_home) == []


@pytest.mark.parametrize("case", UNKNOWN, ids=_id)
def test_an_event_we_have_no_handler_for_is_accepted_and_logged(case: tuple[str, str], hooks_home: Path) -> None:
    payload = fixture_payload(case[1], case[0])
    event = payload["hook_event_name"]
    for exe in ("agent-hook-stop", "agent-hook-pre-tool-use"):
        proc = run_exe(exe, payload)
        assert proc.returncode == 0 and proc.stdout == b"", proc.stderr
        assert f"no agent-hooks handler for {event} events; accepted, nothing done".encode() in proc.stderr
    notices = [json.loads(line) for line in (hooks_home / "logs" / "notices.log").read_text().splitlines()]
    assert [(n["event"], n["kind"], n["session_id"]) for n in notices] == [
        (event, "unknown_event", payload["session_id"])] * 2
    assert error_log(hooks_home) == [], "an unknown event is not an error"


@pytest.mark.parametrize("event,exe", sorted(EXECUTABLES.items()))
def test_every_executable_refuses_another_events_payload(event: str, exe: str, hooks_home: Path) -> None:
    other = "Stop.json" if event != "Stop" else "SessionEnd.json"
    proc = run_exe(exe, fixture_payload(other))
    assert proc.returncode == 0
    assert proc.stdout == b""
    assert f"this is the {event} hook".encode() in proc.stderr
    assert [e["kind"] for e in error_log(hooks_home)] == ["bad_input"], "a known event on the wrong hook is miswired"


@pytest.mark.parametrize("case", ALL, ids=_id)
def test_new_payload_fields_are_kept(case: tuple[str, str]) -> None:
    raw = fixture_payload(case[1], case[0])
    record = parse(json.dumps(raw).encode(), raw["hook_event_name"], 10**7)
    assert record.raw == raw  # effort, prompt_id, permission_mode and whatever comes next
    for key in ("effort", "prompt_id", "permission_mode"):
        if key in raw:
            assert record.get(key) == raw[key]


def test_the_newer_clients_send_the_fields_and_events_we_accept() -> None:
    newest = claude_code.NEWEST_TESTED
    pre = fixture_payload("PreToolUse-Bash.json", newest)
    assert {"effort", "prompt_id", "permission_mode"} <= set(pre)
    events = {fixture_payload(n, newest)["hook_event_name"] for v, n in ALL if v == newest}
    assert {"SubagentStart", "PostCompact", "PermissionRequest"} <= events
    assert fixture_payload("SessionStart-fork.json", newest)["source"] == "fork"


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
    failed = fixture_payload("PostToolUseFailure-Bash.json")
    assert calls["toolu_0003"]["outcome"] == "failure"
    assert calls["toolu_0003"]["error"] == failed["error"] == "Exit code 3"
    assert calls["toolu_0003"]["duration_ms"] == failed["duration_ms"]
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


def test_the_newest_capture_holds_the_events_it_added() -> None:
    """2.1.332 knows more events; the capture drives each one the scenarios can reach offline (the
    fixture directory's README says which it could not: TaskCompleted, WorktreeCreate)."""
    events = {fixture_payload(n, "2.1.332")["hook_event_name"] for v, n in ALL if v == "2.1.332"}
    assert {"PostToolBatch", "UserPromptExpansion", "PreSkillShellCommand", "PreModelSwitch", "PostModelSwitch",
            "MessageDisplay", "Elicitation", "ElicitationResult", "FileChanged"} <= events
    # The ones we wire for a fleet operator; the rest are accepted with a notice (test above).
    assert {"Elicitation", "ElicitationResult"} <= set(EVENT_FIELDS)
