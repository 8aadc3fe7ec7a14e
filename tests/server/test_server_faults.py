"""The fault run (tests/support/faults.py; bench/bench_supervisor.py prints the same counts over
longer runs): the worker killed with SIGKILL every 2 s while 20 sessions call, with strict guards.
No call answered without its record, no record lost, no tool run unguarded."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.faults import run_faults


@pytest.mark.slow
def test_kill_9_every_2_s_under_20_sessions_loses_nothing_and_guards_every_tool(tmp_path: Path) -> None:
    r = run_faults(tmp_path, sessions=20, duration_s=15.0, kill_every_s=2.0, fail_closed=True)
    assert r["on_failure_block"], r  # what settings install wrote under guards.fail_closed
    assert r["kills"] >= 5 and r["restarts"] == r["kills"] and r["up_at_end"], r
    assert r["calls"] > 20 * 15, r  # every session kept calling through the kills
    assert r["answered_without_record"] == 0, r
    assert r["records_lost"] == 0, r
    assert r["unguarded"] == 0, r
    # The listening socket never closed: a call could be cut off mid-answer, never refused.
    assert r["refused"] == 0, r
