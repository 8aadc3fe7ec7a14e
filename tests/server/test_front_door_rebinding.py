"""The front door takes a loopback literal for loopback, never a name that starts like one.

A page served as ``127.0.0.1.evil.example`` (or ``127.evil.example``, ``localhost.evil.example``)
and rebound to 127.0.0.1 is same-origin to the owner's own browser, and its requests come from the
owner's uid. Its Host header is the page's name, so the door must take exactly ``127.0.0.1``,
``localhost`` or ``[::1]`` with the server's own port, or a name configured in ``[fleet] names``
(then with the fleet token), and nothing else. Every route is read from the app, so a route added
later is knocked on too, and the store must be exactly as it was after all the knocking.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.center import Center
from support.repo import fixture_payload
from support.routes import AppRoute, app_routes, request, ws_handshake
from support.scripts import agent_hook

TOKEN = "t0ken-rebinding-door"


def rebound_hosts(port: int) -> list[str]:
    """Host headers a rebound page (or a sloppy parser) could bring: names that start like loopback,
    loopback literals with another port, and other spellings of 127.0.0.1 that are not the literal."""
    other = port + 1 if port < 65535 else port - 1
    return [
        f"127.0.0.1.evil.example:{port}", f"127.evil.example:{port}", f"localhost.evil.example:{port}",
        f"127.0.0.1:{other}", f"localhost:{other}", f"[::1]:{other}", f"[::1].evil:{port}",
        f"127.0.1.1:{port}", f"127.1:{port}", f"2130706433:{port}", f"0x7f.0.0.1:{port}",
        f"127.0.0.1.:{port}", f"localhost.:{port}", f"127.0.0.1:{port}.evil.example",
        f"127.0.0.1:{port}@evil.example", "127.0.0.1", "localhost", "", f"evil.example:{port}",
    ]


def _snapshot(home: Path) -> str:
    """Every row of every table of the store, as one digest."""
    digest = hashlib.sha256()
    with sqlite3.connect(home / "store.db") as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                             " AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        for table in tables:
            digest.update(table.encode())
            for row in sorted(repr(r) for r in conn.execute(f'SELECT * FROM "{table}"')):
                digest.update(row.encode())
    return digest.hexdigest()


@pytest.fixture
def center(tmp_path: Path) -> Iterator[Center]:
    server = Center(tmp_path / "agent-hooks", env={"AGENT_HOOKS_FLEET_TOKEN": TOKEN}).start()
    yield server
    server.stop()


def _victims(center: Center, tmp_path: Path) -> dict[str, Any]:
    """What a let-in request would change: the stored CLAUDE.md, a card, another host's pending request."""
    ours = tmp_path / "ours.md"
    ours.write_text("# ours\n\n" + "\n".join(f"- rule {i}: keep promises." for i in range(20)) + "\n")
    agent_hook("identity", "set", "default", "CLAUDE.md", "--file", str(ours), env=center.env)
    card = center.ingest({"tmux_session": "agent-victim", "event": "start"}).json()["session"]
    report = {"cards": [], "approvals": [{
        "id": "rebound0001", "kind": "permission", "state": "pending", "session_id": "s-victim",
        "tool_name": "Bash", "tool_input": json.dumps({"command": "ls"}), "created_at": 1000.0,
        "expires_at": 4_000_000_000.0}]}
    r = center.http.post("/api/fleet/report", json=report, headers={"X-Agent-Hooks-Host": "host-victim"})
    assert r.status_code == 200, r.text
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    (downloads / "CLAUDE.md").write_text("# the attacker's rules\n")
    write = dict(fixture_payload("PostToolUse-Write.json"), session_id="s-rebound", cwd=str(downloads),
                 tool_use_id="toolu_rebound", tool_input={"file_path": str(downloads / "CLAUDE.md"), "content": "x"},
                 tool_response={"filePath": str(downloads / "CLAUDE.md")})
    return {"card": card, "approval": "rebound0001", "hook_body": json.dumps(write).encode()}


# What each route is sent: names that exist (so a request let in would change something) and a body it acts on.
def _params(route: AppRoute, victims: dict[str, Any]) -> dict[str, str]:
    if route.template.startswith("/api/approvals/"):
        return {"id": victims["approval"]}
    return {"id": victims["card"], "ref": victims["card"], "action": "cancel", "task_id": "T-rebound",
            "event": "PostToolUse"}


def _body(route: AppRoute, method: str, victims: dict[str, Any]) -> bytes:
    if method not in ("POST", "PATCH", "PUT"):
        return b""
    bodies = {
        "/api/hooks/ingest": {"tmux_session": "agent-rebound", "event": "start"},
        "/api/hooks/sessions": {"tmux_session": "agent-rebound-2"},
        "/api/hooks/sessions/{id}": {"state": "completed"},
        "/api/sessions/{ref}/reply": {"text": "rm -rf the branch"},
        "/api/sessions/{ref}/{action:str}": {"reason": "rebound"},
        "/api/tasks/{task_id}/{action:str}": {"reason": "rebound"},
        "/api/approvals/{id}": {"decision": "allow"},
        "/api/fleet/replies": {"results": [{"seq": 1, "error": None}]},
        "/api/fleet/report": {"cards": [{"session_id": "s-rebound-report"}]},
    }
    doc = bodies.get(route.template)
    return json.dumps(doc).encode() if doc is not None else victims["hook_body"]


def test_a_rebound_host_is_refused_on_every_route_from_the_owners_uid(center: Center, tmp_path: Path) -> None:
    home = Path(center.env["AGENT_HOOKS_HOME"])
    victims = _victims(center, tmp_path)
    port = center.port
    routes = app_routes(tmp_path / "walk") + [AppRoute("http", "/no-such-route", ("GET", "POST"))]
    assert {"/hooks/{event}", "/api/live", "/api/approvals/{id}", "/status"} <= {r.template for r in routes}
    before = _snapshot(home)
    refused_before = request(port, "GET", "/status").json()["counts"].get("refused_at_door", 0)
    hosts = rebound_hosts(port)
    let_in: list[str] = []
    sent = 0
    for route in routes:
        path = route.path(**_params(route, victims))
        if route.kind == "websocket":
            for n, host in enumerate(h for h in hosts if h):  # (the handshake helper cannot send an empty Host)
                for origin in ([None, f"http://{host}"] if n < 4 else [None]):
                    sent += 1
                    status = ws_handshake(port, path, origin=origin, host=host)
                    if status != 403:
                        let_in.append(f"WebSocket {path} Host {host!r} Origin {origin}: {status}")
            continue
        for method in route.methods:
            body = _body(route, method, victims)
            headers = {"Content-Type": "application/json", "X-Agent-Hooks-Host": "host-victim"}
            for n, host in enumerate(hosts):
                # The page may also send its own origin (it is same-origin to the browser): refused alike.
                for origin in ([None, f"http://{host}"] if n < 4 else [None]):
                    sent += 1
                    extra = dict(headers, Origin=origin) if origin else headers
                    answer = request(port, method, path, extra, body, host=host)
                    if answer.status != 403 or "error" not in answer.json():
                        let_in.append(f"{method} {path} Host {host!r} Origin {origin}: {answer.status}"
                                      f" {answer.body[:120]!r}")
    assert not let_in, "\n".join(let_in)
    # Nothing changed: the stored CLAUDE.md, the card, the request, everything else.
    assert _snapshot(home) == before
    # And the door itself refused them (not a route that happened to answer 403).
    refused = request(port, "GET", "/status").json()["counts"].get("refused_at_door", 0)
    assert refused - refused_before == sent
    # The owner's own programs, by every loopback literal with the server's port, still get in.
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
        assert request(port, "GET", "/status", host=host).status == 200, host
        assert ws_handshake(port, "/api/live", host=host) == 101, host
    assert request(port, "GET", "/api/board", {"Origin": f"http://localhost:{port}"},
                   host=f"localhost:{port}").status == 200


def test_a_configured_name_needs_the_token_and_its_lookalikes_are_refused(tmp_path: Path) -> None:
    """``[fleet] names`` lets other hosts (and a browser on another host) reach the server by its name;
    the owner's own uid must still show the token by that name, and a name that merely contains it is
    refused whatever it shows."""
    server = Center(tmp_path / "cc", env={"AGENT_HOOKS_FLEET_TOKEN": TOKEN,
                                          "AGENT_HOOKS__FLEET__NAMES": '["CC.example.org", "fd00::7"]'}).start()
    try:
        port = server.port
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        for host in (f"cc.example.org:{port}", "cc.example.org", "CC.Example.Org:443", f"[fd00::7]:{port}"):
            assert request(port, "GET", "/api/board", host=host).status == 403, host  # the owner, no token
            assert request(port, "GET", "/api/board", bearer, host=host).status == 200, host
        assert ws_handshake(port, "/api/live", host=f"cc.example.org:{port}") == 403
        for host in (f"cc.example.org.evil.example:{port}", f"evil.cc.example.org:{port}", f"cc.example.org:{port}x",
                     f"[fd00::7].evil:{port}", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}"):
            answer = request(port, "GET", "/api/board", bearer, host=host)
            assert answer.status == 403 and "[fleet] names" in answer.json()["error"], (host, answer)
        # The browser's way in by name: the token once, then its cookie.
        got = request(port, "GET", f"/?token={TOKEN}", host=f"cc.example.org:{port}")
        assert got.status == 303
        cookie = got.headers["set-cookie"].split(";")[0]
        assert request(port, "GET", "/api/board", {"Cookie": cookie}, host=f"cc.example.org:{port}").status == 200
    finally:
        server.stop()


def test_the_names_setting_is_checked(tmp_path: Path) -> None:
    from agent_hooks import config

    cfg = config.defaults()
    cfg["fleet"]["names"] = ["cc.example.org", "http://cc.example.org/", 7, ""]
    problems = config.validate(cfg)
    assert [p for p in problems if p.startswith("fleet.names")] == [
        "fleet.names[1] must be a host name or address (cc.example.org, 10.0.0.5), got 'http://cc.example.org/'",
        "fleet.names[2] must be a host name or address (cc.example.org, 10.0.0.5), got 7",
        "fleet.names[3] must be a host name or address (cc.example.org, 10.0.0.5), got ''",
    ]


def test_a_peer_address_is_an_address_never_a_name() -> None:
    """The caller's side: ``is_loopback`` judges the socket's peer address, and a name is no address."""
    from agent_hooks.server import access

    for address in ("127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "::ffff:127.0.0.1"):
        assert access.is_loopback(address), address
    for name in ("127.evil.example", "127.0.0.1.evil.example", "localhost", "localhost.evil.example", "127.",
                 "127.0.0.1:80", "[::1]", "10.0.0.1", "", None):
        assert not access.is_loopback(name), name


def test_doctor_says_when_a_server_for_other_hosts_has_no_names(tmp_path: Path) -> None:
    home = tmp_path / "agent-hooks"
    env = {"AGENT_HOOKS_HOME": str(home), "HOME": str(tmp_path / "user"), "AGENT_HOOKS_FLEET_TOKEN": TOKEN,
           "AGENT_HOOKS__FLEET__LISTEN": "0.0.0.0", "AGENT_HOOKS__FORWARD__ENABLED": "false"}

    def board_lines(extra: dict[str, str]) -> list[str]:
        proc = agent_hook("doctor", "--json", "--no-run", env={**env, **extra}, check=False)
        return [c["summary"] for c in json.loads(proc.stdout)["checks"] if c["area"] == "board"]

    assert any("[fleet] names is empty" in line for line in board_lines({})), board_lines({})
    assert not any("[fleet] names" in line for line in board_lines({"AGENT_HOOKS__FLEET__NAMES": '["cc.example.org"]'}))
