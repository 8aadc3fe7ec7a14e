"""The http transport under the real client: session variables as headers, and a server that
dies mid-session (the tools go on, the next SessionStart brings it back, doctor names the gap)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import claude_client
import pytest
from harness import BIN_DIR, E2E
from model_server import text, tool_use

from agent_hooks.wiring.table import HOOKS

pytestmark = pytest.mark.parametrize("transport", ["http"], indirect=True)


# The tmux variable turns forwarding on; nothing listens for it here.
NO_FORWARD = {"AGENT_HOOKS__FORWARD__ENABLED": "false"}


def server(e2e: E2E, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN_DIR / "agent-hook"), *args], env=e2e.env(NO_FORWARD), capture_output=True,
                          text=True, timeout=60)


def status(e2e: E2E) -> dict[str, Any]:
    return json.loads(server(e2e, "server", "status", "--json").stdout)


def http_only(e2e: E2E) -> None:
    """Only our http entries wired, the server started by hand: whatever the session row holds
    came through the http hooks' headers (no executable read the environment)."""
    e2e.settings = {"hooks": {e: g for e, g in e2e.settings["hooks"].items()
                              if any(h.get("type") == "http" for grp in g for h in grp["hooks"])}}
    # Every event but SessionStart goes over http (PermissionRequest too: the server holds a dialog open
    # for an answer from elsewhere).
    assert sorted(e2e.settings["hooks"]) == sorted(h.event for h in HOOKS if h.event != "SessionStart")
    assert server(e2e, "server", "start").returncode == 0


def test_http_hooks_carry_the_session_variables(e2e: E2E) -> None:
    http_only(e2e)
    e2e.server.set_script([[tool_use("Bash", {"command": "echo hi", "description": "say hi"}, id="toolu_hi")],
                           [text("Done.")]])
    run = e2e.run("Say hi.", env_extra={"AGENT_HOOKS_TASK_ID": "T-42", "AGENT_HOOKS_AGENT": "ada",
                                        "AGENT_HOOKS_TMUX_SESSION": "tm-7", **NO_FORWARD})
    assert run.ok, e2e.describe()
    (session,) = e2e.query("SELECT task_id, agent, tmux_session, tool_calls FROM sessions")
    assert session == {"task_id": "T-42", "agent": "ada", "tmux_session": "tm-7", "tool_calls": 1}
    (call,) = e2e.query("SELECT tool_use_id, outcome FROM tool_calls")
    assert call == {"tool_use_id": "toolu_hi", "outcome": "success"}
    served = status(e2e)
    # The prompt, the tool call's Pre and Post, Stop and SessionEnd.
    assert served["up"] and served["requests"].get("answered") == 5, served
    assert e2e.errors() == []


KILL = ("kill -9 $(python3 -c \"import json,os; print(json.load(open(os.environ['AGENT_HOOKS_HOME']"
        " + '/server.json'))['pid'])\")")


def test_server_killed_mid_session(e2e: E2E) -> None:
    # Wired the way a user wires it (doctor reads ~/.claude/settings.json).
    assert server(e2e, "settings", "install", "--transport", "http").returncode == 0
    e2e.server.set_script([
        [tool_use("Bash", {"command": "echo one > one.txt", "description": "one"}, id="toolu_one")],
        [tool_use("Bash", {"command": KILL, "description": "kill the hook server"}, id="toolu_kill")],
        [tool_use("Bash", {"command": "echo three > three.txt", "description": "three"}, id="toolu_three")],
        [text("Carried on.")],
    ])
    run = e2e.run("Run three commands.", settings_flag=False)
    assert run.ok and run.result["result"] == "Carried on.", e2e.describe()
    # The tool after the kill ran: a refused connection lets it through (fail open).
    assert (e2e.workspace / "three.txt").read_text() == "three\n"
    ids = {r["tool_use_id"]: r["outcome"] for r in e2e.query("SELECT tool_use_id, outcome FROM tool_calls")}
    assert ids.get("toolu_one") == "success" and "toolu_three" not in ids, ids
    killed = status(e2e)
    assert not killed["up"]
    doctor = server(e2e, "doctor", "--no-run").stdout
    assert any(line.startswith("✗ server") and "server down" in line for line in doctor.splitlines()), doctor

    # The next session's SessionStart brings it back, and doctor names the gap.
    e2e.server.set_script([[tool_use("Bash", {"command": "echo four > four.txt", "description": "four"},
                                      id="toolu_four")], [text("Back.")]])
    again = e2e.run("One more.", settings_flag=False)
    assert again.ok, e2e.describe()
    back = status(e2e)
    assert back["up"] and back["requests"].get("answered") == 5, back  # prompt, Pre, Post, Stop, SessionEnd
    four = e2e.query("SELECT outcome FROM tool_calls WHERE tool_use_id = 'toolu_four'")
    assert four == [{"outcome": "success"}]
    gap = [e for e in e2e.errors() if e["kind"] == "server"]
    assert len(gap) == 1 and "died without stopping" in gap[0]["message"], e2e.errors()
    doctor = server(e2e, "doctor", "--no-run").stdout
    assert any(line.startswith("! server") and "server gap" in line for line in doctor.splitlines()), doctor


def test_the_pinned_client_sends_http_hooks_with_headers(e2e: E2E, tmp_path: Path) -> None:
    """Whether the pinned client (2.1.197) sends http hooks with the session's variables decides which
    client the http scenarios run on (claude_client.HTTP_HOOK_VERSIONS; observed: it does)."""
    pinned = claude_client.ensure_client(claude_client.DEFAULT_VERSION)
    world = E2E(pinned, e2e.server, tmp_path / "pinned", "http")
    try:
        http_only(world)
        world.server.set_script([[tool_use("Bash", {"command": "echo hi", "description": "hi"}, id="toolu_p")],
                                 [text("Done.")]])
        run = world.run("Say hi.", env_extra={"AGENT_HOOKS_TASK_ID": "T-9"})
        assert run.ok, world.describe()
        rows = world.query("SELECT task_id, tool_calls FROM sessions")
        sent = rows == [{"task_id": "T-9", "tool_calls": 1}]
        assert sent == (claude_client.DEFAULT_VERSION in claude_client.HTTP_HOOK_VERSIONS), (rows, status(world))
    finally:
        world.close()
