"""What a session waits on, with the real client and the project's settings template:
an API error ends the turn (StopFailure -> error, with its kind), subagents are recorded."""

from __future__ import annotations

import json
import subprocess

import pytest
from harness import BIN_DIR, E2E
from model_server import api_error, text, tool_use


def status(e2e: E2E) -> dict:
    proc = subprocess.run([str(BIN_DIR / "agent-hook"), "status", "--json"], env=e2e.env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_rate_limited_turn_is_error_with_its_kind(e2e: E2E) -> None:
    assert "StopFailure" in e2e.settings["hooks"], "the template wires StopFailure"
    # A -p client does not always wait for its StopFailure hook before it exits (seen on 2.1.331, as
    # the fixture capture saw): try a fresh session up to three times; one must record it.
    for _attempt in range(3):
        e2e.server.set_script([[api_error(429, "rate_limit_error", "slow down")]])
        run = e2e.run("Hello.", env_extra={"CLAUDE_CODE_MAX_RETRIES": "0"})
        assert run.returncode != 0 or (run.result or {}).get("is_error"), e2e.describe()
        failures = e2e.query("SELECT session_id, detail FROM session_events WHERE event = 'StopFailure'")
        if failures:
            break
    if not failures and e2e.query("SELECT 1 FROM session_events WHERE event = 'SessionEnd'"):
        # The turn ended and the session closed, but the client exited before its StopFailure hook ran
        # (2.1.331 in -p mode, on a quiet machine, every time). Say so rather than pass or fail on it;
        # the StopFailure handling itself is covered with the captured payload (tests/features/test_waiting_states.py).
        pytest.skip("this client exits before running its StopFailure hook in -p mode (3 tries)")
    assert [f["detail"] for f in failures] == ["rate_limit"], e2e.describe()
    [session] = [s for s in status(e2e)["sessions"] if s["session_id"] == failures[0]["session_id"]]
    # A -p run ends right after: the session is ended, and still says what ended its last turn.
    assert session["state"] == "ended", session
    assert (session["waiting_on"], session["waiting_detail"]) == ("error", "rate_limit"), session


def test_subagents_are_recorded(e2e: E2E) -> None:
    e2e.server.set_script([
        [tool_use("Agent", {"description": "look around", "prompt": "List files",
                            "subagent_type": "general-purpose"})],
        [text("sub done")],
        [text("main done")],
    ])
    run = e2e.run("Use a subagent.", allowed_tools=("Bash", "Agent", "Task"))
    assert run.ok, e2e.describe()
    rows = e2e.query("SELECT agent_type, started_at, stopped_at, last_message FROM subagents")
    assert len(rows) == 1 and rows[0]["agent_type"] == "general-purpose", rows
    # Newer clients may run the subagent beside the main loop, so which scripted text it got depends on
    # request order; what matters is that its stop and final message were recorded.
    assert rows[0]["stopped_at"] and rows[0]["last_message"] in ("sub done", "main done"), rows
    [session] = status(e2e)["sessions"]
    assert (session["subagents_running"], session["subagents_finished"]) == (0, 1)


def test_an_mcp_question_to_the_person_is_recorded_as_waiting_on_them(e2e: E2E) -> None:
    """An MCP server asks the person (elicitation/create): our Elicitation hook records the server and
    its question as what the session waits on, and ElicitationResult records the answer and clears it.
    (In -p mode the client cancels the question at once, after the hooks ran.)"""
    import sys
    from pathlib import Path

    from harness import DEFAULT_TOOLS

    assert "Elicitation" in e2e.settings["hooks"] and "ElicitationResult" in e2e.settings["hooks"]
    asker = Path(__file__).resolve().parent / "mcp_asker.py"
    mcp = e2e.root / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"asker": {"type": "stdio", "command": sys.executable,
                                                        "args": [str(asker)]}}}))
    e2e.server.set_script([[tool_use("mcp__asker__ask", {})], [text("asked")]])
    run = e2e.run("Ask which database.", allowed_tools=(*DEFAULT_TOOLS, "mcp__asker__ask"),
                  extra_args=["--mcp-config", str(mcp)])
    assert run.ok, e2e.describe()
    rows = e2e.query("SELECT event, detail FROM session_events WHERE event LIKE 'Elicitation%' ORDER BY id")
    if not rows and not e2e.query("SELECT 1 FROM tool_calls WHERE tool_name = 'mcp__asker__ask'"):
        pytest.skip("this client did not call the MCP tool")
    assert [(r["event"], r["detail"]) for r in rows] == [
        ("Elicitation", "asker: Which database should the service use?"), ("ElicitationResult", "asker: cancel")], \
        e2e.describe()
    [session] = status(e2e)["sessions"]
    assert session["waiting_on"] is None, session
    assert e2e.errors() == []
