"""Forwarding under the real client: a session's hooks reach a contract server on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from harness import E2E
from model_server import text, tool_use

from agent_hooks.forward import outbox
from agent_hooks.paths import Paths

from support.forward import kill_drainers
from support.ingest_server import IngestServer


@pytest.fixture
def ingest(e2e: E2E) -> Iterator[IngestServer]:
    server = IngestServer().start()
    yield server
    server.stop()
    kill_drainers(str(e2e.agent_home))


def forward_env(server: IngestServer, tmux: str) -> dict[str, str]:
    return {
        "AGENT_HOOKS_TMUX_SESSION": tmux,
        "AGENT_HOOKS_INGEST_URL": server.url,
        "AGENT_HOOKS__FORWARD__IDLE_EXIT_S": "0.5",
        "AGENT_HOOKS__FORWARD__POLL_INTERVAL_S": "0.02",
    }


def wait_drained(e2e: E2E, timeout: float = 20) -> None:
    paths = Paths({"AGENT_HOOKS_HOME": str(e2e.agent_home)})
    end = time.time() + timeout
    while time.time() < end:
        if not outbox.drainer_alive(paths):
            return
        time.sleep(0.05)
    raise AssertionError("the drainer did not finish")


def test_real_session_drives_the_command_center_states_in_order(e2e: E2E, ingest: IngestServer) -> None:
    e2e.server.set_script([
        [text("Looking."), tool_use("Bash", {"command": "echo one", "description": "first"}, id="toolu_f1")],
        [tool_use("Bash", {"command": "echo two", "description": "second"}, id="toolu_f2")],
        [text("Both done.")],
    ])
    run = e2e.run("Run two commands.", env_extra=forward_env(ingest, "agent-e2e-forward"))
    assert run.ok, e2e.describe()
    ingest.wait_for(lambda: len(ingest.accepted()) >= 4, what="the session's events")
    wait_drained(e2e)

    bodies = [r["body"] for r in ingest.accepted()]
    # SessionStart, UserPromptSubmit, PostToolUse (the second is coalesced: still running), Stop.
    assert [b["event"] for b in bodies] == ["start", "prompt_ready", "tool_use", "exit"], bodies
    assert {b["tmux_session"] for b in bodies} == {"agent-e2e-forward"}
    assert bodies[2]["metadata"].startswith("Bash: ok"), bodies[2]
    assert "echo one" not in str(bodies) and "Run two commands" not in str(bodies)
    (session,) = ingest.sessions.values()
    assert [h[1] for h in session["history"]] == ["running", "awaiting_review", "running", "completed"]
    assert session["state"] == "completed"
    keys = [r["key"] for r in ingest.requests]
    assert len(keys) == len(set(keys)) == 4 and all(len(k) == 32 for k in keys)
    assert e2e.query("SELECT count(*) AS n FROM outbox")[0]["n"] == 0
    assert e2e.errors() == []


def test_real_session_with_the_server_down_is_delivered_later(e2e: E2E, ingest: IngestServer) -> None:
    ingest.stop()
    e2e.server.set_script([[text("Nothing to do.")]])
    env = forward_env(ingest, "agent-e2e-outage") | {
        "AGENT_HOOKS__FORWARD__BACKOFF_INITIAL_S": "0.05",
        "AGENT_HOOKS__FORWARD__BACKOFF_MAX_S": "0.2",
    }
    run = e2e.run("Say something.", env_extra=env)
    assert run.ok, e2e.describe()
    queued = e2e.query("SELECT event, attempts FROM outbox ORDER BY id")
    assert [r["event"] for r in queued] == ["start", "prompt_ready", "exit"]
    assert all(r["attempts"] == 0 for r in queued)
    ingest.start()
    ingest.wait_for(lambda: len(ingest.accepted()) == 3, what="the queued events")
    wait_drained(e2e)
    assert [r["body"]["event"] for r in ingest.accepted()] == ["start", "prompt_ready", "exit"]
    assert list(ingest.sessions.values())[0]["state"] == "completed"
