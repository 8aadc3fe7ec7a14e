"""What keeps one command center cheap under a fleet (docs/server-performance.md, bench/bench_fleet_scale.py).

* An answer for one host wakes that host's long poll only: /status counts the polls woken, one.
* Past ``board.max_sessions`` the board holds still: the cards left out are counted (``cards_left_out``),
  and the full rebuild that runs every few seconds neither brings them in nor sends anything away, however
  active they are.
* The fleet's pending list is built again only when requests change, not for every report.
* A paired host's credential is read from the store once, not on every request.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from support.center import Center
from support.pairing import bearer, host_credential

FAR = 4_000_000_000.0


def _counts(center: Center) -> dict[str, int]:
    return center.http.get("/status").json()["counts"]  # type: ignore[no-any-return]


def _report(center: Center, host: str, cards: list[dict[str, Any]], requests: list[dict[str, Any]] | None = None,
            client: httpx.Client | None = None) -> httpx.Response:
    body: dict[str, Any] = {"cards": cards}
    headers = {"X-Agent-Hooks-Host": host} if client is None else {}
    if requests is not None:
        body["approvals"] = requests
    r = (client or center.http).post("/api/fleet/report", json=body, headers=headers)
    assert r.status_code == 200, r.text
    return r


def _request(rid: str, session: str) -> dict[str, Any]:
    return {"id": rid, "kind": "permission", "state": "pending", "session_id": session, "tool_name": "Bash",
            "tool_input": json.dumps({"command": "make clean"}), "created_at": time.time(), "expires_at": FAR}


def _card(sid: str, **extra: Any) -> dict[str, Any]:
    return {"session_id": sid, "tmux_session": f"agent-{sid}", "agent": "claude", "own_state": "live", **extra}


def test_an_answer_wakes_its_own_hosts_long_poll_only(tmp_path: Path) -> None:
    center = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "center"}).start()
    try:
        _report(center, "host-a", [_card("a-1")], [_request("req-of-a", "a-1")])
        answered: dict[str, Any] = {}
        polls: dict[str, httpx.Response] = {}

        def poll(host: str) -> None:
            with httpx.Client(base_url=center.base, timeout=30, trust_env=False) as c:
                first = c.get("/api/fleet/controls", params={"host": host, "wait": "0"}).json()
                polls[host] = c.get("/api/fleet/controls", params={"host": host, "epoch": first["epoch"],
                                                                   "wait": "15"})
                if host == "host-a":  # what its Subscriber does: say what became of the answer
                    [control] = polls[host].json()["controls"]
                    c.post("/api/fleet/replies", headers={"X-Agent-Hooks-Host": "host-a"},
                           json={"results": [{"seq": control["seq"], "status": 200, "error": None}]})

        pollers = [threading.Thread(target=poll, args=(h,), daemon=True) for h in ("host-a", "host-b", "host-c")]
        for t in pollers:
            t.start()
        # All three are waiting on the center.
        deadline = time.time() + 10
        while len(_waiting(center)) < 3:
            assert time.time() < deadline, _waiting(center)
            time.sleep(0.05)
        time.sleep(0.5)  # their second polls, which wait
        before = _counts(center).get("fleet_polls_woken", 0)

        def answer() -> None:
            answered["r"] = center.http.post("/api/approvals/req-of-a", json={"decision": "allow"})

        person = threading.Thread(target=answer, daemon=True)
        person.start()
        pollers[0].join(10)
        person.join(10)
        assert polls["host-a"].status_code == 200 and polls["host-a"].json()["controls"][0]["kind"] == "approval"
        assert answered["r"].status_code == 200, answered["r"].text
        # One wake-up: host A's. B and C still wait, never woken into a write of their own.
        assert _counts(center).get("fleet_polls_woken", 0) - before == 1, _counts(center)
        assert pollers[1].is_alive() and pollers[2].is_alive()
    finally:
        center.stop()


def _waiting(center: Center) -> list[str]:
    """The hosts whose long poll the center holds now (fleet_hosts rows seen in the last seconds)."""
    import sqlite3

    with sqlite3.connect(center.home / "store.db") as conn:
        return [r[0] for r in conn.execute("SELECT host FROM fleet_hosts WHERE last_seen_at > ?", (time.time() - 20,))]


def test_past_max_sessions_the_board_holds_still_and_says_how_many_are_left_out(tmp_path: Path) -> None:
    center = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "center",
                                          "AGENT_HOOKS__BOARD__MAX_SESSIONS": "3"}).start()
    try:
        for i in range(5):  # one at a time: each is new when it comes, and takes a place
            _report(center, "host-a", [_card(f"s{i}")])
            time.sleep(0.05)
        board = center.http.get("/api/board").json()
        deadline = time.time() + 10
        while board.get("cards_left_out") != 2:
            assert time.time() < deadline, board
            time.sleep(0.05)
            board = center.http.get("/api/board").json()
        shown = {c["tmux_session"] for c in board["cards"]}
        assert len(shown) == 3 and shown == {"agent-s2", "agent-s3", "agent-s4"}, shown
        with center.live() as ws:
            hello = json.loads(ws.recv(timeout=10))
            assert hello["type"] == "hello" and hello["cards_left_out"] == 2
            assert {c["tmux_session"] for c in hello["cards"]} == shown
            # The cards left out become the most active ones, and every card changes; a full rebuild
            # (every 5 s) passes. Nothing leaves the board, nothing left out comes in.
            for round_ in range(3):
                for i in range(5):
                    assert center.ingest({"tmux_session": f"agent-s{i}", "event": "tool_use",
                                          "metadata": f"round {round_}"},
                                         headers={"X-Agent-Hooks-Host": "host-a"}).status_code == 200
                _report(center, "host-a", [_card(f"s{i}", tool_calls=round_ + 1) for i in range(5)])
                time.sleep(2.2)
            got = _drain(ws, 1.0)
        removed = [m for m in got if m["type"] == "removed"]
        cards = {m["card"]["tmux_session"] for m in got if m["type"] == "card"}
        assert not removed, removed
        assert cards == shown, cards  # the shown ones changed and were sent; the others were not
        assert {c["tmux_session"] for c in center.http.get("/api/board").json()["cards"]} == shown
    finally:
        center.stop()


def _drain(ws: Any, quiet_s: float) -> list[dict[str, Any]]:
    got = []
    while True:
        try:
            got.append(json.loads(ws.recv(timeout=quiet_s)))
        except TimeoutError:
            return got


def test_the_pending_list_is_built_when_requests_change_not_for_every_report(tmp_path: Path) -> None:
    center = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "center"}).start()
    try:
        requests = [_request("req-1", "a-1")]
        _report(center, "host-a", [_card("a-1")], requests)
        deadline = time.time() + 10
        while not [p for p in center.http.get("/api/approvals").json()["approvals"] if p["id"] == "req-1"]:
            assert time.time() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
        before = _counts(center)["fleet_pending_built"]
        for i in range(8):  # the same requests, changing cards: nothing for the list to do
            _report(center, "host-a", [_card("a-1", tool_calls=i)], requests)
            time.sleep(0.15)
        assert _counts(center)["fleet_pending_built"] == before, _counts(center)
        _report(center, "host-a", [_card("a-1")], [*requests, _request("req-2", "a-1")])
        deadline = time.time() + 10
        while _counts(center)["fleet_pending_built"] == before:
            assert time.time() < deadline, _counts(center)
            time.sleep(0.05)
    finally:
        center.stop()


def test_a_paired_hosts_credential_is_read_once_not_per_request(tmp_path: Path) -> None:
    center = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "center"}).start()
    try:
        credential = host_credential(center, "host-p")
        with httpx.Client(base_url=center.base, timeout=10, trust_env=False, headers=bearer(credential)) as as_p:
            _report(center, "host-p", [_card("p-1")], client=as_p)
            before = _counts(center).get("credential_read", 0)
            for i in range(10):
                _report(center, "host-p", [_card("p-1", tool_calls=i)], client=as_p)
                assert as_p.get("/api/fleet/controls", params={"wait": "0"}).status_code == 200
            assert _counts(center).get("credential_read", 0) - before == 0, _counts(center)
    finally:
        center.stop()
