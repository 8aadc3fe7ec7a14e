"""Cost and budgets under the real client with a scripted model reporting usage (cache writes and
reads included). Expected dollars come from genai-prices over the client's own transcript."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from harness import BIN_DIR, E2E
from model_server import text, tool_use

genai_prices = pytest.importorskip("genai_prices")
AGENT_HOOK = BIN_DIR / "agent-hook"
ORACLE_MODEL = "claude-sonnet-4-5"  # ccusage's offline data prices it (a model it lacks, it calls $0)


def cli(e2e: E2E, *args: str) -> str:
    proc = subprocess.run([str(AGENT_HOOK), *args], env=e2e.env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def expected(paths: list[Path]) -> tuple[float, int]:
    """genai-prices' total for the transcripts' assistant usage, each message id + request id once."""
    seen: set[str] = set()
    total = 0.0
    for path in paths:
        for line in path.read_text().splitlines():
            e = json.loads(line) if line.strip() else {}
            msg = e.get("message") if e.get("type") == "assistant" else None
            if not isinstance(msg, dict) or "usage" not in msg or msg.get("model") == "<synthetic>":
                continue
            key = f"{msg.get('id')}:{e.get('requestId')}"
            if key in seen:
                continue
            seen.add(key)
            extracted = genai_prices.extract_usage({"model": msg["model"], "usage": msg["usage"]},
                                                   provider_id="anthropic")
            when = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00"))
            total += float(genai_prices.calc_price(extracted.usage, msg["model"], provider_id="anthropic",
                                                   genai_request_timestamp=when).total_price)
    return total, len(seen)


def test_a_session_costs_what_its_transcript_says(e2e: E2E) -> None:
    e2e.server.input_tokens = 1200
    e2e.server.cache_tokens = (6000, 30000)
    e2e.server.set_script([[tool_use("Bash", {"command": "echo one", "description": "one"})],
                           [tool_use("Bash", {"command": "echo two", "description": "two"})],
                           [text("Both done.")]])
    run = e2e.run("Run two commands.")
    assert run.ok, e2e.describe()
    (row,) = e2e.query("SELECT transcript_path FROM sessions WHERE session_id = ?", run.session_id)
    usd, messages = expected([Path(row["transcript_path"])])
    assert messages >= 3 and usd > 0
    got = json.loads(cli(e2e, "cost", "--session", run.session_id, "--json"))
    assert got["usd"] == pytest.approx(usd, rel=0.01), (got, usd)
    assert got["cache_read_input_tokens"] >= 3 * 30000 and got["unpriced_models"] == []
    assert e2e.errors() == []


def test_a_spent_budget_denies_the_next_tool_call(e2e: E2E) -> None:
    cli(e2e, "task", "create", "T-1", "--budget-usd", "0.0001")
    e2e.server.input_tokens = 5000
    e2e.server.set_script([[tool_use("Bash", {"command": "echo first", "description": "first"})],
                           [tool_use("Bash", {"command": "echo second", "description": "second"})],
                           [text("Stopped: out of budget.")]])
    run = e2e.run("Work on the task.", env_extra={"AGENT_HOOKS_TASK_ID": "T-1"})
    assert run.returncode == 0, e2e.describe()
    # The first call ran (nothing was spent yet); the second was denied with the budget's reason.
    denied = e2e.server.requests_containing("task T-1's budget of $0.00 is spent", kind="main")
    assert denied, e2e.describe()
    assert "agent-hook task budget T-1 <USD>" in json.dumps(denied[-1].body)
    rows = e2e.query("SELECT decision, rule FROM tool_calls WHERE session_id = ? ORDER BY id", run.session_id)
    assert [(r["decision"], r["rule"]) for r in rows] == [("allow", None), ("deny", "budget.task")], rows


def test_a_persisting_task_lets_its_worker_go_when_its_budget_is_spent(e2e: E2E) -> None:
    cli(e2e, "task", "create", "T-1", "--description", "Never finished", "--persist", "--budget-usd", "0.0001")
    e2e.server.input_tokens = 5000
    e2e.server.set_script([])  # every main request: "Done."
    run = e2e.run("Do the never-ending task.", env_extra={"AGENT_HOOKS_TASK_ID": "T-1"})
    assert run.returncode == 0 and run.result is not None, e2e.describe()
    t = json.loads(cli(e2e, "task", "show", "T-1", "--json"))
    assert t["last_bypass"].startswith("bypass spent"), t
    assert len(e2e.server.messages("main")) <= 2, e2e.describe()


def _ccusage_run(e2e: E2E, *args: str) -> dict[str, Any]:
    """ccusage's JSON answer on this run's transcripts (skips when ccusage is not installed)."""
    import os
    import shutil

    exe = os.environ.get("CCUSAGE_BIN") or shutil.which("ccusage")
    if not exe:
        pytest.skip("ccusage is not installed (npm install ccusage@17.2.1; CCUSAGE_BIN=<its bin/ccusage>)")
    env = {**e2e.env(), "CLAUDE_CONFIG_DIR": str(e2e.home / ".claude")}
    proc = subprocess.run([exe, *args, "--json", "--offline", "--mode", "calculate"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _ccusage(e2e: E2E, session_id: str) -> dict[str, Any]:
    return _ccusage_run(e2e, "session", "--id", session_id)


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-opus-4-5", "claude-haiku-4-5", "claude-sonnet-4-20250514"])
def test_cost_matches_ccusage(e2e: E2E, model: str) -> None:
    """The oracle: ccusage's own figure for the session, within 1 % (opt in: ccusage installed)."""
    e2e.server.model = model
    e2e.server.input_tokens = 900
    e2e.server.cache_tokens = (4000, 25000)
    e2e.server.set_script([[tool_use("Bash", {"command": "echo one", "description": "one"})], [text("Done.")]])
    run = e2e.run("Run one command.", extra_args=["--model", model])
    assert run.ok, e2e.describe()
    theirs = _ccusage(e2e, run.session_id)
    ours = json.loads(cli(e2e, "cost", "--session", run.session_id, "--json"))
    assert ours["usd"] == pytest.approx(float(theirs["totalCost"]), rel=0.01), (ours, theirs)


def _subagent(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools = {t.get("name"): t for t in body.get("tools") or []}
    name = "Agent" if "Agent" in tools else "Task"
    args: dict[str, Any] = {"description": "look around", "prompt": "Run echo sub and report.",
                            "subagent_type": "general-purpose"}
    # Newer clients run subagents in the background unless told not to; the script needs one order.
    if "run_in_background" in ((tools[name].get("input_schema") or {}).get("properties") or {}):
        args["run_in_background"] = False
    return [tool_use(name, args)]


def test_a_subagent_counts_under_its_parent_as_ccusage_counts_it(e2e: E2E) -> None:
    e2e.server.model = ORACLE_MODEL  # a model ccusage's offline data prices
    e2e.server.input_tokens = 700
    e2e.server.cache_tokens = (3000, 12000)
    e2e.server.set_script([_subagent, [tool_use("Bash", {"command": "echo sub", "description": "sub"})],
                           [text("subagent done")], [text("Done looking.")]])
    run = e2e.run("Look around.", extra_args=["--model", ORACLE_MODEL])
    assert run.ok, e2e.describe()
    ours = json.loads(cli(e2e, "cost", "--session", run.session_id, "--json"))
    subs = e2e.query("SELECT count(*) AS n FROM cost_messages WHERE session_id = ? AND agent_id IS NOT NULL",
                     run.session_id)
    assert subs[0]["n"] >= 1, e2e.describe()  # the subagent's own transcript was read into its parent
    # ccusage's `session --id` reads the session's own transcript only: its figure is our main part.
    (main,) = e2e.query("SELECT sum(usd) AS usd FROM cost_messages WHERE session_id = ? AND agent_id IS NULL",
                        run.session_id)
    theirs = _ccusage(e2e, run.session_id)
    assert main["usd"] == pytest.approx(float(theirs["totalCost"]), rel=0.01), (main, theirs)
    # ...and the whole, subagent included, is what the data set charges for both transcripts.
    (row,) = e2e.query("SELECT transcript_path FROM sessions WHERE session_id = ?", run.session_id)
    path = Path(row["transcript_path"])
    sub_paths = sorted((path.parent / path.stem / "subagents").glob("*.jsonl"))
    assert sub_paths, "the client wrote the subagent's transcript beside the session's"
    assert ours["usd"] == pytest.approx(expected([path, *sub_paths])[0], rel=1e-6)
    assert ours["usd"] > main["usd"]


def test_a_resumed_and_forked_pair_as_ccusage_counts_it(e2e: E2E) -> None:
    e2e.server.model = ORACLE_MODEL
    e2e.server.input_tokens = 800
    e2e.server.cache_tokens = (2000, 15000)
    e2e.server.set_script([[text("Parent here.")], [text("Resumed here.")], [text("Fork here.")]])
    model = ["--model", ORACLE_MODEL]
    parent = e2e.run("Start the parent.", extra_args=model)
    assert parent.ok, e2e.describe()
    resumed = e2e.run("Go on.", resume=parent.session_id, extra_args=model)
    assert resumed.ok, e2e.describe()
    fork = e2e.run("Continue in a fork.", resume=parent.session_id, extra_args=["--fork-session", *model])
    assert fork.ok and fork.session_id != parent.session_id, e2e.describe()
    # A fork's transcript starts with copies of its parent's lines. ccusage's `session --id` reads one
    # file, so it charges the copies to the fork again; its daily report de-duplicates across files,
    # as we do: the totals agree, and each copied line is ours once, in the session read first.
    everything = json.loads(cli(e2e, "cost", "--json"))
    daily = _ccusage_daily(e2e)
    assert everything["usd"] == pytest.approx(float(daily["totals"]["totalCost"]), rel=0.01), (everything, daily)
    ours = json.loads(cli(e2e, "cost", "--session", parent.session_id, "--json"))
    theirs = _ccusage(e2e, parent.session_id)
    assert ours["usd"] == pytest.approx(float(theirs["totalCost"]), rel=0.01), (ours, theirs)
    own = json.loads(cli(e2e, "cost", "--session", fork.session_id, "--json"))
    assert 0 < own["usd"] < float(_ccusage(e2e, fork.session_id)["totalCost"])


def _ccusage_daily(e2e: E2E) -> dict[str, Any]:
    return _ccusage_run(e2e, "daily")
