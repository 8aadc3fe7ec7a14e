"""What a session waits on (a permission dialog, a question, an API error), from payloads captured from the real client 2.1.330
(tests/fixtures/claude-code-2.1.330/); PermissionDenied, which the client sends only when its auto-mode
classifier denies a call (not driven here), uses the documented payload (reference §1, [D])."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from agent_hooks.config import defaults
from agent_hooks.forward.eventmap import metadata
from agent_hooks.payload import Payload

from support.repo import FIXTURES_330
from support.scripts import agent_hook, run_hook, store_rows

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")


def fixture(name: str, sid: str = "W1") -> dict[str, Any]:
    data = json.loads((FIXTURES_330 / name).read_text())
    data["session_id"] = sid
    return data


def status_of(sid: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    data = json.loads(agent_hook("status", "--json", env=env).stdout)
    return next(s for s in data["sessions"] if s["session_id"] == sid)


def _start(sid: str) -> None:
    run_hook({"session_id": sid, "hook_event_name": "SessionStart", "source": "startup", "cwd": "/tmp"})


def test_permission_request_needs_input_and_the_next_tool_call_clears_it(hooks_home: Path):
    _start("W1")
    assert run_hook(fixture("permission_request_bash.json")).stdout == b""  # observer: never answers
    s = status_of("W1")
    assert s["state"] == "needs_input" and s["waiting_on"] == "needs_input"
    assert s["waiting_detail"] == "Bash: touch /home/dev/acme/never"
    # The permission_prompt notification 6 s later says only "Claude needs your permission": the tool stays.
    run_hook(fixture("notification_permission_prompt.json"))
    assert status_of("W1")["waiting_detail"] == "Bash: touch /home/dev/acme/never"
    assert "needs input: Bash: touch" in agent_hook("status").stdout
    shown = json.loads(agent_hook("session", "show", "W1", "--json").stdout)
    assert shown["waiting_on"] == "needs_input" and shown["waiting_since"]
    # The dialog was answered: the tool runs, PostToolUse comes.
    run_hook({"session_id": "W1", "hook_event_name": "PostToolUse", "tool_name": "Bash",
              "tool_input": {"command": "touch x"}, "tool_response": {}, "tool_use_id": "t1"})
    s = status_of("W1")
    assert s["state"] == "live" and s["waiting_on"] is None and s["waiting_detail"] is None


def test_notification_alone_needs_input_and_a_prompt_clears_it(hooks_home: Path):
    _start("W2")
    run_hook(fixture("notification_permission_prompt.json", "W2"))
    s = status_of("W2")
    assert s["state"] == "needs_input" and s["waiting_detail"] is None
    run_hook({"session_id": "W2", "hook_event_name": "UserPromptSubmit", "prompt": "go on"})
    assert status_of("W2")["state"] == "live"


def test_a_session_needing_input_is_never_stalled(hooks_home: Path):
    _start("W3")
    run_hook(fixture("permission_request_bash.json", "W3"))
    _start("W4")  # a working session, silent as long: its stall shows the threshold is really in force
    run_hook({"session_id": "W4", "hook_event_name": "UserPromptSubmit", "prompt": "build it"})
    time.sleep(1.2)  # one silence for both, longer than the threshold (1 s, the least it takes)
    env = {"AGENT_HOOKS__HEARTBEAT__STALLED_AFTER_S": "1"}
    s = status_of("W3", env)
    assert s["state"] == "needs_input" and s["stalled_for_s"] is None
    assert status_of("W4", env)["state"] == "stalled"


def test_stop_failure_is_error_with_its_kind(hooks_home: Path):
    _start("W5")
    assert run_hook(fixture("stop_failure_rate_limit.json", "W5")).stdout == b""
    s = status_of("W5")
    assert s["state"] == "error" and s["waiting_detail"] == "rate_limit"
    text = agent_hook("status").stdout  # one process for both lines (~50 ms of CPU each)
    assert "error: rate_limit" in text
    assert "error: 1" in text
    run_hook({"session_id": "W5", "hook_event_name": "UserPromptSubmit", "prompt": "retry"})
    assert status_of("W5")["state"] == "live"


def test_idle_prompt_is_awaiting(hooks_home: Path):
    _start("W6")
    run_hook(fixture("notification_idle_prompt.json", "W6"))  # 60 s after a turn ended, in the real client
    s = status_of("W6")
    assert s["state"] == "awaiting" and s["waiting_on"] == "awaiting"


def test_permission_denied_documented_payload_clears_needs_input(hooks_home: Path):
    _start("W7")
    run_hook(fixture("permission_request_bash.json", "W7"))
    run_hook({"session_id": "W7", "hook_event_name": "PermissionDenied", "tool_name": "Bash",
              "tool_input": {"command": "rm -rf /"}, "reason": "auto mode classifier"})
    assert status_of("W7")["state"] == "live"
    events = [r[0] for r in store_rows(hooks_home, "SELECT event FROM session_events WHERE session_id='W7'")]
    assert events[-1] == "PermissionDenied"


def test_subagents_recorded_and_shown(hooks_home: Path):
    start = fixture("subagent_start.json", "W8")
    _start("W8")
    run_hook(start)
    s = status_of("W8")
    assert (s["subagents_running"], s["subagents_finished"]) == (1, 0)
    run_hook(fixture("subagent_stop.json", "W8"))
    run_hook(fixture("subagent_stop_compaction.json", "W8"))  # a compaction's own: stops without a start
    s = status_of("W8")
    assert (s["subagents_running"], s["subagents_finished"]) == (0, 2)
    shown = json.loads(agent_hook("session", "show", "W8", "--json").stdout)
    done = {x["agent_id"]: x for x in shown["subagents"]["finished"]}
    assert done[start["agent_id"]]["agent_type"] == "general-purpose"
    assert done[start["agent_id"]]["last_message"] == "sub done" and done[start["agent_id"]]["started_at"]
    assert "subagent" in agent_hook("session", "show", "W8").stdout


def test_post_compact_recorded(hooks_home: Path):
    _start("W9")
    run_hook(fixture("post_compact_manual.json", "W9"))
    rows = store_rows(hooks_home, "SELECT detail FROM session_events WHERE session_id='W9' AND event='PostCompact'")
    assert rows and rows[0][0].startswith("manual (")


def test_forwarded_events_name_the_waiting_state():
    cfg = defaults()
    fmap = cfg["forward"]["event_map"]
    # The OptimalOS contract's defaults are kept; the waiting states' are added.
    assert fmap["Stop"] == "exit" and fmap["Notification"] == "to_review" and fmap["SessionStart"] == "start"
    assert fmap["PermissionRequest"] == "to_review" and fmap["StopFailure"] == "exit_error"
    pr = Payload(fixture("permission_request_bash.json"))
    assert metadata(pr, cfg) == "needs input: Bash"  # no raw input unless include_raw
    assert metadata(Payload(fixture("stop_failure_rate_limit.json")), cfg) == "error: rate_limit"
    assert metadata(Payload(fixture("notification_permission_prompt.json")), cfg) == "needs input: permission prompt"
    assert metadata(Payload(fixture("notification_idle_prompt.json")), cfg) == "awaiting: idle prompt"


def test_an_error_after_the_end_is_kept_and_the_session_stays_ended(hooks_home: Path):
    """The client does not wait for StopFailure's hook before SessionEnd's: either order is recorded."""
    _start("W10")
    run_hook({"session_id": "W10", "hook_event_name": "SessionEnd", "reason": "other"})
    run_hook(fixture("stop_failure_rate_limit.json", "W10"))
    s = status_of("W10")
    assert s["state"] == "ended" and (s["waiting_on"], s["waiting_detail"]) == ("error", "rate_limit")


# -- Elicitation: an MCP server asks the person (captured from 2.1.332) --------------------------------

FIXTURES_332 = FIXTURES_330.parent / "claude-code-2.1.332"


def fixture_332(name: str, sid: str = "E1") -> dict[str, Any]:
    data = json.loads((FIXTURES_332 / name).read_text())
    data["session_id"] = sid
    return data


def test_an_mcp_question_to_the_person_needs_input_until_it_is_answered(hooks_home: Path):
    """Elicitation is a session waiting on a person, as a permission dialog is: status, the board's
    forwarded line and the session say so, with the server and its question; ElicitationResult clears it."""
    _start("E1")
    assert run_hook(fixture_332("Elicitation.json")).stdout == b""  # observer: never answers for the person
    s = status_of("E1")
    assert s["state"] == "needs_input" and s["waiting_on"] == "needs_input"
    assert s["waiting_detail"] == "asker: Which database should the service use?"
    assert "needs input: asker: Which database" in agent_hook("status").stdout
    assert run_hook(fixture_332("ElicitationResult.json")).stdout == b""
    s = status_of("E1")
    assert s["state"] == "live" and s["waiting_on"] is None and s["waiting_detail"] is None
    events = [r["event"] for r in store_rows(hooks_home, "SELECT event FROM session_events WHERE session_id = 'E1'")]
    assert events[-2:] == ["Elicitation", "ElicitationResult"]


def test_an_mcp_question_is_forwarded_as_waiting_on_a_person():
    cfg = defaults()
    assert cfg["forward"]["event_map"]["Elicitation"] == cfg["forward"]["event_map"]["PermissionRequest"]
    line = metadata(Payload(fixture_332("Elicitation.json")), cfg)
    assert line.startswith("needs input: asker")
