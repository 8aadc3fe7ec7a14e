"""The pure cancellation decision."""

from __future__ import annotations

import copy

from agent_hooks.config import DEFAULTS
from agent_hooks.features.cancellation import RULE_SESSION, RULE_TASK, Snapshot, decide

from support.scripts import BIN


def test_not_cancelled_allows():
    assert decide(Snapshot(), DEFAULTS) is None
    assert decide(Snapshot(task_id="T1", task_state="open"), DEFAULTS) is None
    assert decide(Snapshot(task_id="T1", task_state="done"), DEFAULTS) is None


def test_session_mark_denies_with_reason_and_instructions():
    v = decide(Snapshot(session_cancelled_at=1.0, session_cancel_reason="wrong branch"), DEFAULTS)
    assert v is not None and v.decision == "deny" and v.rule == RULE_SESSION
    assert "cancelled" in v.message and "wrong branch" in v.message
    assert "Stop working" in v.message and "report" in v.message


def test_task_mark_denies_and_names_the_task():
    snap = Snapshot(task_id="T7", task_state="cancelled", task_cancel_reason="superseded by T8",
                    task_description="Migrate the orders table")
    v = decide(snap, DEFAULTS)
    assert v is not None and v.rule == RULE_TASK
    assert "T7" in v.message and "superseded by T8" in v.message and "Migrate the orders table" in v.message


def test_task_wins_over_session_and_missing_reason_is_said():
    snap = Snapshot(session_cancelled_at=1.0, session_cancel_reason="s", task_id="T", task_state="cancelled")
    v = decide(snap, DEFAULTS)
    assert v.rule == RULE_TASK and "no reason given" in v.message


def test_disabled_and_custom_instructions():
    cfg = copy.deepcopy(DEFAULTS)
    cfg["cancel"]["instructions"] = "Write HANDOFF.md and stop."
    v = decide(Snapshot(session_cancelled_at=1.0, session_cancel_reason="x"), cfg)
    assert v.message.endswith("Write HANDOFF.md and stop.")
    cfg["cancel"]["enabled"] = False
    assert decide(Snapshot(session_cancelled_at=1.0), cfg) is None


# The CLI installed beside this Python: the only path-qualified agent-hook allowed.
INSTALLED = str(BIN / "agent-hook")
TASK = Snapshot(task_id="T-9", task_state="cancelled", task_cancel_reason="stop")


def _bash(command: str) -> dict:
    return {"command": command, "description": "report"}


def test_a_cancelled_task_may_still_leave_its_progress_report():
    ok = [
        "agent-hook task progress T-9 'Done: schema. Left: CLI.'",
        f'{INSTALLED} task progress T-9 "Done: schema; left: CLI & docs"',
        "  agent-hook task progress 'T-9' 'x'  ",
    ]
    for command in ok:
        assert decide(TASK, DEFAULTS, "Bash", _bash(command)) is None, command
    v = decide(TASK, DEFAULTS, "Bash", _bash("ls"))
    assert v.decision == "deny" and "agent-hook task progress T-9 '<your report>'" in v.message


def test_the_report_exception_cannot_smuggle_other_commands():
    bad = [
        "agent-hook task progress T-9 'x'; rm -rf build",
        "agent-hook task progress T-9 'x' && make deploy",
        'agent-hook task progress T-9 "$(make deploy)"',
        'agent-hook task progress T-9 "`make deploy`"',
        'agent-hook task progress T-9 "a\\" ; make deploy; echo \\"b"',
        "agent-hook task progress T-9 'x'\nmake deploy",
        "agent-hook task progress T-10 'other task'",
        "agent-hook cancel --task T-9 --reason x",
        "agent-hook uncancel --task T-9",
        "agent-hook task progress T-9 unquoted report",
        '/opt/elsewhere/bin/agent-hook task progress T-9 "a planted agent-hook"',
        "./agent-hook task progress T-9 'x'",
    ]
    for command in bad:
        assert decide(TASK, DEFAULTS, "Bash", _bash(command)) is not None, command
    report = _bash("agent-hook task progress T-9 'x'")
    assert decide(TASK, DEFAULTS, "Write", report) is not None
    no_task = Snapshot(session_cancelled_at=1.0, session_cancel_reason="x")
    assert decide(no_task, DEFAULTS, "Bash", report) is not None
    assert "task progress" not in decide(no_task, DEFAULTS).message
    cfg = copy.deepcopy(DEFAULTS)
    cfg["cancel"]["allow_progress_report"] = False
    assert decide(TASK, cfg, "Bash", report) is not None
    assert "task progress" not in decide(TASK, cfg).message
