"""One request, told once across a fleet: by its own host when that host's channels want it, else by
the command center (two stores, two servers, one machine; docs/notifications.md, "In a fleet")."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from support.approvals import PERMISSION, Held
from support.center import Center
from support.receiver import Receiver
from support.repo import fixture_payload
from support.scripts import run_hook


def wait_listed(center: Center, predicate: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = center.http.get("/api/approvals").json()["approvals"]
        if predicate(got):
            return got  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"timed out: {center.http.get('/api/approvals').json()}")


def test_a_request_is_told_by_its_host_when_its_channels_want_it_else_by_the_center(tmp_path: Path) -> None:
    with Receiver(path="/a") as at_a, Receiver(path="/b") as at_b:
        a = Center(tmp_path / "host-a", env={"AGENT_HOOKS__FLEET__HOST": "host-a",
                                             "AGENT_HOOKS__NOTIFY__CHANNELS": json.dumps([{"url": at_a.url}])}).start()
        settings = {
            "AGENT_HOOKS__FLEET__HOST": "host-b", "AGENT_HOOKS__FORWARD__ENABLED": "true",
            "AGENT_HOOKS_INGEST_URL": f"{a.base}/api/hooks/ingest", "AGENT_HOOKS__FORWARD__IDLE_EXIT_S": "5",
            "AGENT_HOOKS__FLEET__SUBSCRIBE_BACKOFF_MAX_S": "0.5", "AGENT_HOOKS__FORWARD__FORWARD_WITHOUT_TMUX": "true",
            # B tells its person about its builder's requests only.
            "AGENT_HOOKS__NOTIFY__CHANNELS": json.dumps([{"url": at_b.url, "agent": "builder"}]),
        }
        b = Center(tmp_path / "host-b", env=settings).start()
        env = {"AGENT_HOOKS_HOME": str(b.home), "HOME": b.env["HOME"], "TMUX": "", "TMUX_PANE": "", **settings}
        try:
            held = Held({**PERMISSION, "session_id": "b-builder"}, {**env, "AGENT_HOOKS_AGENT": "builder"})
            [row] = wait_listed(a, lambda got: len(got) == 1 and got[0]["notifications"]
                                and got[0]["notifications"][0]["state"] == "sent")
            [told] = at_b.wait(1)
            assert "agent builder on host-b" in told["title"]
            # A shows how B's delivery went, and told nobody itself.
            assert row["host"] == "host-b" and row["notifications"][0]["from"] == "host-b"
            a.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
            assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"
            time.sleep(1.0)
            assert at_a.bodies() == [] and len(at_b.bodies()) == 1

            # Another agent's request: B's channels do not want it, so A tells it (once).
            held = Held({**PERMISSION, "session_id": "b-other"}, {**env, "AGENT_HOOKS_AGENT": "reviewer"})
            [told] = at_a.wait(1)
            assert "agent reviewer on host-b" in told["title"]
            [row] = wait_listed(a, lambda got: len(got) == 1)
            a.http.post(f"/api/approvals/{row['id']}", json={"decision": "deny", "message": "no"})
            held.answer()
            time.sleep(1.0)
            assert len(at_a.bodies()) == 1 and len(at_b.bodies()) == 1
        finally:
            b.stop()
            a.stop()


def _end_session(session_id: str, env: dict[str, str]) -> None:
    for event in ("SessionStart-startup", "SessionEnd"):
        payload = {**fixture_payload(f"{event}.json"), "session_id": session_id, "cwd": "/tmp"}
        assert run_hook(payload, env).returncode == 0


def test_a_session_moment_is_told_by_its_host_when_its_channels_want_it_else_by_the_center(tmp_path: Path) -> None:
    # Both want "finished"; B's channel only for its builder. B's builder finishing is told by B alone; B's
    # reviewer finishing by the command center alone: B's report says which moments it tells itself.
    with Receiver(path="/a") as at_a, Receiver(path="/b") as at_b:
        a = Center(tmp_path / "host-a", env={"AGENT_HOOKS__FLEET__HOST": "host-a", "AGENT_HOOKS__NOTIFY__CHANNELS":
                                             json.dumps([{"url": at_a.url, "on": ["finished"]}])}).start()
        settings = {
            "AGENT_HOOKS__FLEET__HOST": "host-b", "AGENT_HOOKS__FORWARD__ENABLED": "true",
            "AGENT_HOOKS_INGEST_URL": f"{a.base}/api/hooks/ingest", "AGENT_HOOKS__FORWARD__IDLE_EXIT_S": "5",
            "AGENT_HOOKS__FLEET__SUBSCRIBE_BACKOFF_MAX_S": "0.5", "AGENT_HOOKS__FORWARD__FORWARD_WITHOUT_TMUX": "true",
            "AGENT_HOOKS__NOTIFY__CHANNELS": json.dumps([{"url": at_b.url, "on": ["finished"], "agent": "builder"}]),
        }
        b = Center(tmp_path / "host-b", env=settings).start()
        env = {"AGENT_HOOKS_HOME": str(b.home), "HOME": b.env["HOME"], "TMUX": "", "TMUX_PANE": "", **settings}
        try:
            _end_session("b-builder", {**env, "AGENT_HOOKS_AGENT": "builder"})
            [told] = at_b.wait(1)
            assert "finished" in told["title"]
            a.wait_card(lambda c: c.get("session_id") == "b-builder" and c.get("notified_by_host") == ["finished"]
                        and c.get("own_state") == "ended", what="B's builder's card, ended, told by B")
            _end_session("b-reviewer", {**env, "AGENT_HOOKS_AGENT": "reviewer"})
            [told] = at_a.wait(1)
            assert "finished" in told["title"] and "reviewer" in told["title"] + told["message"], told
            time.sleep(1.0)
            assert len(at_a.bodies()) == 1 and len(at_b.bodies()) == 1
        finally:
            b.stop()
            a.stop()
