"""Hostile payloads (lone surrogates, numbers SQLite cannot hold, deep nesting, huge ids and paths,
NUL bytes): each is bad input with a one-line message, never an internal error, and the call is
still recorded wherever the payload can be acted on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.repo import fixture_payload
from support.scripts import EXECUTABLES, error_log, run_exe, store_rows

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")

SURROGATE = "\\ud83d"  # JSON text for a lone high surrogate (half an emoji)


def _json_with(payload: dict, field: str, raw_value: str) -> bytes:
    """The payload's JSON with ``field`` set to the JSON string literal ``raw_value`` (escapes kept)."""
    marker = "__RAW__"
    doc = dict(payload)
    doc[field] = marker
    return json.dumps(doc).replace(f'"{marker}"', f'"{raw_value}"').encode()


def _internal_errors(home: Path) -> list[dict]:
    return [e for e in error_log(home) if e["kind"] not in ("bad_input",)]


SURROGATE_CASES = [
    ("UserPromptSubmit.json", "prompt"),
    ("Stop.json", "last_assistant_message"),
    ("PostToolUseFailure-Bash.json", "error"),
    ("PostToolUse-Bash.json", "cwd"),
    ("PostToolUse-Bash.json", "session_id"),
    ("PostToolUse-Bash.json", "transcript_path"),
    ("PostToolUse-Bash.json", "tool_name"),
    ("PostToolUse-Bash.json", "tool_use_id"),
    ("PostToolUse-Bash.json", "agent_id"),
    ("UserPromptSubmit.json", "session_id"),
]


@pytest.mark.parametrize("fixture,field", SURROGATE_CASES)
def test_a_lone_surrogate_does_not_lose_the_call(fixture: str, field: str, hooks_home: Path) -> None:
    payload = fixture_payload(fixture)
    data = _json_with(payload, field, f"broken {SURROGATE} text")
    proc = run_exe(EXECUTABLES[payload["hook_event_name"]], data)
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr and b"internal error" not in proc.stderr, proc.stderr
    assert not _internal_errors(hooks_home), error_log(hooks_home)
    # The call is recorded; the broken character is stored as U+FFFD.
    sid = "broken \ufffd text" if field == "session_id" else payload["session_id"]
    rows = store_rows(hooks_home, "SELECT hook_calls FROM sessions WHERE session_id = ?", (sid,))
    assert rows and rows[0][0] == 1
    if field == "prompt":
        first = store_rows(hooks_home, "SELECT first_prompt FROM sessions")[0][0]
        assert first == "broken \ufffd text"
    # What was repaired is said on stderr (one line) and counted as bad input.
    assert proc.stderr.decode().count("\n") == 1 and "surrogate" in proc.stderr.decode()
    kinds = [tuple(r) for r in store_rows(hooks_home, "SELECT kind, session_id FROM errors")]
    assert kinds == [("bad_input", sid)]


def test_a_lone_surrogate_in_the_event_name_is_refused_and_counted(hooks_home: Path) -> None:
    payload = fixture_payload("PostToolUse-Bash.json")
    assert run_exe(EXECUTABLES["SessionStart"], fixture_payload("SessionStart-startup.json")).returncode == 0
    proc = run_exe(EXECUTABLES["PostToolUse"], _json_with(payload, "hook_event_name", f"PostToolUse{SURROGATE}"))
    assert proc.returncode == 0 and proc.stdout == b""
    assert b"internal error" not in proc.stderr
    rows = [tuple(r) for r in store_rows(hooks_home, "SELECT kind, event FROM errors")]
    assert rows == [("bad_input", "PostToolUse")]
    assert error_log(hooks_home)[-1]["kind"] == "bad_input"


@pytest.mark.parametrize("value", ["1e30", "-1e30", "1e400", "NaN", "Infinity", "123456789012345678901234567890"])
def test_a_number_too_large_for_sqlite_does_not_lose_the_call(value: str, hooks_home: Path) -> None:
    payload = fixture_payload("PostToolUse-Bash.json")
    doc = json.dumps({**payload, "duration_ms": "__N__"}).replace('"__N__"', value).encode()
    proc = run_exe(EXECUTABLES["PostToolUse"], doc)
    assert proc.returncode == 0 and b"internal error" not in proc.stderr, proc.stderr
    assert not _internal_errors(hooks_home)
    rows = store_rows(hooks_home, "SELECT duration_ms, outcome FROM tool_calls")
    assert [tuple(r) for r in rows] == [(None, "success")]
    assert "duration_ms" in proc.stderr.decode()


def _nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"a": [value]}
    return value


def test_deep_nesting_past_the_parser_is_a_clear_bad_input(hooks_home: Path) -> None:
    payload = fixture_payload("PreToolUse-Bash.json")
    deep = "[" * 100_000 + "]" * 100_000
    data = json.dumps({**payload, "tool_input": {"x": "__D__"}}).replace('"__D__"', deep).encode()
    proc = run_exe(EXECUTABLES["PreToolUse"], data)
    assert proc.returncode == 0 and proc.stdout == b""
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "nested" in lines[0], proc.stderr
    assert [e["kind"] for e in error_log(hooks_home)] == ["bad_input"]
    assert "traceback" not in error_log(hooks_home)[0]


def test_moderately_deep_nesting_is_clipped_and_the_call_recorded(hooks_home: Path) -> None:
    payload = fixture_payload("PreToolUse-Bash.json")
    data = json.dumps({**payload, "tool_input": {"command": "ls", "deep": _nested(400)}}).encode()
    proc = run_exe(EXECUTABLES["PreToolUse"], data)
    assert proc.returncode == 0 and b"internal error" not in proc.stderr, proc.stderr
    assert "nested" in proc.stderr.decode()
    assert store_rows(hooks_home, "SELECT count(*) FROM tool_calls")[0][0] == 1
    assert not _internal_errors(hooks_home)


def test_huge_ids_and_paths_are_bounded(hooks_home: Path) -> None:
    payload = fixture_payload("PostToolUse-Bash.json")
    big_sid = "s" * 2_000_000
    big_cwd = "/" + "d" * 1_500_000
    proc = run_exe(EXECUTABLES["PostToolUse"], {**payload, "session_id": big_sid, "cwd": big_cwd,
                                                "tool_name": "T" * 100_000})
    assert proc.returncode == 0 and b"internal error" not in proc.stderr, proc.stderr[:500]
    assert len(proc.stderr) < 2000
    rows = store_rows(hooks_home, "SELECT session_id, cwd FROM sessions")
    assert len(rows) == 1
    sid, cwd = rows[0]
    assert len(sid) <= 256 and sid.startswith("sss")
    assert not cwd  # a path we cannot keep whole is not kept at all: a clipped path is a wrong path
    tool = store_rows(hooks_home, "SELECT tool_name FROM tool_calls")[0][0]
    assert len(tool) <= 256
    # Two different huge ids stay two sessions.
    run_exe(EXECUTABLES["PostToolUse"], {**payload, "session_id": big_sid[:-1] + "t"})
    assert store_rows(hooks_home, "SELECT count(DISTINCT session_id) FROM sessions")[0][0] == 2
    err = store_rows(hooks_home, "SELECT kind, length(session_id), length(message) FROM errors")
    assert err and all(k == "bad_input" and n <= 256 and m <= 2000 for k, n, m in err)


def test_a_nul_in_a_path_is_dropped_with_a_message(hooks_home: Path) -> None:
    payload = fixture_payload("Stop.json")
    proc = run_exe(EXECUTABLES["Stop"], {**payload, "cwd": "/tmp/a\u0000b", "transcript_path": "/x\u0000y"})
    assert proc.returncode == 0 and b"internal error" not in proc.stderr, proc.stderr
    assert not _internal_errors(hooks_home)
    assert store_rows(hooks_home, "SELECT count(*) FROM sessions")[0][0] == 1
