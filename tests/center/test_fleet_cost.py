"""The fleet's cost on real servers: hosts send their priced messages to the command center's ledger.

* Two hosts with scripted token usage: the center's `cost --fleet --json` equals ccusage run over each
  host's own transcripts (within 1 %), per host, and its 5-hour windows are ccusage's blocks; a batch
  sent again adds nothing.
* A fleet-wide task budget: spend on host A exhausts it, host B's next call for the task is denied;
  with the command center gone, B applies the budget it last knew and says so.
* A forecast against a scripted burn whose crossing time is known, and the alert it records.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from support.center import Center, two_hosts
from support.cost import assistant, expected_usd, spend, transcript
from support.scripts import agent_hook, run_hook
from support.waiting import wait_for

genai_prices = pytest.importorskip("genai_prices")
FAST = {"AGENT_HOOKS__FORWARD__POLL_INTERVAL_S": "0.02", "AGENT_HOOKS__FORWARD__BACKOFF_INITIAL_S": "0.1",
        "AGENT_HOOKS__FORWARD__BACKOFF_MAX_S": "0.3"}


def stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def host_env(server: Center, **extra: str) -> dict[str, str]:
    """The environment a host's hooks and CLI run in (its store, its user home, its settings)."""
    keep = {k: v for k, v in server.env.items() if k.startswith("AGENT_HOOKS") or k == "HOME"}
    return {**keep, **extra}


def pre_tool(env: dict[str, str], sid: str) -> dict[str, Any]:
    proc = run_hook({"session_id": sid, "hook_event_name": "PreToolUse", "cwd": "/work",
                     "transcript_path": str(transcript(env, sid)), "tool_name": "Bash",
                     "tool_use_id": f"t-{time.monotonic_ns()}", "tool_input": {"command": "echo hi"}}, env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return out.get("hookSpecificOutput") or {}


def fleet_json(env: dict[str, str], *args: str) -> dict[str, Any]:
    return json.loads(agent_hook("cost", "--fleet", "--json", *args, env=env).stdout)  # type: ignore[no-any-return]


def ccusage(env: dict[str, str], *args: str) -> dict[str, Any]:
    exe = os.environ.get("CCUSAGE_BIN") or shutil.which("ccusage")
    if not exe:
        pytest.skip("ccusage is not installed (npm install ccusage@17.2.1; CCUSAGE_BIN=<its bin/ccusage>)")
    run_env = {**os.environ, "CLAUDE_CONFIG_DIR": str(Path(env["HOME"]) / ".claude"), "HOME": env["HOME"]}
    proc = subprocess.run([exe, *args, "--json", "--offline", "--mode", "calculate"], env=run_env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def rows(server: Center, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(server.home / "store.db")
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def usage(i: int, model: str, at: float, scale: int = 1) -> dict[str, Any]:
    return assistant(f"msg_{model}_{i}", f"req_{i}", model=model, at=stamp(at), input_tokens=900 * scale + i,
                     output_tokens=400 * scale + 3 * i, cache_creation_input_tokens=3000 * scale,
                     cache_read_input_tokens=20000 * scale)


def test_the_centers_fleet_totals_equal_ccusage_on_each_host(tmp_path: Path) -> None:
    now = time.time()
    with two_hosts(tmp_path, forward=FAST) as (a, b, _b_hooks):
        a_env, b_env = host_env(a), host_env(b)
        # Host A (the command center itself): two sessions, one line streamed twice (counted once).
        first = usage(1, "claude-sonnet-4-5", now - 7 * 3600)
        spend(a_env, "a-one", [first, dict(first), usage(2, "claude-sonnet-4-5", now - 6.5 * 3600)])
        spend(a_env, "a-two", [usage(3, "claude-haiku-4-5", now - 40 * 60, 3), usage(4, "claude-haiku-4-5", now - 9 * 60)])
        # Host B: sessions on two models; a resumed session's transcript repeats a line of its parent.
        copied = usage(5, "claude-opus-4-5", now - 2 * 3600, 2)
        spend(b_env, "b-one", [copied, usage(6, "claude-opus-4-5", now - 90 * 60)])
        spend(b_env, "b-two", [dict(copied), usage(7, "claude-sonnet-4-5", now - 20 * 60, 5)])
        theirs = {"host-a": ccusage(a_env, "daily"), "host-b": ccusage(b_env, "daily")}
        center_env = host_env(a)

        def arrived() -> dict[str, Any] | None:
            got = fleet_json(center_env)
            b_total = float(theirs["host-b"]["totals"]["totalCost"])
            ok = "host-b" in got["hosts"] and got["hosts"]["host-b"]["total_usd"] == pytest.approx(b_total, rel=0.01)
            return got if ok else None

        got = wait_for(arrived, timeout=20, what="host-b's messages in the center's ledger",
                       show=lambda: fleet_json(center_env)["hosts"])
        for host, doc in theirs.items():
            want = float(doc["totals"]["totalCost"])
            assert want > 0
            assert got["hosts"][host]["total_usd"] == pytest.approx(want, rel=0.01), (host, got["hosts"][host], want)
        assert got["total_usd"] == pytest.approx(sum(float(d["totals"]["totalCost"]) for d in theirs.values()), rel=0.01)
        assert set(got["hosts"]) == {"host-a", "host-b"}
        assert got["hosts"]["host-a"]["sessions"] == 2 and got["hosts"]["host-b"]["sessions"] == 2

        # The 5-hour windows are ccusage's blocks, for each host (start, spend) and for the fleet.
        windows = json.loads(agent_hook("cost", "windows", "--fleet", "--json", env=center_env).stdout)
        for host, env in (("host-a", a_env), ("host-b", b_env)):
            blocks = [bl for bl in ccusage(env, "blocks")["blocks"] if not bl.get("isGap")]
            ours = windows["hosts"][host]["blocks"]
            assert [windows_id(bl) for bl in ours] == [bl["id"] for bl in blocks], (host, ours, blocks)
            for mine, theirs_block in zip(ours, blocks, strict=True):
                assert mine["usd"] == pytest.approx(theirs_block["costUSD"], rel=0.01)
                assert mine["active"] == theirs_block["isActive"]
            weeks = {w["week"]: float(w["totalCost"]) for w in ccusage(env, "weekly")["weekly"]}
            mine_weeks = windows["hosts"][host]["weeks"]
            assert set(mine_weeks) == set(weeks) and all(mine_weeks[w]["usd"] == pytest.approx(v, rel=0.01)
                                                         for w, v in weeks.items()), (mine_weeks, weeks)
        assert sum(bl["usd"] for bl in windows["fleet"]["blocks"]) == pytest.approx(got["total_usd"], rel=1e-9)

        # By task, agent, day: the same total split differently; a batch sent again adds nothing.
        by_day = fleet_json(center_env, "--by", "day")
        assert sum(g["total_usd"] for g in by_day["groups"].values()) == pytest.approx(got["total_usd"])
        (batch,) = rows(b, "SELECT m.key, m.session_id, m.agent_id, m.model, m.at, m.input_tokens, m.output_tokens,"
                           " m.cache_creation_input_tokens, m.cache_1h_input_tokens, m.cache_read_input_tokens, m.usd"
                           " FROM cost_messages m ORDER BY rowid LIMIT 1")
        for _ in range(2):
            r = a.http.post("/api/fleet/cost", json={"rows": [list(batch)], "sessions": {}},
                            headers={"X-Agent-Hooks-Host": "host-b"})
            assert r.status_code == 200 and r.json()["stored"] == 0, r.text
        assert fleet_json(center_env)["total_usd"] == pytest.approx(got["total_usd"], rel=1e-12)
        # Host B sends everything again (its cursor lost): the center's totals do not move.
        rows_before = rows(a, "SELECT count(*) FROM fleet_cost_messages")[0][0]
        conn = sqlite3.connect(b.home / "store.db")
        conn.execute("DELETE FROM meta WHERE key LIKE 'fleet.cost_sent:%'")
        conn.commit()
        conn.close()
        spend(b_env, "b-two", [])  # a hook's commit wakes B's reporter
        wait_for(lambda: rows(b, "SELECT 1 FROM meta WHERE key LIKE 'fleet.cost_sent:%'"), timeout=10,
                 what="B's reporter to send its messages again")
        assert rows(a, "SELECT count(*) FROM fleet_cost_messages")[0][0] == rows_before
        assert fleet_json(center_env)["total_usd"] == pytest.approx(got["total_usd"], rel=1e-12)


def windows_id(block: dict[str, Any]) -> str:
    return stamp(block["start"])


def test_a_bad_cost_report_is_refused_naming_the_field(tmp_path: Path) -> None:
    a = Center(tmp_path / "center", env={"AGENT_HOOKS__FLEET__HOST": "center"}).start()
    try:
        good = ["k1", "s1", None, "claude-sonnet-4-5", time.time(), 1, 2, 3, 0, 4, 0.01]
        for bad, field in ((["k1", "s1", None, "m", float("nan"), 1, 2, 3, 0, 4, 0.01], "rows[0].at"),
                           (["k1", "s1", None, "m", 1.0, -1, 2, 3, 0, 4, 0.01], "rows[0].input_tokens"),
                           (["k1", "", None, "m", 1.0, 1, 2, 3, 0, 4, 0.01], "rows[0].session_id"),
                           ([*good[:10], 1e12], "rows[0].usd")):
            r = a.http.post("/api/fleet/cost", content=json.dumps({"rows": [bad]}).encode(),
                            headers={"X-Agent-Hooks-Host": "h2", "Content-Type": "application/json"})
            assert r.status_code == 400 and field in r.json()["error"], r.text
        r = a.http.post("/api/fleet/cost", json={"rows": [good]}, headers={"X-Agent-Hooks-Host": "center"})
        assert r.status_code == 409, r.text  # the center's own cost is in its own store
        assert rows(a, "SELECT count(*) FROM fleet_cost_messages")[0][0] == 0
    finally:
        a.stop()


@contextmanager
def center_and_hosts(tmp_path: Path, names: list[str], center_env: dict[str, str]) -> Iterator[tuple[Center, list[Center]]]:
    """A command center and hosts that forward to it, subscribe to its controls and report to it."""
    c = Center(tmp_path / "center", env={"AGENT_HOOKS__FLEET__HOST": "center", **center_env}).start()
    hosts: list[Center] = []
    try:
        for name in names:
            h = Center(tmp_path / name, env={
                "AGENT_HOOKS__FLEET__HOST": name, "AGENT_HOOKS__FORWARD__ENABLED": "true",
                "AGENT_HOOKS_INGEST_URL": f"{c.base}/api/hooks/ingest", "AGENT_HOOKS__FORWARD__IDLE_EXIT_S": "5",
                "AGENT_HOOKS__FLEET__SUBSCRIBE_BACKOFF_MAX_S": "0.5", "AGENT_HOOKS__BUDGETS__OFFLINE_AFTER_S": "5",
                **FAST})
            hosts.append(h)
            h.start()
        yield c, hosts
    finally:
        for h in hosts:
            h.stop()
        c.stop()


def test_a_task_budget_spent_on_one_host_denies_on_another(tmp_path: Path) -> None:
    now = time.time()
    with center_and_hosts(tmp_path, ["host-a", "host-b"], {}) as (c, (a, b)):
        c_env = host_env(c)
        agent_hook("task", "create", "T-1", "--budget-usd", "0.05", env=c_env)
        a_env = host_env(a, AGENT_HOOKS_TASK_ID="T-1")
        b_env = host_env(b, AGENT_HOOKS_TASK_ID="T-1")
        wait_for(lambda: rows(b, "SELECT limit_usd FROM fleet_budgets WHERE kind = 'task' AND key = 'T-1'"),
                 timeout=10, what="the task's budget to reach host B")
        assert pre_tool(b_env, "b-1").get("permissionDecision") != "deny"
        # Host B spends a little; host A spends past the budget (neither alone is past it on the other).
        lines_b = [usage(1, "claude-sonnet-4-5", now - 60)]
        lines_a = [usage(2, "claude-opus-4-5", now - 30, 2)]
        spend(b_env, "b-1", lines_b)
        assert 0 < expected_usd(lines_b) < 0.05 <= expected_usd(lines_a) + expected_usd(lines_b)
        spent_at = time.monotonic()
        spend(a_env, "a-1", lines_a)
        wait_for(lambda: rows(b, "SELECT 1 FROM fleet_budgets WHERE key = 'T-1' AND elsewhere_usd > 0"), timeout=10,
                 what="A's spend to reach host B", show=lambda: rows(b, "SELECT * FROM fleet_budgets"))
        travelled = time.monotonic() - spent_at
        out = pre_tool(b_env, "b-1")
        assert out.get("permissionDecision") == "deny", out
        reason = out["permissionDecisionReason"]
        assert "task T-1's fleet-wide budget of $0.05 is spent" in reason, reason
        assert "cannot reach" not in reason
        assert travelled < 5.0, travelled
        # A session of B that had spent nothing on the task is denied all the same; another task is not.
        assert pre_tool(b_env, "b-2").get("permissionDecision") == "deny"
        assert pre_tool(host_env(b, AGENT_HOOKS_TASK_ID="T-2"), "b-3").get("permissionDecision") != "deny"
        # The center counts it the same way, for its own hooks, and records that the budget was reached.
        assert pre_tool(host_env(c, AGENT_HOOKS_TASK_ID="T-1"), "c-1").get("permissionDecision") == "deny"
        alert = wait_for(lambda: rows(c, "SELECT kind, subject, limit_usd, spent_usd FROM fleet_cost_alerts"
                                         " WHERE kind = 'budget'"), timeout=10, what="the budget's alert")
        assert alert[0][:3] == ("budget", "task:T-1", 0.05) and alert[0][3] >= 0.05
        by_task = fleet_json(c_env, "--by", "task")["groups"]
        assert by_task["T-1"]["total_usd"] == pytest.approx(expected_usd(lines_a) + expected_usd(lines_b), rel=0.01)

        # The command center goes away: B still denies from the budget it last knew, and says so.
        c.stop()
        wait_for(lambda: "failed_at\": null" not in str(rows(b, "SELECT value FROM meta WHERE key = 'fleet.budgets.sync'")),
                 timeout=15, what="B to notice its command center is gone")
        out = pre_tool(b_env, "b-1")
        assert out.get("permissionDecision") == "deny", out
        assert "cannot reach its command center" in out["permissionDecisionReason"]
        assert "task T-1's fleet-wide budget" in out["permissionDecisionReason"]


def test_host_and_agent_budgets_set_at_the_center_hold_on_their_hosts(tmp_path: Path) -> None:
    now = time.time()
    center_env = {"AGENT_HOOKS__BUDGETS__AGENTS": json.dumps({"alice": {"daily_usd": 0.05}}),
                  "AGENT_HOOKS__BUDGETS__HOSTS": json.dumps({"host-b": {"daily_usd": 0.02}})}
    with center_and_hosts(tmp_path, ["host-a", "host-b"], center_env) as (_c, (a, b)):
        wait_for(lambda: rows(b, "SELECT 1 FROM fleet_budgets WHERE kind = 'host'"), timeout=10,
                 what="host B's budget to reach it")
        assert not rows(a, "SELECT 1 FROM fleet_budgets WHERE kind = 'host'")  # B's budget is B's alone
        # Alice spends on A (past her fleet-wide daily budget); her session on B is denied.
        spend(host_env(a, AGENT_HOOKS_AGENT="alice"), "a-1", [usage(1, "claude-opus-4-5", now - 30, 2)])
        wait_for(lambda: rows(b, "SELECT 1 FROM fleet_budgets WHERE kind = 'agent' AND elsewhere_usd > 0"),
                 timeout=10, what="alice's spend on A to reach B")
        out = pre_tool(host_env(b, AGENT_HOOKS_AGENT="alice"), "b-alice")
        assert out.get("permissionDecision") == "deny" and "agent alice's fleet-wide daily budget" in \
            out["permissionDecisionReason"], out
        assert pre_tool(host_env(b, AGENT_HOOKS_AGENT="bob"), "b-bob").get("permissionDecision") != "deny"
        # Bob spends past host B's own budget (set at the center): every session of B is denied, not A's.
        spend(host_env(b, AGENT_HOOKS_AGENT="bob"), "b-bob", [usage(2, "claude-sonnet-4-5", now - 20, 2)])
        out = pre_tool(host_env(b, AGENT_HOOKS_AGENT="carol"), "b-carol")
        assert out.get("permissionDecision") == "deny" and "host host-b's daily budget" in \
            out["permissionDecisionReason"], out
        assert pre_tool(host_env(a, AGENT_HOOKS_AGENT="carol"), "a-carol").get("permissionDecision") != "deny"


def test_the_forecast_says_when_a_scripted_burn_reaches_the_window_limit(tmp_path: Path) -> None:
    now = time.time()
    # A steady burn in the last hour, all of it in the current window: spent S, burning S per hour.
    lines = [usage(i, "claude-sonnet-4-5", now - 50 * 60 + i * 9 * 60) for i in range(5)]
    spent = expected_usd(lines)
    limit = round(spent * 2.5, 6)  # reached 1.5 hours from now, inside the window (it ends 4 h+ from now)
    env_cfg = {"AGENT_HOOKS__BUDGETS__WINDOW_USD": str(limit), "AGENT_HOOKS__BUDGETS__WEEK_USD": str(limit * 100)}
    c = Center(tmp_path / "center", env={"AGENT_HOOKS__FLEET__HOST": "center", **env_cfg}).start()
    try:
        env = host_env(c)
        spend(env, "c-1", lines)
        got = fleet_json(env)
        f = got["forecast"]["window"]
        assert f["spent_usd"] == pytest.approx(spent, rel=1e-6) and f["burn_usd_h"] == pytest.approx(spent, rel=1e-6)
        want = now + 1.5 * 3600
        assert abs(f["reach_at"] - want) < (time.time() - now) + 2, (f, want)
        assert f["within"] and not f["reached"] and f["reach_at"] < got["window"]["end"]
        # The week's limit is far: at this burn it is reached after the week ends, or not within it.
        week = got["forecast"]["week"]
        assert week["reach_at"] > f["reach_at"] + 90 * 3600 and not week["reached"]
        alert = wait_for(lambda: rows(c, "SELECT kind, subject, due_at FROM fleet_cost_alerts WHERE kind = 'forecast'"),
                         timeout=10, what="the forecast's alert")
        assert alert[0][:2] == ("forecast", "window") and abs(alert[0][2] - want) < 10
        board = c.http.get("/api/board").json()["cost"]
        assert board["today_usd"] >= 0 and board["forecast"]["window"]["within"]
        assert board["hosts"]["center"]["total_usd"] == pytest.approx(spent, rel=1e-6)
    finally:
        c.stop()


def test_the_boards_header_shows_the_fleets_spend_window_forecast_and_each_host(tmp_path: Path) -> None:
    """Another host's messages reach the ledger: the header's today, window and forecast are the fleet's,
    with a column per host, in the one format (dollars, or cents under a dollar)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from support.browser import chromium_page

    now = time.time()
    c = Center(tmp_path / "center", env={"AGENT_HOOKS__FLEET__HOST": "here", "AGENT_HOOKS__BUDGETS__WINDOW_USD": "3"}).start()
    try:
        with chromium_page(sync_api, 1400, 800) as page:
            page.goto(c.base + "/")
            page.wait_for_selector("#conn[data-state=live]", timeout=15000)
            spend(host_env(c), "here-1", [usage(1, "claude-haiku-4-5", now - 120)])
            mine = expected_usd([usage(1, "claude-haiku-4-5", now - 120)])
            row = ["k-1", "far-1", None, "claude-opus-4-5", now - 60, 1000, 500, 0, 0, 0, 1.25]
            r = c.http.post("/api/fleet/cost", json={"rows": [row], "sessions": {"far-1": {"agent": "bob"}}},
                            headers={"X-Agent-Hooks-Host": "web-1"})
            assert r.status_code == 200 and r.json()["stored"] == 1, r.text
            total = 1.25 + mine
            want = f"${total:.2f}"
            page.wait_for_function(f"document.getElementById('spend-today').textContent === '{want}'", timeout=10000)
            hosts = page.inner_text("#spend-hosts")
            assert "web-1" in hosts and "$1.25" in hosts and "here" in hosts and f"{mine * 100:.1f}¢" in hosts, hosts
            assert page.inner_text("#spend-window").startswith(f"window {want}")
            # $1.25+ in the last hour against a $3 window: the limit is reached within the window, at a time.
            assert page.inner_text("#spend-forecast").startswith("limit $3.00 at ")
    finally:
        c.stop()
