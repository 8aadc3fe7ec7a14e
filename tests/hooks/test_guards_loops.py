"""The pure loop decisions at their boundaries, and the history query."""

from __future__ import annotations

import copy

import pytest

from agent_hooks.config import DEFAULTS
from agent_hooks.features import loops
from agent_hooks.features.loops import decide, pingpong, reset_point
from agent_hooks.store import Store

from support.scripts import BIN

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")

A = ("Bash", "a" * 64)
B = ("Read", "b" * 64)


def other(n: int) -> tuple[str, str]:
    return ("Grep", f"{n:064d}")


def replay(calls, config=DEFAULTS):
    """The history the hook would have recorded for ``calls``: (tool, hash, decision), denied ones left out."""
    history: list = []
    for call in calls:
        v = decide(call[0], call[1], history, config)
        if v is None or v.decision != "deny":
            history.append((call[0], call[1], v.decision if v else "allow"))
    return history


def verdict(calls, cur=A, config=DEFAULTS):
    """The verdict on ``cur`` after ``calls`` went through the guard, as the hook would record them."""
    v = decide(cur[0], cur[1], replay(calls, config), config)
    return None if v is None else (v.decision, v.rule)


@pytest.mark.parametrize(
    ("identical", "expected"),
    [(1, None), (7, None), (8, ("warn", "loops.repeat")), (14, ("warn", "loops.repeat")),
     (15, ("deny", "loops.repeat")), (16, ("deny", "loops.repeat"))],
)
def test_repeat_boundaries(identical, expected):
    # `identical` counts this call: the history holds identical - 1 of them.
    assert verdict([A] * (identical - 1)) == expected


def test_repeat_counts_spread_out_calls_within_the_window():
    history = []
    for n in range(14):
        history += [A, other(n)]  # 14 identical calls interleaved with distinct ones
    assert len(history) == 28
    assert verdict(history) == ("deny", "loops.repeat")  # 15th identical in the window
    assert verdict(history[2:]) == ("warn", "loops.repeat")  # one fewer: 14th


def test_window_limits_the_history():
    # 14 identical calls, then 26 distinct: window 40 sees this call + 39 before it -> 13 + 1.
    history = [A] * 14 + [other(n) for n in range(26)]
    assert verdict(history) == ("warn", "loops.repeat")
    cfg = copy.deepcopy(DEFAULTS)
    cfg["loops"]["window"] = 27  # sees 26 distinct + this call: the 14 are out of the window
    assert verdict(history, config=cfg) is None


def test_other_tool_with_same_input_hash_is_not_identical():
    assert verdict([("Read", A[1])] * 20) is None


def test_new_edit_resets_the_count_but_a_flip_flop_edit_does_not():
    test_run = ("Bash", "t" * 64)
    history = []
    for n in range(20):  # edit, re-run the tests, 20 times: a fix cycle, not a loop
        history += [("Edit", f"{n:064d}"), test_run]
    assert verdict(history, cur=test_run) is None
    flip, flop = ("Edit", "1" * 64), ("Edit", "2" * 64)
    stuck = [flip, test_run, flop, test_run] * 5
    assert verdict(stuck, cur=test_run) == ("warn", "loops.repeat")  # 11 test runs, edits not new


def test_reset_point():
    e1, e2 = ("Edit", "1" * 64), ("Edit", "2" * 64)
    assert reset_point([A, e1, A, A], ["Edit"]) == 2
    assert reset_point([A, e1, A, e1, A], ["Edit"]) == 0
    assert reset_point([A, e1, A, e2, A], ["Edit"]) == 4
    assert reset_point([A, e1, A, e2, A], []) == 0
    assert reset_point([A, e1], ["Edit"]) == 0  # the current call never resets itself


def alternating(n_calls: int, first=B, second=A) -> list:
    """n_calls alternating calls ending with ``second`` (the current call)."""
    seq = [second if (n_calls - 1 - i) % 2 == 0 else first for i in range(n_calls)]
    return seq


@pytest.mark.parametrize(
    ("switches", "expected"),
    [(5, None), (6, ("warn", "loops.pingpong")), (11, ("warn", "loops.pingpong")),
     (12, ("deny", "loops.pingpong"))],
)
def test_pingpong_boundaries(switches, expected):
    seq = alternating(switches + 1)
    assert pingpong(seq, 0.8)[0] == switches
    assert verdict(seq[:-1]) == expected
    assert len(replay(seq[:-1])) == switches  # nothing denied before
    if expected and expected[0] == "deny":  # a denied call is not history: trying it again is denied again
        assert decide(A[0], A[1], replay(seq[:-1]), DEFAULTS).decision == "deny"


def test_pingpong_dominance_share():
    x = [other(n) for n in range(10)]
    # Pair calls with one stranger every 5 calls: 80 % -> still a ping-pong.
    seq = []
    for n in range(4):
        seq += [A, B, A, B, x[n]]
    seq += [A, B, A, B, A]
    switches, partner = pingpong(seq, 0.8)
    assert partner == B and switches == 20  # 21 pair calls alternate; strangers do not break it
    assert verdict(seq[:-1]) == ("deny", "loops.pingpong")
    # A stranger every 3rd call: the pair is 67 % -> only the clean tail counts.
    seq = []
    for n in range(8):
        seq += [A, B, x[n]]
    seq += [A, B, A]
    assert pingpong(seq, 0.8)[0] < 6
    assert verdict(seq[:-1]) == ("warn", "loops.repeat")  # 9 identical calls: the repeat rule, not ping-pong


def test_pingpong_seen_at_once_after_varied_work():
    # agent-swarm measured the pair's share of the whole window: after 26 varied calls
    # a ping-pong went unseen until it filled 80 % of the window, then blocked with no warning.
    history = [other(n) for n in range(26)] + alternating(6)
    assert verdict(history[:-1], cur=history[-1]) is None  # 5 switches
    assert verdict(history, cur=B) == ("warn", "loops.pingpong")  # 6 switches


@pytest.mark.parametrize("kind", ["repeat", "pingpong"])
@pytest.mark.parametrize(("warn_at", "block_at"), [(8, 15), (6, 12), (2, 3), (1, 2), (10, 11)])
def test_warning_always_precedes_a_block(kind, warn_at, block_at):
    cfg = copy.deepcopy(DEFAULTS)
    cfg["loops"].update({f"{kind}_warn": warn_at, f"{kind}_block": block_at})
    history: list = []
    seen = []
    for n in range(60):
        cur = A if kind == "repeat" or n % 2 else B
        v = decide(cur[0], cur[1], history, cfg)
        seen.append(v.decision if v else "allow")
        if not v or v.decision != "deny":
            history.append((cur[0], cur[1], v.decision if v else "allow"))  # a denied call is not history
    assert "deny" in seen
    assert seen.index("warn") < seen.index("deny")


def test_per_tool_override_exact_and_pattern():
    cfg = copy.deepcopy(DEFAULTS)
    cfg["loops"]["tools"] = {"Bash": {"repeat_warn": 3, "repeat_block": 4}, "mcp__github__*": {"enabled": False}}
    assert verdict([A] * 2, config=cfg) == ("warn", "loops.repeat")
    assert verdict([A] * 3, config=cfg) == ("deny", "loops.repeat")
    mcp = ("mcp__github__get_issue", "c" * 64)
    assert verdict([mcp] * 30, cur=mcp, config=cfg) is None
    assert loops.settings_for("Read", cfg)["repeat_warn"] == 8


def test_background_output_readers_are_left_to_polling_and_disable_switch():
    bo = ("BashOutput", "d" * 64)
    assert verdict([bo] * 30, cur=bo) is None
    cfg = copy.deepcopy(DEFAULTS)
    cfg["loops"]["enabled"] = False
    assert verdict([A] * 30, config=cfg) is None


def test_no_deny_without_an_earlier_warning_for_that_call():
    # A bare history (no warnings recorded): the 15th identical call is warned, not denied.
    v = decide(A[0], A[1], [A] * 14, DEFAULTS)
    assert (v.decision, v.rule) == ("warn", "loops.repeat") and "next identical call will be blocked" in v.message
    # A new edit lets the count restart, then the same edit again removes the reset:
    # 7 + 7 earlier calls + this one = 15, but this call was never warned -> warned first.
    e1 = ("Edit", "1" * 64)
    calls = [A] * 7 + [e1] + [A] * 7 + [e1]
    assert verdict(calls) == ("warn", "loops.repeat")
    assert verdict(calls + [A]) == ("deny", "loops.repeat")
    # Same for ping-pong thresholds set equal.
    cfg = copy.deepcopy(DEFAULTS)
    cfg["loops"].update(pingpong_warn=4, pingpong_block=4)
    assert verdict(alternating(4), cur=B, config=cfg) == ("warn", "loops.pingpong")
    assert verdict(alternating(5, first=A, second=B), cur=A, config=cfg) == ("deny", "loops.pingpong")


def test_read_history_excludes_denied_and_respects_the_reset_mark(tmp_path):
    store = Store(str(tmp_path / "store.db"))
    conn = store.conn
    rows = [("s1", "Bash", "h1", "success"), ("s1", "Bash", "h2", "denied"), ("s2", "Bash", "x", "success"),
            ("s1", "Read", "h3", "pending"), ("s1", "Bash", "h4", "failure")]
    for sid, tool, h, outcome in rows:
        conn.execute("INSERT INTO tool_calls (session_id, tool_name, input_hash, outcome, started_at)"
                     " VALUES (?, ?, ?, ?, 0)", (sid, tool, h, outcome))
    def keys(rows):
        return [(r[0], r[1]) for r in rows]

    assert keys(loops.read_history(conn, "s1", 0, 40)) == [("Bash", "h1"), ("Read", "h3"), ("Bash", "h4")]
    assert keys(loops.read_history(conn, "s1", 0, 3)) == [("Read", "h3"), ("Bash", "h4")]
    assert keys(loops.read_history(conn, "s1", 1, 40)) == [("Read", "h3"), ("Bash", "h4")]
    assert loops.read_history(conn, "new-session", 0, 40) == []
    conn.execute("INSERT INTO tool_calls (session_id, tool_name, input_hash, outcome, started_at, agent_id)"
                 " VALUES ('s1', 'Bash', 'sub', 'success', 0, 'agent-7')")
    assert keys(loops.read_history(conn, "s1", 0, 40))[-1] == ("Bash", "h4")  # the main agent's history
    assert keys(loops.read_history(conn, "s1", 0, 40, "agent-7")) == [("Bash", "sub")]
    store.close()


@pytest.mark.parametrize("command,allowed", [
    ("agent-hook task progress T1 'stopped: cancelled, half done'", True),
    ('agent-hook task progress T1 "report"', True),
    ("agent-hook task progress T2 'someone else'", False),
    ("agent-hook task progress\nT1 'x'", False),
    ("agent-hook\ntask progress T1 'x'", False),
    ("agent-hook task progress T1 'x'\rrm -rf /", False),
    ("./agent-hook task progress T1 'x'", False),
    ("/tmp/planted/agent-hook task progress T1 'x'", False),
    ("agent-hook task progress T1 'x'; rm -rf /", False),
    ('agent-hook task progress T1 "$(cat secrets)"', False),
])
def test_only_a_plain_progress_report_passes_a_cancelled_task(command: str, allowed: bool) -> None:
    from agent_hooks.features.cancellation import Snapshot, is_progress_report

    snap = Snapshot(task_id="T1", task_state="cancelled")
    assert is_progress_report(snap, "Bash", {"command": command}) is allowed
    installed = str(BIN / "agent-hook")
    assert is_progress_report(snap, "Bash", {"command": f"{installed} task progress T1 'done'"})
