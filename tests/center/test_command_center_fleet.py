"""Two hosts on loopback: two AGENT_HOOKS_HOMEs, each with its own server; A is the command center.

B's hooks forward to A (its drainer), B's server subscribes to A's controls. B's session shows on A's
board with its host; a cancel on A denies B's next tool call within 2 s, decided from B's own store;
B keeps working while A is down and catches up afterwards; uncancel travels the same way. Also: the
fleet token for callers that are not this user on loopback (a second uid), and `agent-hook cancel --server`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.center import Center, two_hosts
from support.scripts import agent_hook, run_hook


def payload(event: str, sid: str, cwd: str, **extra: object) -> dict[str, object]:
    return {"session_id": sid, "transcript_path": f"{cwd}/t.jsonl", "cwd": cwd, "hook_event_name": event, **extra}


def bash(sid: str, cwd: str, n: int) -> dict[str, object]:
    return payload("PreToolUse", sid, cwd, tool_name="Bash", tool_use_id=f"toolu_{n}",
                   tool_input={"command": f"echo {n}", "description": "step"})


def decision(proc: subprocess.CompletedProcess[bytes]) -> str | None:
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip()
    if not out:
        return None
    return json.loads(out).get("hookSpecificOutput", {}).get("permissionDecision")


@pytest.fixture
def hosts(tmp_path: Path, center_db: str) -> Iterator[tuple[Center, Center, dict[str, str]]]:
    # A's fleet in its SQLite store, then in PostgreSQL.
    with two_hosts(tmp_path, forward={"AGENT_HOOKS__FORWARD__POLL_INTERVAL_S": "0.02",
                                      "AGENT_HOOKS__FORWARD__BACKOFF_INITIAL_S": "0.1",
                                      "AGENT_HOOKS__FORWARD__BACKOFF_MAX_S": "0.3"}, center_db=center_db) as hosts:
        yield hosts


def b_store(b: Center, sql: str, *args: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(b.home / "store.db")
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def test_two_hosts_board_cancel_outage_and_catch_up(hosts: tuple[Center, Center, dict[str, str]],
                                                     tmp_path: Path) -> None:
    a, b, env = hosts
    cwd = str(tmp_path)
    s1 = "b-session-1"
    env1 = {**env, "AGENT_HOOKS_TMUX_SESSION": "agent-b1"}
    assert run_hook(payload("SessionStart", s1, cwd, source="startup"), env1).returncode == 0
    card = a.wait_card(lambda c: c["tmux_session"] == "agent-b1", what="B's session on A's board")
    assert card["host"] == "host-b" and card["state"] == "running" and card["local"] is False
    assert b.board_cards()[s1]["host"] == "host-b"  # B's own board has it too, as a local session

    # A goes down: B keeps working (its hooks answer, nothing waits on A), events stay queued.
    a.stop()
    t0 = time.time()
    assert decision(run_hook(bash(s1, cwd, 1), env1)) in (None, "allow")
    assert run_hook(payload("PostToolUse", s1, cwd, tool_name="Bash", tool_use_id="toolu_1",
                            tool_input={"command": "echo 1"}, tool_response={"stdout": "1"}), env1).returncode == 0
    assert run_hook(payload("Stop", s1, cwd, stop_hook_active=False), env1).returncode == 0
    assert time.time() - t0 < 5
    assert b_store(b, "SELECT count(*) FROM outbox WHERE state = 'queued'")[0][0] >= 1

    # A comes back on the same port: B's queued events arrive, in order, and its subscription reconnects.
    a.start()
    card = a.wait_card(lambda c: c["tmux_session"] == "agent-b1" and c["state"] == "completed", timeout=15,
                       what="B's queued events after A's restart")
    events = [e["event"] for e in reversed(a.http.get(f"/api/board/sessions/{card['id']}").json()["events"])]
    assert events == ["start", "exit"]  # the tool_use heartbeat is coalesced: running for < 30 s

    # A second session on B; a cancel on A reaches B's store and B's next tool call is denied, within 2 s.
    s2 = "b-session-2"
    env2 = {**env, "AGENT_HOOKS_TMUX_SESSION": "agent-b2"}
    assert run_hook(payload("SessionStart", s2, cwd, source="startup"), env2).returncode == 0
    a.wait_card(lambda c: c["tmux_session"] == "agent-b2", what="B's second session")
    assert decision(run_hook(bash(s2, cwd, 2), env2)) in (None, "allow")
    _wait_subscribed(b)
    t0 = time.time()
    r = a.http.post("/api/sessions/agent-b2/cancel", params={"host": "host-b"}, json={"reason": "wrong branch"})
    assert r.status_code == 200 and r.json()["sessions"][0]["applied"] == "sent", r.text
    denied_after = None
    while time.time() - t0 < 2.0:
        proc = run_hook(bash(s2, cwd, 3), env2)
        if decision(proc) == "deny":
            denied_after = time.time() - t0
            assert "wrong branch" in proc.stdout.decode()
            break
    assert denied_after is not None and denied_after <= 2.0, "B's tool call was not denied within 2 s"
    # A's board shows the cancel as delivered once B confirms it (its next poll).
    a.wait_card(lambda c: c["tmux_session"] == "agent-b2" and c["badges"]["cancel_delivered"] is True,
                what="the cancel confirmed by B")

    # Uncancel travels the same way.
    t0 = time.time()
    assert a.http.post("/api/sessions/agent-b2/uncancel", params={"host": "host-b"}).status_code == 200
    while time.time() - t0 < 2.0:
        if decision(run_hook(bash(s2, cwd, 4), env2)) in (None, "allow"):
            break
    else:
        raise AssertionError("B was not uncancelled within 2 s")

    # A task cancelled on A is cancelled on every host.
    s3, env3 = "b-session-3", {**env, "AGENT_HOOKS_TMUX_SESSION": "agent-b3", "AGENT_HOOKS_TASK_ID": "T-fleet"}
    assert run_hook(payload("SessionStart", s3, cwd, source="startup"), env3).returncode == 0
    assert a.http.post("/api/tasks/T-fleet/cancel", json={"reason": "superseded"}).status_code == 200
    t0 = time.time()
    while time.time() - t0 < 2.0:
        if decision(run_hook(bash(s3, cwd, 5), env3)) == "deny":
            break
    else:
        raise AssertionError("the task cancel did not reach B within 2 s")


def _wait_subscribed(b: Center, timeout: float = 10) -> None:
    end = time.time() + timeout
    while time.time() < end:
        sub = b.http.get("/api/fleet/status").json()["subscription"]
        if sub and sub["connected"]:
            return
        time.sleep(0.05)
    raise AssertionError(f"B never subscribed: {b.http.get('/api/fleet/status').json()}")


def test_cancel_from_the_cli_through_a_command_center(tmp_path: Path) -> None:
    a = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "cc"}).start()
    try:
        env = {"AGENT_HOOKS_HOME": str(a.home), "HOME": a.env["HOME"]}
        sid = "local-cli-1"
        assert run_hook(payload("SessionStart", sid, str(tmp_path), source="startup"), env).returncode == 0
        a.wait_card(lambda c: c["id"] == sid)
        out = agent_hook("cancel", "--server", a.base, sid, "--reason", "from the cli", env=env)
        assert "cancelled" in out.stdout
        assert decision(run_hook(bash(sid, str(tmp_path), 1), env)) == "deny"
        agent_hook("uncancel", "--server", a.base, sid, env=env)
        assert decision(run_hook(bash(sid, str(tmp_path), 2), env)) in (None, "allow")
        bad = agent_hook("cancel", "--server", a.base, "no-such-session", "--reason", "x", env=env, check=False)
        assert bad.returncode != 0 and "no session" in bad.stderr
        assert agent_hook("cancel", "--server", a.base, "--task", "T9", "--reason", "stop", env=env).returncode == 0
        assert a.http.get("/api/board").status_code == 200
    finally:
        a.stop()


# The other uid's client: a Python it can run (the venv's may sit under a private home).
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.skipif(os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
                    reason="needs root (to run a client as another uid) and /usr/bin/python3")
def test_another_uid_on_loopback_needs_the_fleet_token(tmp_path: Path) -> None:
    token = "t0ken-for-the-fleet"
    a = Center(tmp_path / "cc", env={"AGENT_HOOKS_FLEET_TOKEN": token}).start()
    script = (
        "import json, sys, urllib.request\n"
        "def call(headers):\n"
        "    req = urllib.request.Request(sys.argv[1] + '/api/hooks/ingest', method='POST', headers=headers,\n"
        "        data=json.dumps({'tmux_session': 'agent-x', 'event': 'start'}).encode())\n"
        "    try:\n"
        "        return urllib.request.urlopen(req, timeout=5).status\n"
        "    except urllib.error.HTTPError as e:\n"
        "        return e.code\n"
        "print(call({}), call({'Authorization': 'Bearer wrong'}), call({'Authorization': 'Bearer " + token + "'}))\n"
    )
    try:
        proc = subprocess.run([SYSTEM_PYTHON, "-I", "-c", script, a.base], capture_output=True, text=True,
                              timeout=30, user=65534, group=65534, cwd="/", env={"PATH": "/usr/bin:/bin"})
        assert proc.stdout.split() == ["401", "401", "200"], proc
        cards = a.http.get("/api/hooks/sessions").json()  # we, the server's user, need nothing
        assert [c["tmux_session"] for c in cards] == ["agent-x"]
    finally:
        a.stop()


def test_a_command_center_stops_without_waiting_out_a_hosts_long_poll(
        hosts: tuple[Center, Center, dict[str, str]]) -> None:
    """A subscribed host always has a long poll open on the command center. Asked to stop, the
    center answers it at once (no controls) instead of letting uvicorn wait out its graceful
    shutdown and then cancel the request."""
    a, b, _ = hosts
    _wait_subscribed(b)
    a.stop()
    log = (a.home / "logs" / "server.log").read_text()
    assert "graceful shutdown exceeded" not in log, log[-2000:]
    assert a.status()["up"] is False


def test_a_subscribed_host_stops_without_an_error(hosts: tuple[Center, Center, dict[str, str]]) -> None:
    """Stopping a host whose server subscribes to a command center ends the subscription, then every
    other module's shutdown, and its log says nothing went wrong."""
    _, b, _ = hosts
    _wait_subscribed(b)
    b.stop()
    log = (b.home / "logs" / "server.log").read_text()
    assert "Traceback" not in log and "Error" not in log, log[-3000:]
    assert b.status()["up"] is False
