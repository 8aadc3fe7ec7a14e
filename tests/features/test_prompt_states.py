"""States that say what a session is doing at its prompt, and a call a person denied.

* A new session that has had no prompt yet is awaiting its first prompt, not live with 0 tool calls.
* A session whose prompt was blocked (its task cancelled) sits at its prompt: awaiting, with why.
* A call denied with `agent-hook deny` is shown denied, never "allow pending", and counted as denied.

Each as `status` (JSON and text) and `session show` (JSON and text) say it; the board's card is in
tests/center/test_board_fleet.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.approvals import PERMISSION, Held
from support.scripts import agent_hook, run_hook
from support.waiting import wait_for

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")


def _status(sid: str) -> dict[str, Any]:
    data = json.loads(agent_hook("status", "--json").stdout)
    return next(s for s in data["sessions"] if s["session_id"] == sid)


def _show(sid: str) -> dict[str, Any]:
    return json.loads(agent_hook("session", "show", sid, "--json").stdout)


def _event(sid: str, event: str, **extra: Any) -> dict[str, Any]:
    return {"session_id": sid, "hook_event_name": event, "cwd": "/tmp", "transcript_path": "/tmp/t.jsonl", **extra}


def test_a_new_session_awaits_its_first_prompt_then_works(hooks_home: Path) -> None:
    run_hook(_event("P1", "SessionStart", source="startup"))
    s = _status("P1")
    assert s["state"] == "awaiting" and s["waiting_on"] == "awaiting" and s["waiting_detail"] == "its first prompt"
    text = agent_hook("status").stdout
    assert "awaiting: its first prompt (since " in text
    assert "awaiting: its first prompt" in agent_hook("session", "show", "P1").stdout
    assert _show("P1")["state"] == "awaiting"
    # The person types a prompt: the session works, and nothing about a first prompt is left.
    run_hook(_event("P1", "UserPromptSubmit", prompt="list the files"))
    s = _status("P1")
    assert s["state"] == "live" and s["waiting_on"] is None and s["waiting_detail"] is None
    assert "first prompt" not in agent_hook("status").stdout


def test_a_compaction_inside_a_turn_leaves_the_session_working(hooks_home: Path) -> None:
    run_hook(_event("P2", "SessionStart", source="startup"))
    run_hook(_event("P2", "UserPromptSubmit", prompt="refactor it"))
    run_hook(_event("P2", "SessionStart", source="compact"))
    assert _status("P2")["state"] == "live"


def test_a_blocked_prompt_leaves_the_session_at_its_prompt(hooks_home: Path) -> None:
    env = {"AGENT_HOOKS_TASK_ID": "T-7"}
    run_hook(_event("P3", "SessionStart", source="startup"), env)
    run_hook(_event("P3", "UserPromptSubmit", prompt="build it"), env)
    assert _status("P3")["state"] == "live"
    agent_hook("cancel", "--task", "T-7", "--reason", "done elsewhere")
    blocked = run_hook(_event("P3", "UserPromptSubmit", prompt="go on"), env)
    assert json.loads(blocked.stdout)["decision"] == "block"
    s = _status("P3")
    assert s["state"] == "awaiting" and s["waiting_detail"] == "its prompt was blocked (task cancelled)"
    assert "awaiting: its prompt was blocked (task cancelled)" in agent_hook("status").stdout
    assert "awaiting: its prompt was blocked (task cancelled)" in agent_hook("session", "show", "P3").stdout
    # Resumed, the next prompt goes through and the session works again.
    agent_hook("uncancel", "--task", "T-7")
    run_hook(_event("P3", "UserPromptSubmit", prompt="go on"), env)
    assert _status("P3")["state"] == "live"


def test_a_call_denied_by_a_person_is_denied_and_counted(hooks_home: Path) -> None:
    sid = PERMISSION["session_id"]
    run_hook(_event(sid, "SessionStart", source="startup"))
    run_hook(_event(sid, "UserPromptSubmit", prompt="touch a file"))
    run_hook(_event(sid, "PreToolUse", tool_name="Bash", tool_use_id="toolu_d1",
                    tool_input=PERMISSION["tool_input"]))
    held = Held(PERMISSION)
    wait_for(lambda: json.loads(agent_hook("approvals", "--json").stdout)["approvals"], timeout=10)
    [row] = json.loads(agent_hook("approvals", "--json").stdout)["approvals"]
    agent_hook("deny", row["id"], "--message", "not in this repo")
    assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    shown = _show(sid)
    [call] = shown["recent_tool_calls"]
    assert call["outcome"] == "denied" and call["decision"] == "deny" and call["reason"] == "not in this repo"
    assert shown["denied"] == 1 and _status(sid)["denied"] == 1
    text = agent_hook("session", "show", sid).stdout
    assert "denied 1" in text and "allow    pending" not in text
    assert "deny     denied" in text
