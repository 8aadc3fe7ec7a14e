"""Guards under the real client: a loop warned then blocked, a self-cancel, a poll with no progress."""

from __future__ import annotations

import pytest
from harness import BIN_DIR, E2E, TRANSPORTS
from model_server import text, tool_use

# Every scenario over both transports: the executables, and http hooks to the resident server.
pytestmark = pytest.mark.parametrize("transport", TRANSPORTS, indirect=True)

AGENT_HOOK = BIN_DIR / "agent-hook"


def _results_in_order(e2e: E2E, ids: list[str]) -> list[dict]:
    by_id = {r["tool_use_id"]: r for r in e2e.server.tool_results()}
    return [by_id[i] for i in ids]


def _content(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content)


def test_repeated_call_is_warned_then_denied_and_stops_running(e2e: E2E) -> None:
    call = {"command": "echo tick >> ticks.txt", "description": "append a tick"}
    ids = [f"toolu_tick{n:02d}" for n in range(1, 21)]
    e2e.server.set_script([[tool_use("Bash", call, id=i)] for i in ids] + [[text("Stopped repeating.")]])
    run = e2e.run("Append ticks.")
    assert run.ok and run.result["result"] == "Stopped repeating.", e2e.describe()
    assert e2e.server.remaining == 0, e2e.describe()

    # The command ran 14 times: from the 15th identical call on it was blocked.
    assert (e2e.workspace / "ticks.txt").read_text() == "tick\n" * 14

    # The warning reached the model (in a request body) before anything was blocked.
    warned = e2e.server.requests_containing("Loop guard warning: 8 identical Bash calls")
    blocked = e2e.server.requests_containing("Loop guard: blocked. 15 identical Bash calls")
    assert warned and blocked, e2e.describe()
    main = e2e.server.messages("main")
    assert main.index(warned[0]) < main.index(blocked[0])
    results = _results_in_order(e2e, ids)
    for block in results[14:]:
        assert block.get("is_error") is True and "Loop guard: blocked" in _content(block), block
    for block in results[:14]:
        assert "blocked" not in _content(block), block

    rows = e2e.query("SELECT decision, rule, outcome FROM tool_calls WHERE session_id = ? ORDER BY id",
                     run.session_id)
    assert [r["decision"] for r in rows] == ["allow"] * 7 + ["warn"] * 7 + ["deny"] * 6
    assert {r["outcome"] for r in rows[14:]} == {"denied"} and {r["rule"] for r in rows[7:]} == {"loops.repeat"}
    assert e2e.errors() == []


def test_self_cancel_denies_the_next_call_and_blocks_a_resumed_prompt(e2e: E2E) -> None:
    reason = "scripted self-cancel: the lead moved this work elsewhere"
    cancel = f'{AGENT_HOOK} cancel "$CLAUDE_CODE_SESSION_ID" --reason "{reason}"'
    e2e.server.set_script([
        [tool_use("Bash", {"command": cancel, "description": "cancel my own session"}, id="toolu_cancel")],
        [tool_use("Bash", {"command": "echo after > after.txt", "description": "keep working"}, id="toolu_after")],
        [text("Stopping as told.")],
    ])
    run = e2e.run("Cancel yourself, then carry on.")
    assert run.ok, e2e.describe()
    sid = run.session_id
    cancel_result, after_result = _results_in_order(e2e, ["toolu_cancel", "toolu_after"])
    assert f"session {sid}: cancelled" in _content(cancel_result), cancel_result
    assert after_result.get("is_error") is True, after_result
    assert reason in _content(after_result) and "Stop working" in _content(after_result)
    assert not (e2e.workspace / "after.txt").exists()

    # A prompt sent with --resume is blocked: it never reaches the model.
    e2e.server.add_turns([[text("I should not be asked.")]])
    before = len(e2e.server.messages("main"))
    resumed = e2e.run("Please continue the work.", resume=sid)
    assert len(e2e.server.messages("main")) == before, e2e.describe()
    assert not e2e.server.requests_containing("Please continue the work.")
    assert e2e.server.remaining == 1
    # The client reports the block, with our reason, as the run's result.
    assert resumed.returncode == 0 and resumed.result, e2e.describe()
    assert "blocked by hook" in resumed.result["result"] and reason in resumed.result["result"], resumed.result
    (session,) = e2e.query("SELECT cancel_reason FROM sessions WHERE session_id = ?", sid)
    assert session["cancel_reason"] == reason
    prompts = e2e.query("SELECT detail FROM session_events WHERE session_id = ? AND event = 'UserPromptSubmit'"
                        " ORDER BY id", sid)
    assert [p["detail"] for p in prompts] == [None, "cancel.session"]
    assert e2e.errors() == []


def test_poll_without_progress_is_stopped(e2e: E2E) -> None:
    (e2e.workspace / "status.txt").write_text("pending\n")
    poll = {"command": "sleep 0.1 && cat status.txt && echo poll >> polls.log", "description": "check status"}
    ids = [f"toolu_poll{n}" for n in range(1, 9)]
    e2e.server.set_script([[tool_use("Bash", poll, id=i)] for i in ids] + [[text("Gave up polling.")]])
    run = e2e.run("Wait for status.txt to change.")
    assert run.ok and run.result["result"] == "Gave up polling.", e2e.describe()

    # Five polls ran and saw the same output; the sixth and later were held back.
    assert (e2e.workspace / "polls.log").read_text() == "poll\n" * 5
    results = _results_in_order(e2e, ids)
    for block in results[5:]:
        text_ = _content(block)
        assert block.get("is_error") is True and "no progress" in text_ and "Back off" in text_, block
    assert e2e.server.requests_containing("returned the same output the last 3 times")
    rows = e2e.query("SELECT decision, rule FROM tool_calls WHERE session_id = ? ORDER BY id", run.session_id)
    assert [r["decision"] for r in rows] == ["allow"] * 3 + ["warn"] * 2 + ["deny"] * 3
    assert {r["rule"] for r in rows[5:]} == {"polling.no_progress:sleep-then-check"}
    assert e2e.errors() == []


def test_cancelled_task_stops_work_but_takes_the_report(e2e: E2E) -> None:
    cancel = f'{AGENT_HOOK} cancel --task T-77 --reason "priorities changed"'
    report = f"{AGENT_HOOK} task progress T-77 'Stopped after step one; step two not started.'"
    e2e.server.set_script([
        [tool_use("Bash", {"command": cancel, "description": "a lead cancels the task"}, id="toolu_cancel")],
        [tool_use("Bash", {"command": "echo two > step2.txt", "description": "step two"}, id="toolu_step2")],
        [tool_use("Bash", {"command": report, "description": "leave the report"}, id="toolu_report")],
        [text("Reported and stopped.")],
    ])
    run = e2e.run("Work on T-77.", env_extra={"AGENT_HOOKS_TASK_ID": "T-77"})
    assert run.ok, e2e.describe()
    step2, reported = _results_in_order(e2e, ["toolu_step2", "toolu_report"])
    assert step2.get("is_error") is True and "Task 'T-77' was cancelled" in _content(step2), step2
    assert "priorities changed" in _content(step2) and "agent-hook task progress T-77" in _content(step2)
    assert not (e2e.workspace / "step2.txt").exists()
    assert reported.get("is_error") is not True and "task T-77: progress recorded" in _content(reported), reported
    (task,) = e2e.query("SELECT state, cancel_reason, progress FROM tasks WHERE task_id = 'T-77'")
    assert task == {"state": "cancelled", "cancel_reason": "priorities changed",
                    "progress": "Stopped after step one; step two not started."}
    assert e2e.errors() == []
