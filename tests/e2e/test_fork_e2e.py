"""A forked session under the real client, wired by `agent-hook settings install`.

`claude -p --resume ID --fork-session` starts a new session whose SessionStart has source "fork"
(clients since 2.1.214). With the wiring of 0.1.0 (matcher startup|resume|clear|compact) that
SessionStart never ran; now it does, the fork is recorded with its parent, and its forwarded
events begin with `start`.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import claude_client
import pytest
from harness import BIN_DIR, E2E, TRANSPORTS
from model_server import text

from support.forward import kill_drainers
from support.ingest_server import IngestServer

# Over both transports: over http, the fork's prompt, Stop and SessionEnd are answered by the server.
pytestmark = pytest.mark.parametrize("transport", TRANSPORTS, indirect=True)

FORK_SOURCE_SINCE = (2, 1, 214)
FORK_CLIENT = "2.1.330"  # the newest client the fixtures were captured from
# Read at import: the autouse fixture clears AGENT_HOOKS_* from the environment of each test.
CLIENT_VERSION = claude_client.version()


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".")[:3])


@pytest.fixture
def ingest(e2e: E2E) -> Iterator[IngestServer]:
    server = IngestServer().start()
    yield server
    server.stop()
    kill_drainers(str(e2e.agent_home))


def wire_with_settings_install(e2e: E2E) -> None:
    """The settings the project's own wiring writes (not the harness's), for the test's transport."""
    target = e2e.root / "wired-settings.json"
    proc = subprocess.run([str(BIN_DIR / "agent-hook"), "settings", "install", "--settings", str(target),
                           "--transport", e2e.transport], env=e2e.env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    e2e.settings = json.loads(target.read_text())
    assert "matcher" not in e2e.settings["hooks"]["SessionStart"][0]


def env_for(server: IngestServer, tmux: str) -> dict[str, str]:
    return {
        "AGENT_HOOKS_TMUX_SESSION": tmux,
        "AGENT_HOOKS_INGEST_URL": server.url,
        "AGENT_HOOKS__FORWARD__IDLE_EXIT_S": "0.5",
        "AGENT_HOOKS__FORWARD__POLL_INTERVAL_S": "0.02",
    }


# The parent comes from the fork's transcript, which the client writes after SessionStart and sometimes
# after the fork's last hook too; rerun (pytest-rerunfailures) rather than sleep: a second failure is real.
@pytest.mark.flaky(reruns=2)
def test_a_fork_is_recorded_with_its_session_start_and_parent(e2e: E2E, ingest: IngestServer) -> None:
    if version_tuple(CLIENT_VERSION) < FORK_SOURCE_SINCE:
        # The pinned default (2.1.197) predates `source: "fork"`: drive the newest known client instead,
        # so this proof runs in CI rather than being skipped on every default run.
        try:
            e2e.claude = claude_client.ensure_client(FORK_CLIENT)
        except claude_client.InstallError as exc:
            pytest.fail(f"installing Claude Code {FORK_CLIENT} for the fork test failed: {exc}", pytrace=False)
    wire_with_settings_install(e2e)
    e2e.server.set_script([[text("Parent here.")], [text("Fork here.")]])
    parent = e2e.run("Start the parent.", env_extra=env_for(ingest, "agent-e2e-parent"))
    assert parent.ok, e2e.describe()
    fork = e2e.run("Continue in a fork.", resume=parent.session_id, extra_args=["--fork-session"],
                   env_extra=env_for(ingest, "agent-e2e-fork"))
    assert fork.ok, e2e.describe()
    assert fork.session_id and fork.session_id != parent.session_id

    starts = e2e.query("SELECT detail FROM session_events WHERE session_id = ? AND event = 'SessionStart'",
                       fork.session_id)
    assert starts == [{"detail": "fork"}], e2e.describe()
    (row,) = e2e.query("SELECT forked_at, parent_session_id, state FROM sessions WHERE session_id = ?",
                       fork.session_id)
    assert row["forked_at"] is not None
    assert row["parent_session_id"] == parent.session_id, "read from the fork's transcript (requestSessionId)"
    (prow,) = e2e.query("SELECT forked_at, parent_session_id FROM sessions WHERE session_id = ?", parent.session_id)
    assert prow == {"forked_at": None, "parent_session_id": None}

    ingest.wait_for(lambda: sum(r["body"]["tmux_session"] == "agent-e2e-fork" for r in ingest.accepted()) >= 3,
                    what="the fork's events")
    time.sleep(0.5)
    fork_events = [r["body"]["event"] for r in ingest.accepted() if r["body"]["tmux_session"] == "agent-e2e-fork"]
    assert fork_events[0] == "start", fork_events
    assert fork_events[:3] == ["start", "prompt_ready", "exit"], fork_events
    assert e2e.errors() == []
