"""Review of issue 17: paths where Stop must not block."""

from __future__ import annotations

import json
import json
from pathlib import Path

import pytest

from support.scripts import error_log, run_hook, store_rows
from test_persist_hooks import payload, start, stop, write_transcript

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")


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
    from support.scripts import agent_hook

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


def test_an_error_inside_persistence_lets_go_keeps_the_stop_record_and_leaves_a_trace(hooks_home: Path):
    from support.scripts import agent_hook

    env = start("R3", hooks_home, task="T-3")
    agent_hook("task", "create", "T-3", "--persist")
    write_transcript("R3", 1000)
    # A row the decision cannot read (SQLite keeps any value in an INTEGER column).
    import sqlite3

    conn = sqlite3.connect(hooks_home / "store.db")
    conn.execute("UPDATE tasks SET max_continuations = 'many' WHERE task_id = 'T-3'")
    conn.commit()
    conn.close()
    assert stop("R3", hooks_home, env) is None  # never a block on our own error
    state = store_rows(hooks_home, "SELECT state FROM sessions WHERE session_id = 'R3'")[0]["state"]
    assert state == "awaiting"  # the rest of Stop's record is kept
    assert any("persist" in e["message"] and "ValueError" in e["message"] for e in error_log(hooks_home))
    assert store_rows(hooks_home, "SELECT count(*) FROM errors WHERE message LIKE 'persist:%'")[0][0] == 1


def test_a_nested_client_our_worker_runs_is_never_held(hooks_home: Path):
    # The summarizer (`claude -p`, AGENT_HOOKS_NESTED=1) inherits the worker's environment,
    # $AGENT_HOOKS_TASK_ID included: it is not working on the task, and holding it would
    # keep a summarizer running and spend the task's continuation budget.
    from support.scripts import agent_hook

    agent_hook("task", "create", "T-4", "--persist")
    env = {**start("R4", hooks_home, task="T-4"), "AGENT_HOOKS_NESTED": "1"}
    write_transcript("R4", 1000)
    assert stop("R4", hooks_home, env) is None
    assert json.loads(agent_hook("task", "show", "T-4", "--json").stdout)["continuations"] == 0
