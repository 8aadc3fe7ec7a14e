"""The http transport's wiring and life: settings install --transport http|command, SessionStart
starting (or replacing) the server, a server killed mid-session, and doctor naming the gap."""

from __future__ import annotations

import copy
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agent_hooks
from agent_hooks.server import local
from agent_hooks.server.local import SESSION_ENV, header_for
from agent_hooks.wiring.table import HOOKS

from support.ports import free_port, wait_closed
from support.repo import fixture_payload
from support.scripts import agent_hook, error_log
from support.servers import Server

# Every event of ours but SessionStart (the client runs no http hook on it, and it starts the server).
HTTP_EVENTS = tuple(h.event for h in HOOKS if h.event != "SessionStart")

USERS: dict[str, Any] = {
    "model": "opus",
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 ~/guard.py"}]}],
        "PostToolUse": [{"matcher": "Edit", "hooks": [
            {"type": "http", "url": "http://127.0.0.1:9/audit", "timeout": 3}]}],
    },
}


@pytest.fixture
def port(monkeypatch: pytest.MonkeyPatch) -> int:
    p = free_port()
    monkeypatch.setenv("AGENT_HOOKS__SERVE__PORT", str(p))
    return p


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    path = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(USERS, indent=2) + "\n")
    return path


@pytest.fixture
def server(hooks_home: Path, port: int) -> Iterator[Server]:
    srv = Server(hooks_home, port)
    try:
        yield srv
    finally:
        srv.stop()


def ours(doc: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [h for g in doc["hooks"].get(event, []) for h in g["hooks"]
            if "agent-hook-" in h.get("command", "") or "/hooks/" in h.get("url", "")]


def test_install_http_then_command_keeps_the_users_entries(settings: Path, port: int) -> None:
    agent_hook("settings", "install")
    as_command = settings.read_text()
    out = agent_hook("settings", "install", "--transport", "http").stdout
    assert f"replaced {len(HOOKS)} older entries of ours" in out
    assert ", ".join(HTTP_EVENTS) in out
    doc = json.loads(settings.read_text())
    for event in HTTP_EVENTS:
        [entry] = ours(doc, event)
        assert entry["type"] == "http" and entry["url"] == f"http://127.0.0.1:{port}/hooks/{event}"
        assert entry["allowedEnvVars"] == list(SESSION_ENV)
        assert entry["headers"] == {header_for(v): f"${{{v}}}" for v in SESSION_ENV}
        assert entry["timeout"] > 4 and "onFailure" not in entry
    assert {"UserPromptSubmit", "Stop", "SessionEnd", "PreCompact", "Notification", "SubagentStop"} <= set(HTTP_EVENTS)
    # The one command hook a session starts: SessionStart, which starts the server.
    [start] = ours(doc, "SessionStart")
    assert start["type"] == "command" and 'exec "$h" --serve' in start["command"]
    # The user's own entries, an http one among them, are where they were.
    assert doc["hooks"]["PreToolUse"][0] == USERS["hooks"]["PreToolUse"][0]
    assert doc["hooks"]["PostToolUse"][0] == USERS["hooks"]["PostToolUse"][0]
    assert doc["model"] == "opus"
    assert "already up to date" in agent_hook("settings", "install", "--transport", "http").stdout
    # Back to the executables: exactly what a command install writes.
    assert f"replaced {len(HOOKS)} older entries" in agent_hook("settings", "install", "--transport", "command").stdout
    assert settings.read_text() == as_command  # byte for byte
    assert json.loads(settings.read_text()) == json.loads(as_command)
    agent_hook("settings", "install", "--transport", "http")
    agent_hook("settings", "uninstall")
    assert json.loads(settings.read_text()) == USERS


def test_uninstall_stops_the_server(settings: Path, server: Server) -> None:
    agent_hook("settings", "install", "--transport", "http")
    server.cli("start")
    pid = server.status()["pid"]
    assert f"stopped the server (pid {pid})" in agent_hook("settings", "uninstall").stdout
    assert not server.status()["up"]


def test_an_older_http_entry_of_ours_is_replaced(settings: Path, port: int) -> None:
    doc = copy.deepcopy(USERS)
    old = {"type": "http", "url": "http://127.0.0.1:1234/hooks/PreToolUse", "timeout": 10}
    doc["hooks"]["PreToolUse"].append({"matcher": "*", "hooks": [old]})
    doc["hooks"]["PostToolUse"].append({"hooks": [{"type": "http", "url": "http://localhost:1234/hooks/PostToolUse"}]})
    settings.write_text(json.dumps(doc))
    agent_hook("settings", "install", "--transport", "http")
    new = json.loads(settings.read_text())
    assert [e["url"] for e in ours(new, "PreToolUse")] == [f"http://127.0.0.1:{port}/hooks/PreToolUse"]
    assert [e["url"] for e in ours(new, "PostToolUse")] == [f"http://127.0.0.1:{port}/hooks/PostToolUse"]
    agent_hook("settings", "install")
    assert not any("url" in e for ev in HTTP_EVENTS for e in ours(json.loads(settings.read_text()), ev))


def session_start(settings: Path, session_id: str) -> subprocess.CompletedProcess[bytes]:
    """SessionStart as Claude Code runs it: `sh -c` on the wired command, the payload on stdin."""
    [entry] = ours(json.loads(settings.read_text()), "SessionStart")
    payload = dict(fixture_payload("SessionStart-startup.json"), session_id=session_id)
    proc = subprocess.run(["sh", "-c", entry["command"]], input=json.dumps(payload).encode(), capture_output=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc


def doctor_lines(area: str = "server") -> list[str]:
    out = agent_hook("doctor", "--no-run", check=False).stdout
    return [line for line in out.splitlines() if line[2:].startswith(area)]


def test_session_start_starts_the_server_once_and_after_a_kill(settings: Path, server: Server) -> None:
    agent_hook("settings", "install", "--transport", "http")
    session_start(settings, "s-1")
    first = server.status()
    assert first["up"] and not first["stale"]
    session_start(settings, "s-2")  # it answers: nothing more is done
    assert server.status()["pid"] == first["pid"]
    pre = dict(fixture_payload("PreToolUse-Bash.json"), session_id="s-1")
    assert server.answer(pre) is None

    # The server dies mid-session: the client's POST is refused (so the tool runs); doctor says so.
    os.kill(first["pid"], signal.SIGKILL)
    end = time.time() + 10
    while server.status()["up"] and time.time() < end:
        time.sleep(0.05)
    wait_closed(server.port)  # its worker too
    with pytest.raises(ConnectionRefusedError):
        server.post(dict(pre, tool_use_id="toolu_gap"))
    down = [line for line in doctor_lines() if line.startswith("✗")]
    assert down and "server down" in down[0] and "PreToolUse" in down[0]

    # The next SessionStart brings it back, and the gap is named.
    session_start(settings, "s-3")
    again = server.status()
    assert again["up"] and again["pid"] != first["pid"]
    gap = [e for e in error_log(server.home) if e["kind"] == "server"]
    assert gap and f"pid {first['pid']}" in gap[-1]["message"] and "died without stopping" in gap[-1]["message"]
    lines = doctor_lines()
    assert any(line.startswith("!") and "server gap" in line and str(first["pid"]) in line for line in lines), lines
    assert any("server up" in line for line in lines)
    assert server.answer(dict(pre, tool_use_id="toolu_after")) is None


def test_a_stale_server_is_replaced_at_the_next_session_start(settings: Path, server: Server, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # The "installed package" is a copy of it that every process here imports (PYTHONPATH): the
    # upgrade below changes the copy, never the checkout other tests' servers are running from.
    site = tmp_path / "site"
    shutil.copytree(Path(agent_hooks.__file__).parent, site / "agent_hooks")  # with its bytecode, fresh
    monkeypatch.setenv("PYTHONPATH", str(site))
    server.env["PYTHONPATH"] = str(site)

    def status() -> dict[str, Any]:  # as that package's `server status` says it
        return json.loads(server.cli("status", "--json").stdout)  # type: ignore[no-any-return]

    agent_hook("settings", "install", "--transport", "http")
    server.cli("start")
    old = status()
    assert old["build"] == old["installed_build"]
    # An upgrade: the installed package's files change (here: one file's mtime), so its build id does.
    marker = site / "agent_hooks" / "server" / "__init__.py"
    st = marker.stat()
    os.utime(marker, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    stale = status()
    assert stale["stale"] and stale["pid"] == old["pid"]
    assert local.build_id() == old["build"]  # the checkout itself, and every other test's server, unchanged
    assert any(line.startswith("!") and "older than the installed" in line for line in doctor_lines())
    session_start(settings, "s-upgrade")
    new = status()
    assert new["up"] and not new["stale"] and new["pid"] != old["pid"] and new["build"] != old["build"]
    # A clean replacement is no gap.
    assert not [e for e in error_log(server.home) if e["kind"] == "server"]


def test_a_port_taken_by_another_program_is_named_not_fought(settings: Path, server: Server) -> None:
    import socket

    agent_hook("settings", "install", "--transport", "http")
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", server.port))
        other.listen()
        session_start(settings, "s-taken")
        assert not server.status()["up"]
    [entry] = [e for e in error_log(server.home) if e["kind"] == "server"]
    assert f"port {server.port} answers, but not as this store's server" in entry["message"]


def test_a_changed_port_moves_the_server(settings: Path, server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    agent_hook("settings", "install", "--transport", "http")
    session_start(settings, "s-old-port")
    old = server.status()
    new_port = free_port()
    monkeypatch.setenv("AGENT_HOOKS__SERVE__PORT", str(new_port))
    agent_hook("settings", "install", "--transport", "http")
    session_start(settings, "s-new-port")
    moved = Server(server.home, new_port)
    try:
        st = moved.status()
        assert st["up"] and st["port"] == new_port and st["pid"] != old["pid"], st
    finally:
        moved.stop()


def test_a_dead_servers_port_taken_by_another_program_is_not_taken_for_ours(settings: Path, server: Server) -> None:
    # Killed with -9, the server leaves its file naming the current build and port. Whatever then
    # answers on that port (another user's program can bind it) must not pass for ours: Claude Code
    # would take its answers (an "allow") for ours.
    agent_hook("settings", "install", "--transport", "http")
    server.cli("start")
    pid = server.status()["pid"]
    os.kill(pid, signal.SIGKILL)
    end = time.time() + 10
    while server.status()["up"] and time.time() < end:
        time.sleep(0.05)
    wait_closed(server.port)  # its worker too
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", server.port))
        other.listen()
        session_start(settings, "s-squatted")
    entries = [e for e in error_log(server.home) if e["kind"] == "server"]
    assert any(f"port {server.port} answers, but not as this store's server" in e["message"] for e in entries), entries


def test_a_users_loopback_http_hook_under_hooks_is_kept(settings: Path, port: int) -> None:
    # Only our route (/hooks/<Event>) is ours: a user's own server on loopback may well use /hooks/....
    doc = copy.deepcopy(USERS)
    mine = {"type": "http", "url": "http://127.0.0.1:8080/hooks/audit", "timeout": 3}
    doc["hooks"]["PreToolUse"].append({"matcher": "Bash", "hooks": [mine]})
    settings.write_text(json.dumps(doc))
    agent_hook("settings", "install", "--transport", "http")
    assert mine in [h for g in json.loads(settings.read_text())["hooks"]["PreToolUse"] for h in g["hooks"]]
    agent_hook("settings", "uninstall")
    assert json.loads(settings.read_text()) == doc


def test_no_command_center_is_tried_or_flagged_until_one_is_named(settings: Path, server: Server,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With the default configuration, doctor after an http install and a session said
    `! board not connected to the command center http://127.0.0.1:3000: ConnectError` and
    `1 to look at`, two lines after saying forwarding was not configured: the defaults named a
    command center (forward.url) and subscribed to it (fleet.subscribe), so the server and the
    drainer kept trying one that nobody runs. Nothing is tried or flagged until one is named."""
    # The default configuration, forwarding included (the suite turns it off for every other test).
    monkeypatch.delenv("AGENT_HOOKS__FORWARD__ENABLED")
    server.env.pop("AGENT_HOOKS__FORWARD__ENABLED")
    agent_hook("settings", "install", "--transport", "http")
    session_start(settings, "s-plain")
    tmux = {header_for("OPTIMALOS_SESSION_TMUX"): "work-1"}  # a fleet session: the one that is forwarded
    for i in range(3):
        pre = dict(fixture_payload("PreToolUse-Bash.json"), session_id="s-plain", tool_use_id=f"toolu_{i}")
        assert server.answer(pre, tmux) is None
        assert server.answer(dict(fixture_payload("PostToolUse-Bash.json"), session_id="s-plain",
                                  tool_use_id=f"toolu_{i}"), tmux) is None
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/api/fleet/status")
    fleet_status = json.loads(conn.getresponse().read())
    conn.close()
    assert fleet_status.get("subscription") is None, fleet_status
    queue = json.loads(agent_hook("queue", "--json").stdout)
    assert queue["depth"] == 0 and not queue["drainer_alive"], queue
    out = agent_hook("doctor", "--no-run", check=False)
    assert "command center" not in out.stdout.replace("no command center", ""), out.stdout
    assert not [line for line in out.stdout.splitlines() if line.startswith(("!", "✗"))], out.stdout
    assert "0 broken, 0 to look at" in out.stdout, out.stdout
    assert "command center" not in (server.home / "logs" / "server.log").read_text()
    # Named: tried, and flagged while it does not answer.
    center = f"http://127.0.0.1:{free_port()}/api/hooks/ingest"
    (server.home / "config.toml").write_text(f'[forward]\nurl = "{center}"\n')
    server.cli("stop")
    server.cli("start")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "command center" not in (server.home / "logs" / "server.log").read_text():
        time.sleep(0.1)
    assert f"command center {center.removesuffix('/api/hooks/ingest')}" in (server.home / "logs" / "server.log").read_text()
    out = agent_hook("doctor", "--no-run", check=False).stdout
    assert "not connected to the command center" in out, out
