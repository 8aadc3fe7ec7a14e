"""The board's burn rate and today's spend from a card's cost samples (agent_hooks.center.burn), and the
samples a command center keeps from forwarded totals (a real SQLite store, the real ingest path)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent_hooks.center import burn

NOW = 1_800_000_000.0


def test_burn_rate_counts_only_the_last_ten_minutes_per_hour() -> None:
    # $1 spent an hour ago, then $0.50 over the last 10 minutes: $3/h, not the session's average.
    series = [(NOW - 3600, 1.0), (NOW - 900, 1.0), (NOW - 300, 1.2), (NOW - 10, 1.5)]
    assert abs(burn.burn_rate(series, NOW, complete=True) - 3.0) < 1e-9
    # Nothing spent in the window: 0, however much before.
    assert burn.burn_rate([(NOW - 3600, 5.0)], NOW, complete=True) == 0.0
    assert burn.burn_rate([], NOW, complete=True) == 0.0


def test_a_complete_series_counts_from_zero_a_forwarded_one_from_its_first_total() -> None:
    # A local session's messages (complete): the first message's dollars were spent in the window.
    assert abs(burn.burn_rate([(NOW - 60, 0.25)], NOW, complete=True) - 1.5) < 1e-9
    # Another host's totals: the center first saw $4 already spent; only the rise after it counts.
    series = [(NOW - 120, 4.0), (NOW - 60, 4.1)]
    assert abs(burn.burn_rate(series, NOW, complete=False) - 0.6) < 1e-9
    assert abs(burn.spent_since(series, NOW - 86400, complete=False) - 0.1) < 1e-9


def test_total_at_takes_the_last_sample_at_or_before() -> None:
    series = [(10.0, 1.0), (20.0, 2.0), (30.0, 3.0)]
    assert burn.total_at(series, 20.0, True) == 2.0
    assert burn.total_at(series, 25.0, True) == 2.0
    assert burn.total_at(series, 5.0, True) == 0.0
    assert burn.total_at(series, 5.0, False) == 1.0


def test_chart_keeps_at_most_the_limit_and_the_last_point() -> None:
    series = [(float(i), i / 100) for i in range(1000)]
    points = burn.chart(series, 50)
    assert len(points) == 50 and points[-1] == [999.0, 9.99] and points[0] == [0.0, 0.0]
    assert burn.chart(series[:3]) == [[0.0, 0.0], [1.0, 0.01], [2.0, 0.02]]


def test_card_cost_marks_80_percent_of_a_task_budget(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("CREATE TABLE fleet_cost_samples (fleet_id TEXT, at REAL, usd REAL)")
    conn.executemany("INSERT INTO fleet_cost_samples VALUES ('c', ?, ?)", [(NOW - 1200, 0.0), (NOW - 60, 0.79)])
    below = burn.card_cost(conn, "c", False, 0.79, NOW, 1.0, None, 0.0)
    assert below["near"] is False and below["budget_of"] == "task" and below["spent_usd"] == 0.79
    conn.execute("INSERT INTO fleet_cost_samples VALUES ('c', ?, 0.8)", (NOW - 30,))
    at80 = burn.card_cost(conn, "c", False, 0.8, NOW, 1.0, 0.1, 0.0)
    assert at80["near"] is True and at80["budget_pct"] == 80.0 and at80["usd"] == 0.8
    assert abs(at80["burn_usd_h"] - 4.8) < 1e-6
    # No task budget: the session budget from [budgets] session_usd counts.
    session = burn.card_cost(conn, "c", False, 0.8, NOW, None, None, 2.0)
    assert session["budget_of"] == "session" and session["near"] is False and session["budget_pct"] == 40.0
    none = burn.card_cost(conn, "c", False, 0.8, NOW, None, None, 0.0)
    assert none["budget_usd"] is None and none["near"] is False


def test_a_local_cards_burn_rate_reads_its_priced_messages(hooks_home: Path) -> None:
    """A local session priced through the installed PostToolUse hook: its card's dollars are the session's,
    and the burn rate counts only the message of the last 10 minutes."""
    import json
    import os
    import time

    from support.scripts import run_hook, store_rows

    now = time.time()

    def stamp(at: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at))

    def line(mid: str, at: float, out: int) -> dict[str, object]:
        return {"type": "assistant", "requestId": f"r-{mid}", "timestamp": stamp(at), "uuid": f"u-{mid}",
                "message": {"id": mid, "model": "claude-sonnet-4-5", "role": "assistant", "content": [],
                            "usage": {"input_tokens": 100, "output_tokens": out,
                                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}

    sid = "burn-local"
    path = Path(os.environ["HOME"]) / ".claude" / "projects" / "-work" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(line("m1", now - 1800, 20000)) + "\n" + json.dumps(line("m2", now - 120, 5000)) + "\n")
    proc = run_hook({"session_id": sid, "hook_event_name": "PostToolUse", "cwd": str(hooks_home.parent),
                     "transcript_path": str(path), "tool_name": "Bash", "tool_input": {"command": "ls"},
                     "tool_use_id": "t1", "tool_response": {"stdout": ""}})
    assert proc.returncode == 0, proc.stderr
    rows = store_rows(hooks_home, "SELECT at, usd FROM cost_messages WHERE session_id = ? ORDER BY at", (sid,))
    assert len(rows) == 2 and all(r["usd"] > 0 for r in rows)
    total = store_rows(hooks_home, "SELECT cost_usd FROM sessions WHERE session_id = ?", (sid,))[0]["cost_usd"]
    conn = sqlite3.connect(hooks_home / "store.db")
    cost = burn.card_cost(conn, sid, True, total, now, None, None, 0.0)
    assert abs(cost["usd"] - total) < 1e-6
    assert abs(cost["burn_usd_h"] - rows[1]["usd"] * 6) < 1e-5
    assert burn.chart(burn.samples(conn, sid, True))[-1][1] == round(total, 6)


def test_samples_since_give_the_same_window_as_the_whole_series(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("CREATE TABLE cost_messages (session_id TEXT, at REAL, usd REAL)")
    conn.execute("CREATE TABLE fleet_cost_samples (fleet_id TEXT, at REAL, usd REAL)")
    conn.executemany("INSERT INTO cost_messages VALUES ('s', ?, ?)",
                     [(NOW - 5000, 2.0), (NOW - 700, 0.5), (NOW - 100, None), (NOW - 50, 0.25)])
    conn.executemany("INSERT INTO fleet_cost_samples VALUES ('f', ?, ?)",
                     [(NOW - 5000, 3.0), (NOW - 700, 3.5), (NOW - 50, 3.75)])
    for cid, local in (("s", True), ("f", False)):
        whole, cut = burn.samples(conn, cid, local), burn.samples(conn, cid, local, NOW - 600)
        assert len(cut) == 2 and cut[-1] == whole[-1]
        assert burn.burn_rate(cut, NOW, local) == burn.burn_rate(whole, NOW, local) == 0.25 * 6
    assert burn.samples(conn, "s", True)[-1] == (NOW - 50, 2.75)
