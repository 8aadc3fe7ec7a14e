"""A fork records its parent (`--fork-session`): the installed hooks over payloads and a transcript head
captured from Claude Code 2.1.330 (tests/fixtures/claude-code-2.1.330/)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.repo import FIXTURES_330
from support.scripts import agent_hook, error_log, run_exe, store_rows

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")

CAPTURED = FIXTURES_330
FORK, PARENT = "8f0c2d7e-fork-0001", "1b2a3c4d-parent-0001"


def fork_payload(home: Path, cwd: Path) -> tuple[dict, Path]:
    payload = json.loads((CAPTURED / "session-start-fork.json").read_text())
    transcript = home / ".claude" / "projects" / "-workspace" / f"{FORK}.jsonl"
    payload.update(session_id=FORK, cwd=str(cwd), transcript_path=str(transcript))
    return payload, transcript


def write_transcript(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (CAPTURED / "fork-transcript-head.jsonl").read_text()
    path.write_text(text.replace("FORK-SESSION-ID", FORK).replace("PARENT-SESSION-ID", PARENT))


def session(hooks_home: Path, sid: str) -> dict:
    (row,) = store_rows(hooks_home, "SELECT forked_at, parent_session_id FROM sessions WHERE session_id = ?", (sid,))
    return dict(row)


def test_fork_marked_at_session_start_and_parent_recorded_at_stop(hooks_home: Path, tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    payload, transcript = fork_payload(home, tmp_path)
    # 2.1.330 runs SessionStart(fork) before it writes the fork's transcript.
    proc = run_exe("agent-hook-session-start", payload)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    first = session(hooks_home, FORK)
    assert first["forked_at"] is not None and first["parent_session_id"] is None
    (start,) = store_rows(hooks_home, "SELECT detail FROM session_events WHERE session_id = ? AND event = 'SessionStart'",
                          (FORK,))
    assert start["detail"] == "fork"
    write_transcript(transcript)
    stop = {"session_id": FORK, "transcript_path": str(transcript), "cwd": str(tmp_path), "hook_event_name": "Stop",
            "stop_hook_active": False, "last_assistant_message": "Fork here."}
    assert run_exe("agent-hook-stop", stop).returncode == 0
    assert session(hooks_home, FORK)["parent_session_id"] == PARENT
    assert session(hooks_home, FORK)["forked_at"] == first["forked_at"]
    assert error_log(hooks_home) == []


def test_parent_recorded_at_session_end_when_stop_came_before_the_transcript(hooks_home: Path, tmp_path: Path) -> None:
    """The client can write a short fork's transcript after its Stop hook too: SessionEnd reads it then."""
    payload, transcript = fork_payload(Path(os.environ["HOME"]), tmp_path)
    assert run_exe("agent-hook-session-start", payload).returncode == 0
    stop = {"session_id": FORK, "transcript_path": str(transcript), "cwd": str(tmp_path), "hook_event_name": "Stop",
            "stop_hook_active": False, "last_assistant_message": "Fork here."}
    assert run_exe("agent-hook-stop", stop).returncode == 0
    assert session(hooks_home, FORK)["parent_session_id"] is None  # nothing to read yet
    write_transcript(transcript)
    end = {"session_id": FORK, "transcript_path": str(transcript), "cwd": str(tmp_path),
           "hook_event_name": "SessionEnd", "reason": "other"}
    proc = run_exe("agent-hook-session-end", end)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    assert session(hooks_home, FORK)["parent_session_id"] == PARENT
    assert error_log(hooks_home) == []


def test_transcript_already_there_at_session_start(hooks_home: Path, tmp_path: Path) -> None:
    payload, transcript = fork_payload(Path(os.environ["HOME"]), tmp_path)
    write_transcript(transcript)
    assert run_exe("agent-hook-session-start", payload).returncode == 0
    assert session(hooks_home, FORK)["parent_session_id"] == PARENT


def test_not_a_fork_or_an_unsafe_path_records_nothing(hooks_home: Path, tmp_path: Path) -> None:
    payload, transcript = fork_payload(Path(os.environ["HOME"]), tmp_path)
    # A transcript outside the client's directories is never read (a path from a payload).
    outside = tmp_path / "elsewhere" / f"{FORK}.jsonl"
    write_transcript(outside)
    payload["transcript_path"] = str(outside)
    assert run_exe("agent-hook-session-start", payload).returncode == 0
    assert session(hooks_home, FORK)["parent_session_id"] is None
    # A resumed (not forked) session whose transcript names another requester is not a fork.
    write_transcript(transcript)
    resumed = dict(payload, session_id="resumed-1", source="resume", transcript_path=str(transcript))
    assert run_exe("agent-hook-session-start", resumed).returncode == 0
    assert session(hooks_home, "resumed-1") == {"forked_at": None, "parent_session_id": None}


def test_session_show_names_the_parent(hooks_home: Path, tmp_path: Path) -> None:
    payload, transcript = fork_payload(Path(os.environ["HOME"]), tmp_path)
    write_transcript(transcript)
    assert run_exe("agent-hook-session-start", payload).returncode == 0
    assert f"forked from    {PARENT}" in agent_hook("session", "show", FORK).stdout
    shown = json.loads(agent_hook("session", "show", FORK, "--json").stdout)
    assert shown["parent_session_id"] == PARENT and shown["forked_at"].endswith("Z")
