"""Review of issue 17: paths where Stop must not block."""

from __future__ import annotations

from pathlib import Path

from helpers import store_rows  # noqa: F401
from test_persist_hooks import payload, start, stop, write_transcript


def test_a_task_never_recorded_does_not_hold_even_when_persist_is_the_default(hooks_home: Path):
    # AGENT_HOOKS_TASK_ID names a task nobody created: `task done` cannot end it and its
    # continuation counter cannot move, so holding would block every turn with no way out.
    env = {**start("R1", hooks_home, task="NO-SUCH-TASK"), "AGENT_HOOKS__PERSIST__DEFAULT": "true"}
    write_transcript("R1", 1000)
    for active in (False, True, True):
        assert stop("R1", hooks_home, env, active=active) is None
