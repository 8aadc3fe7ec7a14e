"""Review of issue 17: paths where Stop must not block."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import error_log, run_hook, store_rows
from test_persist_hooks import payload, start, stop, write_transcript


def test_a_task_never_recorded_does_not_hold_even_when_persist_is_the_default(hooks_home: Path):
    # AGENT_HOOKS_TASK_ID names a task nobody created: `task done` cannot end it and its
    # continuation counter cannot move, so holding would block every turn with no way out.
    env = {**start("R1", hooks_home, task="NO-SUCH-TASK"), "AGENT_HOOKS__PERSIST__DEFAULT": "true"}
    write_transcript("R1", 1000)
    for active in (False, True, True):
        assert stop("R1", hooks_home, env, active=active) is None


def test_a_malformed_transcript_line_costs_stop_nothing(hooks_home: Path):
    # The transcript is a file the hook only reads: a line of an unexpected shape (content a
    # number, model a number) must not raise, or the whole Stop record (state, summary, the
    # persistence decision) is lost.
    from helpers import agent_hook

    env = start("R2", hooks_home)
    agent_hook("task", "create", "T-1", "--persist")
    write_transcript("R2", 1000, [{"type": "user", "message": {"content": 5}}])
    out = stop("R2", hooks_home, env)
    assert out and out["decision"] == "block", error_log(hooks_home)
    write_transcript("R2", 1000, [{"type": "assistant", "message": {"model": 7, "content": 5,
                                                                      "usage": {"input_tokens": 10}}}])
    out = stop("R2", hooks_home, env, active=True)
    assert out and out["decision"] == "block", error_log(hooks_home)
    assert error_log(hooks_home) == []
    rows = store_rows(hooks_home, "SELECT persist_last FROM sessions WHERE session_id = 'R2'")
    assert rows[0]["persist_last"] == "held 2/5"
