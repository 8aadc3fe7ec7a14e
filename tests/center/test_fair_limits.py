"""Fair limits: one host's flood cannot push the center's own request (or another host's) out of the list,
and hosts, cards and rows are capped, with what was left out said.

The flood: host B reports 500 pending requests dated ``created_at = 1`` (the list is oldest first and
capped), then a person's request arrives on the command center itself from its own hook. The request
is listed, and the answer says how many of B's were left out. Invented hosts past ``fleet.max_hosts``
are refused (429) and nothing of them is stored.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.center import Center, messages
from support.repo import fixture_payload
from support.scripts import BIN, EXECUTABLES, agent_hook

PERMISSION = {**fixture_payload("permission_request_bash.json", "2.1.330"), "session_id": "center-asks"}
FAR = 4_000_000_000.0  # expires long after the test


def decoys(n: int, first: int = 0, prefix: str = "decoy") -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i:07d}", "kind": "permission", "state": "pending", "session_id": f"s-{prefix}-{i}",
             "tool_name": "Bash", "tool_input": json.dumps({"command": f"echo {i}"}), "created_at": 1.0,
             "expires_at": FAR} for i in range(first, first + n)]


def report(center: Center, host: str, cards: list[dict[str, Any]] | None = None,
           requests: list[dict[str, Any]] | None = None, full: bool = True) -> Any:
    body: dict[str, Any] = {"cards": cards or []}
    if requests is not None:
        body["approvals"], body["approvals_full"] = requests, full
    return center.http.post("/api/fleet/report", json=body, headers={"X-Agent-Hooks-Host": host})


def flood(center: Center, host: str, n: int) -> None:
    """``n`` pending requests from ``host``, in reports that fit the API's body limit (not full: each adds)."""
    for first in range(0, n, 100):
        r = report(center, host, requests=decoys(min(100, n - first), first, prefix=host.replace("-", "")),
                   full=False)
        assert r.status_code == 200, r.text


class HeldRequest:
    """The center's own PermissionRequest hook (the installed executable), holding a request in its store."""

    def __init__(self, center: Center) -> None:
        env = {**os.environ, **center.env, "AGENT_HOOKS__APPROVALS__WAIT_S": "60"}
        self.proc = subprocess.Popen([str(BIN / EXECUTABLES["PermissionRequest"])], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(PERMISSION).encode())
        self.proc.stdin.close()
        self.proc.stdin = None

    def stop(self) -> None:
        self.proc.kill()
        self.proc.communicate(timeout=30)


def own_pending(home: Path) -> list[str]:
    with sqlite3.connect(home / "store.db") as conn:
        return [r[0] for r in conn.execute("SELECT id FROM approvals WHERE host = '' AND state = 'pending'")]


def wait_for(predicate: Any, timeout: float = 20.0, what: str = "") -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = predicate()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def center(tmp_path: Path) -> Iterator[Center]:
    server = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "cc"}).start()
    yield server
    server.stop()


def test_a_flood_from_one_host_cannot_push_out_the_centers_own_request(center: Center) -> None:
    home = Path(center.env["AGENT_HOOKS_HOME"])
    flood(center, "host-b", 500)
    held = HeldRequest(center)
    try:
        [mine] = wait_for(lambda: own_pending(home), what="the center's own request in its store")
        doc = wait_for(lambda: (lambda d: d if mine in {a["id"] for a in d["approvals"]} else None)(
            center.http.get("/api/approvals").json()), timeout=5, what="the center's own request listed")
        listed = doc["approvals"]
        # B keeps its newest 100 copies (fleet.max_requests_per_host); the answer says 400 were left out.
        assert sum(a["host"] == "host-b" for a in listed) == 100
        assert doc["left_out"] == {"host-b": 400}
        # The board's "Needs you" strip is told the same (its list follows the store within its poll).
        with center.live() as ws:
            def told(got: list[dict[str, Any]]) -> bool:
                last = got[-1] if got else {}
                return mine in {a["id"] for a in last.get("approvals") or []} and \
                    (last.get("approvals_left_out") or last.get("left_out")) == {"host-b": 400}
            messages(ws, told)
        # /api/fleet/status and doctor show the count; the server's log said it.
        status = center.http.get("/api/fleet/status").json()
        assert status["limits"]["left_out"]["host-b"]["approvals"] == 400
        lines = [c["summary"] for c in json.loads(agent_hook("doctor", "--json", "--no-run", env=center.env,
                                                             check=False).stdout)["checks"] if c["area"] == "board"]
        assert any("host host-b: 400 pending request(s) left out" in line for line in lines), lines
        log = (home / "logs" / "server.log").read_text()
        assert "host host-b: 400 pending request(s) left out" in log
    finally:
        held.stop()


def test_the_list_takes_a_fair_share_of_each_host(tmp_path: Path) -> None:
    """With the per-host cap raised past the list's own size, the list itself is shared: the center's own
    requests first, then each host an equal share, a host that needs less leaving the rest to others."""
    server = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__MAX_REQUESTS_PER_HOST": "1000"}).start()
    try:
        flood(server, "host-b", 600)
        r = report(server, "host-c", requests=decoys(3, prefix="hostc"))
        assert r.status_code == 200, r.text
        doc = wait_for(lambda: (lambda d: d if any(a["host"] == "host-c" for a in d["approvals"]) else None)(
            server.http.get("/api/approvals").json()), what="host-c listed")
        hosts = [a["host"] for a in doc["approvals"]]
        assert (hosts.count("host-c"), hosts.count("host-b"), len(hosts)) == (3, 497, 500)
        assert doc["left_out"] == {"host-b": 103}
    finally:
        server.stop()


def _hosts_in_store(home: Path) -> set[str]:
    with sqlite3.connect(home / "store.db") as conn:
        return {r[0] for r in conn.execute("SELECT host FROM fleet_sessions WHERE host != '' UNION"
                                           " SELECT host FROM approvals WHERE host != '' UNION SELECT host FROM fleet_hosts")}


def test_invented_hosts_past_the_cap_are_refused(tmp_path: Path) -> None:
    server = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__MAX_HOSTS": "3"}).start()
    home = Path(server.env["AGENT_HOOKS_HOME"])
    try:
        for n in (1, 2, 3):
            r = report(server, f"host-{n}", cards=[{"session_id": f"s-{n}", "tool_calls": 1}],
                       requests=decoys(1, prefix=f"host{n}x"))
            assert r.status_code == 200, r.text
        refused = {
            "report": report(server, "host-4", cards=[{"session_id": "s-4"}], requests=decoys(2, prefix="host4x")),
            "ingest": server.ingest({"tmux_session": "agent-5", "event": "start"}, headers={"X-Agent-Hooks-Host": "host-5"}),
            "register": server.http.post("/api/hooks/sessions", json={"tmux_session": "agent-6"},
                                         headers={"X-Agent-Hooks-Host": "host-6"}),
            "controls": server.http.get("/api/fleet/controls", params={"host": "host-7", "wait": "0"}),
        }
        for route, r in refused.items():
            assert r.status_code == 429, (route, r.status_code, r.text)
            assert "fleet.max_hosts = 3" in r.json()["error"] and r.headers.get("retry-after"), (route, r.text)
        assert _hosts_in_store(home) == {"host-1", "host-2", "host-3"}
        # A host already kept goes on as before; this host's own sessions are never capped.
        assert server.ingest({"tmux_session": "agent-more", "event": "start"},
                             headers={"X-Agent-Hooks-Host": "host-1"}).status_code == 200
        assert server.ingest({"tmux_session": "agent-here", "event": "start"}).status_code == 200
        assert server.http.get("/api/fleet/controls", params={"host": "host-2", "wait": "0"}).status_code == 200
        counts = server.http.get("/api/fleet/status").json()["limits"]["left_out"]
        assert {h: c["refused"] for h, c in counts.items()} == {"host-4": 1, "host-5": 1, "host-6": 1, "host-7": 1}
    finally:
        server.stop()


def test_a_host_keeps_its_newest_cards_and_rows_in_all_are_capped(tmp_path: Path) -> None:
    server = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__MAX_CARDS_PER_HOST": "4",
                                          "AGENT_HOOKS__FLEET__MAX_ROWS": "7"}).start()
    home = Path(server.env["AGENT_HOOKS_HOME"])

    def cards(host: str) -> set[str]:
        with sqlite3.connect(home / "store.db") as conn:
            return {r[0] for r in conn.execute("SELECT session_id FROM fleet_sessions WHERE host = ?", (host,))}

    try:
        six = [{"session_id": f"b-{i}", "last_activity": 1000.0 + i} for i in range(6)]
        r = report(server, "host-b", cards=six)
        assert r.status_code == 200 and r.json()["left_out"]["cards"] == 2, r.text
        assert cards("host-b") == {"b-2", "b-3", "b-4", "b-5"}  # its newest four
        # A new session of B takes the place of B's least recently active card, never another host's.
        assert report(server, "host-c", cards=[{"session_id": "c-1"}]).status_code == 200
        time.sleep(0.01)
        assert report(server, "host-b", cards=[{"session_id": "b-2", "last_activity": 2000.0}]).status_code == 200
        assert server.ingest({"session_id": "b-new", "event": "start"},
                             headers={"X-Agent-Hooks-Host": "host-b"}).status_code == 200
        assert cards("host-b") == {"b-2", "b-4", "b-5", "b-new"} and cards("host-c") == {"c-1"}
        # Rows in all: 4 + 1 cards, 2 requests fit; the next new one from anyone is refused, and said.
        assert report(server, "host-c", requests=decoys(2, prefix="hostc")).status_code == 200
        r = report(server, "host-c", cards=[{"session_id": "c-2"}])
        assert r.status_code == 429 and "fleet.max_rows = 7" in r.json()["error"], r.text
        r = server.ingest({"session_id": "c-3", "event": "start"}, headers={"X-Agent-Hooks-Host": "host-c"})
        assert r.status_code == 429 and "fleet.max_rows = 7" in r.json()["error"], r.text
        assert cards("host-c") == {"c-1"}
        # This host's own cards are not other hosts' rows: never refused.
        assert server.ingest({"tmux_session": "agent-own", "event": "start"}).status_code == 200
    finally:
        server.stop()


def test_the_boards_strip_says_what_the_limits_left_out(center: Center) -> None:
    """The "Needs you" strip shows, live and after a reload, how many of a host's requests are not listed."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")
    from support.browser import chromium_page

    with chromium_page(sync_api, 1400, 800) as page:
        page.goto(center.base + "/")
        page.wait_for_selector("#conn[data-state=live]", timeout=15000)
        flood(center, "host-b", 130)  # 100 kept (fleet.max_requests_per_host), 30 left out
        page.wait_for_function("document.getElementById('needs-left').textContent.includes('30 of host-b')",
                               timeout=10000)
        assert page.inner_text("#needs-n") == "100"
        page.reload()
        page.wait_for_selector("#conn[data-state=live]", timeout=15000)
        page.wait_for_function("document.getElementById('needs-left').textContent.includes('30 of host-b')",
                               timeout=10000)


def test_a_host_whose_requests_come_and_go_keeps_a_bounded_history(tmp_path: Path) -> None:
    """Each full report without the last one's requests settles their copies (withdrawn): a host cycling
    new requests must not grow the center's history without end."""
    server = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__MAX_REQUESTS_PER_HOST": "5"}).start()
    home = Path(server.env["AGENT_HOOKS_HOME"])
    try:
        for round_ in range(6):
            r = report(server, "host-b", requests=decoys(5, first=round_ * 5, prefix="hostb"))
            assert r.status_code == 200, r.text
        with sqlite3.connect(home / "store.db") as conn:
            pending, settled = conn.execute("SELECT sum(state = 'pending'), sum(state != 'pending') FROM approvals"
                                            " WHERE host = 'host-b'").fetchone()
        assert (pending, settled) == (5, 5)  # the last round pending, the one before as history
    finally:
        server.stop()
