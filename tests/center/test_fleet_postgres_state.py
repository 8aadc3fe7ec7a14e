"""What several command centers on one PostgreSQL share rather than each keep in its own process.

Two center processes on one database (a cluster the tests start themselves, support/postgres.py):

* what the limits kept out (requests left out, hosts refused) is counted in the fleet store by whichever
  center saw it, and every center shows the fleet's counts (/api/approvals, /api/fleet/status);
* the fleet's budgets are counted by one center at a time (an advisory lock it holds while it lives), the
  other takes its counts from the store, and takes the counting over when the first one dies;
* a host's word on an answer too large for a notification between centers (NOTIFY's payload is under
  8000 bytes) reaches the center where the person waits, whole;
* a host's report wakes the other centers once per card that changed, and not at all when nothing did
  (a report rewrites when each card was reported: that alone notifies nobody).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_hooks import schema
from agent_hooks.center import fleetstore, limits

from support.center import Center
from support.waiting import wait_for

FAR = 4_000_000_000.0  # expires long after the test


def decoys(n: int, prefix: str) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i:05d}", "kind": "permission", "state": "pending", "session_id": f"s-{prefix}-{i}",
             "tool_name": "Bash", "tool_input": json.dumps({"command": f"echo {i}"}), "created_at": 1.0 + i,
             "expires_at": FAR} for i in range(n)]


def report(center: Center, host: str, cards: list[dict[str, Any]] | None = None,
           requests: list[dict[str, Any]] | None = None) -> Any:
    body: dict[str, Any] = {"cards": cards or []}
    if requests is not None:
        body["approvals"] = requests
    return center.http.post("/api/fleet/report", json=body, headers={"X-Agent-Hooks-Host": host})


def two_centers(tmp_path: Path, db: str, **settings: str) -> tuple[Center, Center]:
    env = {"AGENT_HOOKS__CENTER__DATABASE": db, **settings}
    first = Center(tmp_path / "center-1", env={"AGENT_HOOKS__FLEET__HOST": "center-1", **env}).start()
    try:
        second = Center(tmp_path / "center-2", env={"AGENT_HOOKS__FLEET__HOST": "center-2", **env}).start()
    except BaseException:
        first.stop()
        raise
    return first, second


@pytest.fixture
def limited(tmp_path: Path, fleet_db: str) -> Iterator[tuple[Center, Center]]:
    """Two centers that keep 2 other hosts and 10 pending requests of each."""
    first, second = two_centers(tmp_path, fleet_db, AGENT_HOOKS__FLEET__MAX_HOSTS="2",
                                AGENT_HOOKS__FLEET__MAX_REQUESTS_PER_HOST="10")
    try:
        yield first, second
    finally:
        second.stop()
        first.stop()


@pytest.fixture
def fleet_conn(center_db: str, tmp_path: Path) -> Iterator[Any]:
    """A connection to a migrated fleet store of each backend: a SQLite store, then a PostgreSQL database."""
    if center_db:
        store = fleetstore.PgStore(center_db)
        yield store.conn
        store.close()
        return
    import sqlite3

    schema.migrate(str(tmp_path / "store.db"))
    conn = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    yield conn
    conn.close()


def test_the_counts_of_what_was_left_out_add_up_and_are_forgotten_after_a_day(fleet_conn: Any) -> None:
    conn, day = fleet_conn, limits.LEFT_OUT_KEPT_S
    limits.count_left_out(conn, "host-b", 5, 0, 0, 1000.0)
    limits.count_left_out(conn, "host-b", None, 2, 1, 1010.0)  # the requests left out now: as they were
    assert limits.left_out_counts(conn, 1010.0)["host-b"] == {"approvals": 5, "cards": 2, "refused": 1, "since": 1000.0}
    limits.count_left_out(conn, "host-c", None, 0, 1, 1020.0)
    limits.count_left_out(conn, "host-b", 3, 0, 1, 1030.0)
    assert limits.left_out_counts(conn, 1040.0) == {
        "host-b": {"approvals": 3, "cards": 2, "refused": 2, "since": 1000.0},
        "host-c": {"approvals": 0, "cards": 0, "refused": 1, "since": 1020.0}}
    # A day after the last count, a host is forgotten (read, and on the next count, removed).
    assert set(limits.left_out_counts(conn, 1025.0 + day)) == {"host-b"}
    limits.count_left_out(conn, "host-d", None, 0, 1, 1040.0 + day)
    assert set(limits.left_out_counts(conn, 1040.0 + day)) == {"host-d"}
    # Past LEFT_OUT_HOSTS hosts, a new one is counted as "*" (invented names must not grow the table).
    with fleetstore.transaction(conn):  # (one commit: a thousand would cost seconds)
        for i in range(limits.LEFT_OUT_HOSTS):
            limits.count_left_out(conn, f"inv-{i}", None, 0, 1, 2000.0 + day)
    limits.count_left_out(conn, "one-more", 7, 0, 1, 2000.0 + day)
    counts = limits.left_out_counts(conn, 2000.0 + day)  # host-d and 999 of them filled it: the last one is "*"
    assert "one-more" not in counts and "inv-999" not in counts and "inv-998" in counts
    assert counts["*"]["refused"] == 2 and counts["*"]["approvals"] == 0
    assert len(counts) == limits.LEFT_OUT_HOSTS + 1


def kept_out(center: Center) -> dict[str, dict[str, Any]]:
    doc = center.http.get("/api/fleet/status").json()["limits"]["left_out"]
    return {h: {k: c[k] for k in ("approvals", "cards", "refused")} for h, c in doc.items()}


def test_what_the_limits_kept_out_is_the_fleets_count_on_every_center(limited: tuple[Center, Center]) -> None:
    first, second = limited
    # host-b's 15 requests go to the first center: its newest 10 are kept, 5 left out.
    assert report(first, "host-b", requests=decoys(15, "hostb")).status_code == 200
    assert report(first, "host-c", cards=[{"session_id": "c-1"}]).status_code == 200
    # Past max_hosts: host-d refused by the second center, host-e by the first.
    assert report(second, "host-d", cards=[{"session_id": "d-1"}]).status_code == 429
    assert first.ingest({"tmux_session": "agent-e", "event": "start"},
                        headers={"X-Agent-Hooks-Host": "host-e"}).status_code == 429
    want = {"host-b": {"approvals": 5, "cards": 0, "refused": 0}, "host-d": {"approvals": 0, "cards": 0, "refused": 1},
            "host-e": {"approvals": 0, "cards": 0, "refused": 1}}
    for center in (first, second):
        wait_for(lambda center=center: kept_out(center) == want, timeout=10, what="the fleet's counts",
                 show=lambda center=center: (center.env["AGENT_HOOKS__FLEET__HOST"], kept_out(center)))
    # The second center never took host-b's report, and says what was left out of its list all the same.
    doc = second.http.get("/api/approvals").json()
    assert doc["left_out"] == {"host-b": 5} and sum(a["host"] == "host-b" for a in doc["approvals"]) == 10
    # Counted again by the other center: added to the same count.
    assert first.http.get("/api/fleet/controls", params={"host": "host-f", "wait": "0"}).status_code == 429
    assert report(second, "host-f", cards=[{"session_id": "f-1"}]).status_code == 429
    wait_for(lambda: kept_out(second).get("host-f", {}).get("refused") == 2, timeout=10,
             what="host-f refused twice, once by each center")


def budgets_for(center: Center, host: str) -> dict[str, float]:
    """The budgets ``host``'s long poll on ``center`` carries: what the rest of the fleet spent on each."""
    r = center.http.get("/api/fleet/controls", params={"host": host, "wait": "0", "budgets": "none"})
    assert r.status_code == 200, r.text
    return {f"{b['kind']}:{b['key']}": b["elsewhere_usd"] for b in r.json()["budgets"]["budgets"]}


def counted(center: Center) -> int:
    return int(center.http.get("/status").json()["counts"].get("fleet_budgets_counted", 0))


def spend(center: Center, host: str, key: str, usd: float) -> None:
    row = [key, f"{host}-s1", None, "claude-opus-4-5", time.time() - 5, 1000, 500, 0, 0, 0, usd]
    r = center.http.post("/api/fleet/cost", json={"rows": [row], "sessions": {f"{host}-s1": {"agent": "alice"}}},
                         headers={"X-Agent-Hooks-Host": host})
    assert r.status_code == 200 and r.json()["stored"] == 1, r.text


def test_one_center_counts_the_budgets_and_another_takes_over_when_it_dies(tmp_path: Path, fleet_db: str) -> None:
    first, second = two_centers(tmp_path, fleet_db,
                                AGENT_HOOKS__BUDGETS__AGENTS=json.dumps({"alice": {"daily_usd": 50}}))
    try:
        spend(first, "host-b", "k-1", 1.25)
        for center in (first, second):
            wait_for(lambda center=center: budgets_for(center, "host-c") == {"agent:alice": 1.25},
                     what="host-b's spend in the budgets of both centers", show=lambda c=center: budgets_for(c, "host-c"))
        spend(second, "host-d", "k-2", 0.5)  # taken by the second center: counted all the same
        for center in (first, second):
            wait_for(lambda center=center: budgets_for(center, "host-c") == {"agent:alice": 1.75},
                     what="host-d's spend too", show=lambda c=center: budgets_for(c, "host-c"))
        # One of them counted; the other took its counts from the fleet store.
        time.sleep(0.5)
        counts = [counted(first), counted(second)]
        assert counts[0] > 0 and counts[1] == 0, counts
        doc = second.http.get("/status").json()["fleet_store"]
        assert doc["counts_budgets"] is False, doc
        # The counting center dies: the other takes the counting over (PostgreSQL let the lock go).
        first.stop()
        spend(second, "host-b", "k-3", 2.0)
        wait_for(lambda: budgets_for(second, "host-c") == {"agent:alice": 3.75}, timeout=15,
                 what="the second center counting once the first is gone", show=lambda: budgets_for(second, "host-c"))
        assert counted(second) > 0
    finally:
        second.stop()
        first.stop()


@pytest.fixture
def pair(tmp_path: Path, fleet_db: str) -> Iterator[tuple[Center, Center]]:
    first, second = two_centers(tmp_path, fleet_db)
    try:
        yield first, second
    finally:
        second.stop()
        first.stop()


def test_a_hosts_word_too_large_for_a_notification_reaches_the_other_center_whole(
        pair: tuple[Center, Center]) -> None:
    first, second = pair
    big = {"command": "printf '%s' " + "x" * 12_000, "description": "a long one"}
    request = {"id": "big-1", "kind": "permission", "state": "pending", "session_id": "x-s1", "tool_name": "Bash",
               "tool_input": json.dumps(big), "created_at": time.time(), "expires_at": FAR}
    assert report(first, "host-x", cards=[{"session_id": "x-s1"}], requests=[request]).status_code == 200
    wait_for(lambda: any(a["id"] == "big-1" for a in second.http.get("/api/approvals").json()["approvals"]),
             what="host-x's request listed by the second center")
    # A person answers on the second center; host-x holds its long poll on the first.
    answered: dict[str, Any] = {}
    person = threading.Thread(target=lambda: answered.update(r=second.http.post(
        "/api/approvals/big-1", json={"decision": "allow", "via": "board"}, timeout=15)))
    person.start()
    try:
        r = first.http.get("/api/fleet/controls", params={"host": "host-x", "after": "0", "wait": "10"}, timeout=15)
        [control] = [c for c in r.json()["controls"] if c["kind"] == "approval"]
        # host-x's word, with its row as answered: over 12 KB.
        row = {**request, "state": "allowed", "decision": "allow", "answered_by": "owner", "answered_at": time.time()}
        word = {"seq": control["seq"], "status": 200, "approval": row}
        assert len(json.dumps(word)) > 12_000
        r = first.http.post("/api/fleet/replies", json={"results": [word]}, headers={"X-Agent-Hooks-Host": "host-x"})
        assert r.status_code == 200, r.text
    finally:
        person.join(15)
    r = answered["r"]
    assert r.status_code == 200 and r.json()["applied"] == "answered", r.text
    assert r.json()["approval"]["tool_input"] == big  # whole, not cut off nor left out


def heard(center: Center) -> int:
    return int(center.http.get("/status").json()["fleet_store"]["listener"]["notifications"])


def test_a_report_notifies_the_other_centers_of_the_cards_that_changed_only(pair: tuple[Center, Center]) -> None:
    first, second = pair

    def send(n: int, tool_calls: int) -> None:
        cards = [{"session_id": f"r-{i}", "state": "running", "tool_calls": tool_calls} for i in range(n)]
        r = report(first, "host-r", cards=cards)
        assert r.status_code == 200 and r.json()["cards"] == n, r.text

    def after(step: Any) -> int:
        time.sleep(0.3)  # what came before has been heard
        before = heard(second)
        step()
        time.sleep(0.5)  # notifications arrive within milliseconds
        return heard(second) - before

    assert after(lambda: send(20, 1)) == 20  # new cards
    assert after(lambda: send(20, 1)) == 0  # the same report again: nothing changed
    assert after(lambda: send(20, 2)) == 20  # each card changed
    shown = wait_for(lambda: [c for c in second.board_cards().values() if c["host"] == "host-r"],
                     what="host-r's cards on the second center")
    assert len(shown) == 20
