"""Budgets as guards, through the installed executables: PreToolUse denies once a budget is spent
(cancellation first), the agent is told once at notice_pct, a persisting task lets its worker go."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from support.cost import assistant, expected_usd, payload, post_tool, tpath, write
from support.scripts import agent_hook, run_hook, store_rows

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")

pytest.importorskip("genai_prices")  # expected_usd asks it what a spend costs

# Spent now: a daily budget counts the spend of the day each message was written (a fixed date
# would be another day once the calendar moves on).
NOW = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
# About $0.0285 at claude-sonnet-4-5's data-set prices (computed by expected_usd, never assumed).
LINES = [assistant("m1", "r1", input_tokens=1000, output_tokens=1000, cache_read_input_tokens=20000, at=NOW)]


def pre_tool(sid: str, home: Path, command: str = "ls", env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = run_hook(payload("PreToolUse", sid, home, tool_name="Bash", tool_input={"command": command},
                            tool_use_id=f"t-{command}"), env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode().strip()
    return json.loads(out).get("hookSpecificOutput", {}) if out else {}


def spend(sid: str, home: Path, env: dict[str, str]) -> float:
    write(tpath(sid), LINES)
    post_tool(sid, home, env)
    return expected_usd(LINES)


def test_a_spent_task_budget_denies_the_next_tool_call(hooks_home: Path):
    env = {"AGENT_HOOKS_TASK_ID": "T-1"}
    cost = expected_usd(LINES)
    agent_hook("task", "create", "T-1", "--budget-usd", f"{cost * 0.5:.6f}")
    assert pre_tool("S1", hooks_home, env=env).get("permissionDecision") != "deny"
    spend("S1", hooks_home, env)
    out = pre_tool("S1", hooks_home, "make test", env)
    assert out["permissionDecision"] == "deny"
    reason = out["permissionDecisionReason"]
    assert "task T-1's budget" in reason and f"${cost * 0.5:.2f}" in reason and f"${cost:.2f} used" in reason
    assert "agent-hook task budget T-1 <USD>" in reason
    row = store_rows(hooks_home, "SELECT decision, rule FROM tool_calls WHERE tool_use_id = 't-make test'")[0]
    assert (row["decision"], row["rule"]) == ("deny", "budget.task")
    # Ending the task still gets through; raising the budget lets work go on.
    assert pre_tool("S1", hooks_home, "agent-hook task done T-1 --note 'out of money'", env).get(
        "permissionDecision") != "deny"
    agent_hook("task", "budget", "T-1", f"{cost * 100:.4f}")
    assert pre_tool("S1", hooks_home, "make test2", env).get("permissionDecision") != "deny"
    shown = json.loads(agent_hook("task", "show", "T-1", "--json").stdout)
    assert shown["cost_usd"] == pytest.approx(cost, rel=1e-9) and shown["budget_usd"] == pytest.approx(cost * 100)
    listed = json.loads(agent_hook("task", "list", "--json").stdout)["tasks"][0]
    assert listed["cost_usd"] == pytest.approx(cost, rel=1e-9)
    assert f"of ${cost * 100:.2f}" in agent_hook("task", "list").stdout


def test_the_agent_is_told_once_at_the_notice_share(hooks_home: Path):
    env = {"AGENT_HOOKS_TASK_ID": "T-2"}
    cost = expected_usd(LINES)
    budget = cost / 0.9  # 90 % spent: past the 80 % notice, short of the deny
    agent_hook("task", "create", "T-2", "--budget-usd", f"{budget:.8f}")
    spend("S2", hooks_home, env)
    first = pre_tool("S2", hooks_home, "ls", env)
    assert first.get("permissionDecision") != "deny"
    assert "90% spent" in first["additionalContext"] and f"${budget - cost:.2f} left" in first["additionalContext"]
    assert "additionalContext" not in pre_tool("S2", hooks_home, "pwd", env)


def test_config_budgets_session_and_host_daily(hooks_home: Path):
    cost = expected_usd(LINES)
    env = {"AGENT_HOOKS__BUDGETS__SESSION_USD": f"{cost / 2:.6f}"}
    spend("S3", hooks_home, env)
    out = pre_tool("S3", hooks_home, "ls", env)
    assert out["permissionDecision"] == "deny" and "budgets.session_usd" in out["permissionDecisionReason"]
    # Another session of the same host: its own session budget is untouched, the host's daily one is spent.
    env2 = {"AGENT_HOOKS__BUDGETS__DAILY_USD": f"{cost / 2:.6f}"}
    assert pre_tool("S4", hooks_home, "ls", env2)["permissionDecision"] == "deny"
    assert pre_tool("S4", hooks_home, "pwd").get("permissionDecision") != "deny"
    agents = json.dumps({"alice": {"daily_usd": cost / 2}})
    alice = {"AGENT_HOOKS_AGENT": "alice", "AGENT_HOOKS__BUDGETS__AGENTS": agents}
    spend("S5", hooks_home, alice)
    write(tpath("S5"), [assistant("m9", "r9", input_tokens=1000, output_tokens=1000, at=NOW)], mode="a")
    post_tool("S5", hooks_home, alice)
    assert "alice's daily budget" in pre_tool("S5", hooks_home, "ls", alice)["permissionDecisionReason"]
    bob = {"AGENT_HOOKS_AGENT": "bob", "AGENT_HOOKS__BUDGETS__AGENTS": agents}
    assert pre_tool("S6", hooks_home, "ls", bob).get("permissionDecision") != "deny"


def test_cancellation_comes_before_the_budget(hooks_home: Path):
    env = {"AGENT_HOOKS_TASK_ID": "T-3"}
    agent_hook("task", "create", "T-3", "--budget-usd", "0.000001")
    spend("S7", hooks_home, env)
    agent_hook("cancel", "S7", "--reason", "wrong branch")
    out = pre_tool("S7", hooks_home, "ls", env)
    assert out["permissionDecision"] == "deny" and "wrong branch" in out["permissionDecisionReason"]
    assert "budget" not in out["permissionDecisionReason"]


def test_a_persisting_task_lets_its_worker_go_once_its_budget_is_spent(hooks_home: Path):
    env = {"AGENT_HOOKS_TASK_ID": "T-4", "AGENT_HOOKS_ROLE": "worker"}
    agent_hook("task", "create", "T-4", "--persist", "--budget-usd", "1000")
    write(tpath("S8"), LINES)
    run_hook(payload("UserPromptSubmit", "S8", hooks_home, prompt="go"), env)
    proc = run_hook(payload("Stop", "S8", hooks_home, stop_hook_active=False, last_assistant_message="ok"), env)
    assert json.loads(proc.stdout)["decision"] == "block"  # held: money left
    agent_hook("task", "budget", "T-4", "0.000001")
    proc = run_hook(payload("Stop", "S8", hooks_home, stop_hook_active=True, last_assistant_message="ok"), env)
    assert proc.returncode == 0 and proc.stdout.strip() == b""
    last = json.loads(agent_hook("task", "show", "T-4", "--json").stdout)["last_bypass"]
    assert last.startswith("bypass spent: task T-4's budget of $0.00 is spent")


def test_malformed_money_settings_are_named_and_never_break_a_tool_call(hooks_home: Path):
    env = {"AGENT_HOOKS__BUDGETS__AGENTS": json.dumps({"alice": {"daily_usd": "lots"}}), "AGENT_HOOKS_AGENT": "alice",
           "AGENT_HOOKS__COST__PRICES": json.dumps({"claude-sonnet-4-5": {"input_mtok": "cheap", "outptu_mtok": 1}})}
    spend("S10", hooks_home, env)
    assert pre_tool("S10", hooks_home, "ls", env).get("permissionDecision") != "deny"
    # The model still priced (from the data set, the bad override keys ignored), nothing logged as an error.
    assert store_rows(hooks_home, "SELECT cost_usd FROM sessions WHERE session_id = 'S10'")[0]["cost_usd"] > 0
    assert store_rows(hooks_home, "SELECT count(*) AS n FROM errors")[0]["n"] == 0
    shown = agent_hook("config", env=env, check=False).stderr
    assert "budgets.agents.alice.daily_usd must be a number >= 0" in shown
    assert "cost.prices.claude-sonnet-4-5.input_mtok must be a number >= 0" in shown
    assert "unknown setting cost.prices.claude-sonnet-4-5.outptu_mtok (did you mean output_mtok?)" in shown
