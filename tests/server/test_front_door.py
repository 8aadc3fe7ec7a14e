"""The server's front door: every route it registers refuses a web page's requests alike.

A web page the user happens to visit can send a "simple" cross-site POST to loopback
(``Origin: http://evil.example``, ``Content-Type: text/plain``: no preflight), and a page whose
name was rebound to 127.0.0.1 (DNS rebinding) is same-origin to the browser and can read the
answers, but it cannot choose the ``Host`` it sends. Claude Code's http hooks send no Origin
and a loopback Host. The routes are read from the app, not listed here.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.center import Center
from support.repo import fixture_payload
from support.routes import AppRoute, app_routes, headers_only, request, ws_handshake
from support.scripts import agent_hook

EVIL = "http://evil.example"


@pytest.fixture
def center(tmp_path: Path) -> Iterator[Center]:
    server = Center(tmp_path / "agent-hooks").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")  # one per worker: the run interleaves modules (see conftest)
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Center]:
    """One server for the tests that only knock and read answers (counters as deltas)."""
    server = Center(tmp_path_factory.mktemp("door") / "agent-hooks").start()
    yield server
    server.stop()


def _routes(home: Path) -> list[AppRoute]:
    routes = app_routes(home)
    templates = {r.template for r in routes}
    # The walk found the routes the exploits used, the board's WebSocket and its static files.
    assert {"/hooks/{event}", "/hooks", "/status", "/health", "/api/live", "/static"} <= templates, templates
    # Everything else too, a path no route takes included: the door is in front of the router.
    return routes + [AppRoute("http", "/no-such-route", ("GET", "POST"))]


def test_every_route_refuses_a_cross_site_post_and_a_rebound_host(door: Center, tmp_path: Path) -> None:
    port = door.port
    rebound = f"evil.example:{port}"
    hook_body = json.dumps(fixture_payload("PostToolUse-Bash.json")).encode()
    refused: list[str] = []
    let_in: list[str] = []
    for route in _routes(tmp_path / "walk"):
        path = route.path()
        if route.kind == "websocket":
            for what, kwargs in (("Origin", {"origin": EVIL}), ("Host", {"host": rebound}),
                                 ("rebound page", {"host": rebound, "origin": f"http://{rebound}"})):
                if ws_handshake(port, path, **kwargs) != 403:
                    let_in.append(f"WebSocket {path} with a cross-site {what}")
            assert ws_handshake(port, path) == 101  # and the board's own connection is taken
            continue
        # A web page's simple POST, whatever the route's own methods: the door answers before routing.
        answer = request(port, "POST", path, {"Origin": EVIL, "Content-Type": "text/plain"}, hook_body)
        (refused if answer.status == 403 else let_in).append(f"POST {path} from {EVIL}: {answer.status}")
        # Refused before its body is read: a page declaring a gibibyte gets its 403 on the headers alone.
        status, _, _, took = headers_only(port, "POST", path, 1 << 30, extra=f"Origin: {EVIL}\r\n")
        if status != 403 or took > 5:
            let_in.append(f"POST {path} from {EVIL} declaring 1 GiB: {status} after {took:.1f} s")
        for method in route.methods:
            body = hook_body if method in ("POST", "PATCH") else b""
            cases = {
                "Origin": dict(headers={"Origin": EVIL}),
                "Origin null": dict(headers={"Origin": "null"}),
                "rebound Host": dict(host=rebound),
                "rebound page": dict(host=rebound, headers={"Origin": f"http://{rebound}"}),
            }
            for what, kwargs in cases.items():
                answer = request(port, method, path, body=body, **kwargs)  # type: ignore[arg-type]
                if answer.status != 403 or "error" not in answer.json():
                    let_in.append(f"{method} {path} with a cross-site {what}: {answer.status} {answer.body[:120]!r}")
                elif answer.headers.get("content-type") != "application/json":
                    let_in.append(f"{method} {path}: the refusal is not JSON")
            # The same request as a local program sends it (no Origin, a loopback Host) is not refused.
            plain = request(port, method, path, {"Content-Type": "application/json"}, body)
            if plain.status == 403:
                let_in.append(f"{method} {path} refused to a plain loopback caller: {plain.body[:120]!r}")
    assert not let_in, "\n".join(let_in)
    assert len(refused) >= 17, refused


def test_the_board_own_pages_and_a_named_loopback_host_still_work(door: Center) -> None:
    """Same-origin requests of the board (Origin = its own address) and every loopback spelling of Host."""
    port = door.port
    own = f"http://127.0.0.1:{port}"
    assert request(port, "GET", "/api/board", {"Origin": own}).status == 200
    r = request(port, "POST", "/api/hooks/ingest", {"Origin": own, "Content-Type": "application/json"},
                json.dumps({"tmux_session": "agent-own", "event": "start"}).encode())
    assert r.status == 200, r.body
    for host in (f"localhost:{port}", f"[::1]:{port}", f"127.0.0.1:{port}"):
        assert request(port, "GET", "/status", host=host).status == 200, host
    assert ws_handshake(port, "/api/live", origin=own) == 101


def _claude_code_headers() -> dict[str, str]:
    """What the client's http hooks send (reference: claude-code-hooks.md, "http hooks"): JSON, axios, no Origin."""
    return {"Content-Type": "application/json", "User-Agent": "axios/1.8.4", "Accept": "application/json"}


def _identity(home: Path) -> list[tuple[int, str, str]]:
    with sqlite3.connect(home / "store.db") as conn:
        return conn.execute("SELECT version, source, content FROM identity_versions WHERE agent = 'default'"
                            " AND name = 'CLAUDE.md' ORDER BY version").fetchall()


def _profile(word: str) -> str:
    return f"# {word}\n\n" + "\n".join(f"- {word} rule {i}: keep promises and write things down." for i in range(30)) + "\n"


def test_a_web_page_cannot_replace_the_stored_claude_md(center: Center, tmp_path: Path) -> None:
    """The issue's first exploit: a cross-site POST to /hooks/PostToolUse naming a Write of a downloaded
    CLAUDE.md was stored as the agent's self edit, given to every later session."""
    home = Path(center.env["AGENT_HOOKS_HOME"])
    ours = tmp_path / "ours.md"
    ours.write_text(_profile("ours"))
    agent_hook("identity", "set", "default", "CLAUDE.md", "--file", str(ours), env=center.env)
    before = _identity(home)
    assert [(v, s) for v, s, _ in before] == [(1, "manual")]
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    (downloads / "CLAUDE.md").write_text(_profile("the attacker"))
    post = dict(fixture_payload("PostToolUse-Write.json"), session_id="s-web", cwd=str(downloads),
                tool_use_id="toolu_web", tool_input={"file_path": str(downloads / "CLAUDE.md"), "content": "x"},
                tool_response={"filePath": str(downloads / "CLAUDE.md")})
    body = json.dumps(post).encode()
    port = center.port
    cross_site = request(port, "POST", "/hooks/PostToolUse", {"Origin": EVIL, "Content-Type": "text/plain"}, body)
    rebound = request(port, "POST", "/hooks/PostToolUse", {"Origin": f"http://evil.example:{port}",
                                                           "Content-Type": "text/plain"}, body,
                      host=f"evil.example:{port}")
    assert (cross_site.status, rebound.status) == (403, 403)
    assert _identity(home) == before
    # The very same body, as Claude Code sends it, is a self edit: the page's POST was a real exploit.
    mine = request(port, "POST", "/hooks/PostToolUse", _claude_code_headers(), body)
    assert mine.status == 200 and "x-agent-hooks-problem" not in mine.headers, mine
    assert [s for _, s, _ in _identity(home)] == ["manual", "self_edit"]


def test_a_web_page_cannot_write_into_another_directory(center: Center, tmp_path: Path) -> None:
    """The second exploit: a cross-site SessionStart with another cwd wrote the agent's files there
    and renamed the user's own CLAUDE.md."""
    home = Path(center.env["AGENT_HOOKS_HOME"])
    ours = tmp_path / "ours.md"
    ours.write_text(_profile("ours"))
    agent_hook("identity", "set", "default", "CLAUDE.md", "--file", str(ours), env=center.env)
    project = tmp_path / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text("the user's own project notes\n")
    start = dict(fixture_payload("SessionStart-startup.json"), session_id="s-web-start", cwd=str(project))
    body = json.dumps(start).encode()
    port = center.port

    def listing() -> dict[str, str]:
        return {p.name: p.read_text() for p in project.iterdir()}

    before = listing()
    for headers, host in (({"Origin": EVIL, "Content-Type": "text/plain"}, None),
                          ({"Origin": "null", "Content-Type": "text/plain"}, None),
                          ({"Content-Type": "text/plain"}, f"evil.example:{port}")):
        assert request(port, "POST", "/hooks/SessionStart", headers, body, host=host).status == 403
    assert listing() == before
    with sqlite3.connect(home / "store.db") as conn:
        assert conn.execute("SELECT count(*) FROM sessions WHERE session_id = 's-web-start'").fetchone()[0] == 0
    # Claude Code's own SessionStart there does write (and keeps the user's file as a backup).
    assert request(port, "POST", "/hooks/SessionStart", _claude_code_headers(), body).status == 200
    assert listing() != before


def test_status_and_health_tell_a_rebound_page_nothing(door: Center) -> None:
    """The third: with a rebinding Host, /status handed out the pid and the store's path."""
    port = door.port
    mine = request(port, "GET", "/status").json()
    pid, worker, store = str(mine["pid"]), str(mine["worker_pid"]), mine["store"]
    for path in ("/status", "/health"):
        for headers in ({}, {"Origin": f"http://evil.example:{port}"}):
            answer = request(port, "GET", path, headers, host=f"evil.example:{port}")
            assert answer.status == 403, (path, answer)
            text = answer.body.decode()
            assert pid not in text and worker not in text and store not in text and "rebinding" in text, text
    assert door.status()["up"]  # and `agent-hook server status` (no Origin, loopback Host) still reads it


def test_a_fleet_token_lets_a_named_host_in(tmp_path: Path) -> None:
    """A browser on another host reaches the board by its name (``http://cc:47821/``) with the fleet
    token; the token, which a rebound page does not have, is what lets a non-loopback Host in."""
    token = "t0ken-front-door"
    center = Center(tmp_path / "cc", env={"AGENT_HOOKS_FLEET_TOKEN": token,
                                          "AGENT_HOOKS__FLEET__NAMES": '["cc.example"]'}).start()
    try:
        port = center.port
        host = f"cc.example:{port}"
        assert request(port, "GET", "/api/board", host=host).status == 403
        assert request(port, "GET", "/api/board", {"Authorization": "Bearer wrong"}, host=host).status == 403
        assert request(port, "GET", "/api/board", {"Authorization": f"Bearer {token}"}, host=host).status == 200
        got = request(port, "GET", f"/?token={token}", host=host)
        assert got.status == 303 and token in got.headers.get("set-cookie", "")
        cookie = got.headers["set-cookie"].split(";")[0]
        assert request(port, "GET", "/api/board", {"Cookie": cookie}, host=host).status == 200
        # The token does not excuse a cross-site Origin.
        assert request(port, "GET", "/api/board", {"Authorization": f"Bearer {token}", "Origin": EVIL},
                       host=host).status == 403
    finally:
        center.stop()


def test_the_door_counts_what_it_refuses(door: Center) -> None:
    port = door.port
    before = request(port, "GET", "/status").json()["counts"].get("refused_at_door", 0)
    request(port, "POST", "/hooks/PreToolUse", {"Origin": EVIL, "Content-Type": "text/plain"}, b"{}")
    counts: dict[str, Any] = request(port, "GET", "/status").json()["counts"]
    assert counts.get("refused_at_door") == before + 1, counts
