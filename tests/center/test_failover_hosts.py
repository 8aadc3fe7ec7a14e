"""A host with two command centers (forward.url a list): the first is killed, and the host goes on with the second.

Two real command centers on loopback, each a server with its own SQLite store (this test is about the
host: with one shared store they would serve one fleet), and host B, whose server subscribes and
reports, and whose hooks (the installed executables) queue events. B has events queued, a pending
permission request held by its hook, and its cards reported to the first center. The first center is
killed (SIGKILL to its process groups). Then:

* B's subscription, reports and events move to the second center within a bounded time;
* nothing is lost: every event B queued arrived at one of the two centers; the second lists B's
  card and B's pending request, and an answer given there reaches the hook waiting on B;
* nothing is doubled: B's outbox never sends an event again once a center acknowledged it (the
  events the first took are not at the second), and the first, back on its store, answers the same
  bytes with the same Idempotency-Key as a duplicate, adding no row;
* B's cost ledger follows: the second center gets every priced message of B, each once;
* B's CLI with --server naming the dead first center asks the second, and once the first is back,
  still the current one first;
* B stays with the second once the first is back (forward.failback_after_s = 0).

With forward.failback_after_s > 0, B (idle) goes back to the first that long after it left it, and
nothing is lost or doubled across the two moves (events and cost).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_hooks.forward import outbox
from agent_hooks.paths import Paths

from support.approvals import Held
from support.center import Center
from support.cost import assistant, spend
from support.ports import silent_port
from support.repo import fixture_payload
from support.scripts import agent_hook, run_hook

PERMISSION = {**fixture_payload("permission_request_bash.json", "2.1.330"), "session_id": "fo-asks"}
# What B's move to the second center may take at most, from the kill (3 failed tries each way, with
# backoffs of at most 0.5 s, and a new long poll): seconds.
MOVE_BOUND_S = 10.0
STAMP = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - 600))


class Fleet:
    def __init__(self, tmp_path: Path, **extra: str) -> None:
        self.c1 = Center(tmp_path / "center-1", env={"AGENT_HOOKS__FLEET__HOST": "center-1"}).start()
        self.c2 = Center(tmp_path / "center-2", env={"AGENT_HOOKS__FLEET__HOST": "center-2"}).start()
        self.settings = {
            "AGENT_HOOKS__FLEET__HOST": "host-b",
            "AGENT_HOOKS__FORWARD__ENABLED": "true",
            "AGENT_HOOKS_INGEST_URL": json.dumps([f"{self.c1.base}/api/hooks/ingest",
                                                  f"{self.c2.base}/api/hooks/ingest"]),
            # A drainer leaves soon after its queue is empty: the test reads what the hooks queue
            # only while no drainer runs (Fleet.quiet).
            "AGENT_HOOKS__FORWARD__IDLE_EXIT_S": "1",
            "AGENT_HOOKS__FORWARD__FORWARD_WITHOUT_TMUX": "true",
            "AGENT_HOOKS__FORWARD__BACKOFF_MAX_S": "0.5",
            "AGENT_HOOKS__FLEET__SUBSCRIBE_BACKOFF_MAX_S": "0.5",
            **extra,
        }
        self.b = Center(tmp_path / "host-b", env=self.settings).start()
        # The hooks queue and do not start a drainer: the test reads what was queued, then starts one.
        self.hooks = {"AGENT_HOOKS_HOME": str(self.b.home), "HOME": self.b.env["HOME"], "TMUX": "", "TMUX_PANE": "",
                      **self.settings, "AGENT_HOOKS__FORWARD__AUTOSTART": "false"}

    def stop(self) -> None:
        for c in (self.b, self.c1, self.c2):
            c.stop()

    def hook(self, name: str, session: str) -> None:
        assert run_hook({**fixture_payload(f"{name}.json", "2.1.330"), "session_id": session}, self.hooks).returncode == 0

    def queued(self) -> dict[str, str]:
        """B's queued events: event id (its Idempotency-Key) -> the body sent."""
        conn = sqlite3.connect(self.b.home / "store.db")
        try:
            return dict(conn.execute("SELECT event_id, body FROM outbox WHERE state = 'queued'").fetchall())
        finally:
            conn.close()

    def quiet(self) -> None:
        """Wait until B's drainer has left: a drainer still running takes (and may deliver, and delete)
        what the next hooks queue before :meth:`queued` reads it."""
        wait(lambda: not outbox.drainer_alive(Paths(self.hooks)), 10, "B's drainer to leave")

    def drain(self) -> None:
        """Start B's detached drainer (as a hook does), unless one runs."""
        outbox.maybe_start_drainer(Paths(self.hooks), {**os.environ, **self.hooks}, force=True)

    def centers(self) -> dict[str, Any]:
        doc = self.b.http.get("/api/fleet/status").json()
        return doc["centers"]  # type: ignore[no-any-return]

    def on(self, center: Center) -> bool:
        st = self.centers()
        return bool(st["current_base"] == center.base and st["connected"])


def keys_at(center: Center) -> list[str]:
    conn = sqlite3.connect(center.home / "store.db")
    try:
        return [r[0] for r in conn.execute("SELECT idem_key FROM fleet_events WHERE idem_key IS NOT NULL")]
    finally:
        conn.close()


def ledger_at(center: Center) -> dict[str, float]:
    """B's priced messages in the center's ledger: key -> dollars (a key is there once, or not at all)."""
    conn = sqlite3.connect(center.home / "store.db")
    try:
        rows = conn.execute("SELECT key, usd FROM fleet_cost_messages WHERE host = 'host-b'").fetchall()
    finally:
        conn.close()
    assert len(rows) == len({r[0] for r in rows})
    return dict(rows)


def b_ledger(fleet: Fleet) -> dict[str, float]:
    """B's own priced messages: key -> dollars."""
    conn = sqlite3.connect(fleet.b.home / "store.db")
    try:
        return dict(conn.execute("SELECT key, usd FROM cost_messages").fetchall())
    finally:
        conn.close()


def priced(fleet: Fleet, sid: str, *ids: int) -> None:
    """Messages with token usage in B's session ``sid`` (its PostToolUse prices them, and queues an event)."""
    spend(fleet.hooks, sid, [assistant(f"msg_fo_{i}", f"req_fo_{i}", at=STAMP, input_tokens=1000 + i,
                                       output_tokens=200 + i, cache_read_input_tokens=5000) for i in ids])


def pending(center: Center) -> list[dict[str, Any]]:
    return center.http.get("/api/approvals").json()["approvals"]  # type: ignore[no-any-return]


def wait(predicate: Any, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate():
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def kill(center: Center) -> None:
    """SIGKILL the center's process groups (supervisor and worker): no goodbye to anyone."""
    st = center.status()
    for pid in {st["pid"], st["worker_pid"]}:
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait(lambda: not center.status()["up"], 10, "the first center to be gone")


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(tmp_path)
    try:
        yield f
    finally:
        f.stop()


def test_the_first_center_killed_the_host_goes_on_with_the_second(fleet: Fleet) -> None:
    b, c1, c2 = fleet.b, fleet.c1, fleet.c2
    # Before: B talks to the first center; its events, cards and a pending request are there.
    wait(lambda: fleet.on(c1), 10, "B subscribed to the first center")
    for sid in ("fo-1", "fo-2"):
        fleet.hook("SessionStart-startup", sid)
        fleet.hook("UserPromptSubmit", sid)
    priced(fleet, "fo-1", 1, 2)
    held = Held(PERMISSION, {**fleet.hooks, "AGENT_HOOKS__APPROVALS__WAIT_S": "60"})
    wait(lambda: len(pending(b)) == 1, 10, "B's own request")
    first = fleet.queued()
    assert len(first) >= 5, first
    fleet.drain()
    wait(lambda: set(first) <= set(keys_at(c1)), 15, "B's events at the first center")
    spent_before = b_ledger(fleet)
    assert len(spent_before) == 2 and all(v > 0 for v in spent_before.values()), spent_before
    wait(lambda: ledger_at(c1) == spent_before, 10, "B's priced messages in the first center's ledger")
    wait(lambda: len(pending(c1)) == 1, 10, "the first center to list B's request")
    wait(lambda: {"fo-1", "fo-2", "fo-asks"} <= {c.get("session_id") for c in c1.board_cards().values()
                                                 if c["host"] == "host-b"}, 10, "B's cards at the first center")
    assert keys_at(c2) == [] and pending(c2) == []

    fleet.quiet()
    kill(c1)
    t_kill = time.monotonic()
    # While the first is down, B's hooks go on: more events queued.
    for sid in ("fo-1", "fo-2"):
        fleet.hook("PostToolUse-Bash", sid)
        fleet.hook("Stop", sid)
    fleet.hook("SessionStart-startup", "fo-3")
    priced(fleet, "fo-2", 3, 4)
    second = fleet.queued()
    assert second and not set(second) & set(first)
    fleet.drain()

    # B's polls, reports and events go to the second center, within the bound.
    wait(lambda: fleet.on(c2), MOVE_BOUND_S, "B subscribed to the second center")
    wait(lambda: len(pending(c2)) == 1, MOVE_BOUND_S, "the second center to list B's request")
    wait(lambda: set(second) <= set(keys_at(c2)), MOVE_BOUND_S, "B's new events at the second center")
    # The cost ledger follows too: the second center gets every priced message of B (its cursor there
    # starts at the beginning), each once; the first keeps what it had.
    spent = b_ledger(fleet)
    assert len(spent) == 4
    wait(lambda: ledger_at(c2) == spent, MOVE_BOUND_S, "B's priced messages in the second center's ledger")
    moved_in = time.monotonic() - t_kill
    assert ledger_at(c1) == spent_before
    assert moved_in < MOVE_BOUND_S
    cards = {c.get("session_id"): c for c in c2.board_cards().values() if c["host"] == "host-b"}
    assert {"fo-1", "fo-2", "fo-3", "fo-asks"} <= set(cards), cards
    st = fleet.centers()
    assert st["switched_from"] == c1.base + "/api/hooks/ingest" and st["switches"] == 1, st
    assert fleet.queued() == {}

    # The CLI on B, told --server the first center (dead): it asks the second. An answer given there
    # reaches the hook waiting on B.
    listed = agent_hook("approvals", "--server", c1.base, "--json", env=fleet.hooks)
    [row] = json.loads(listed.stdout)["approvals"]
    assert row["host"] == "host-b" and row["session_id"] == "fo-asks"
    assert row["id"] == pending(c2)[0]["id"]
    answered = agent_hook("approve", row["id"], "--server", c1.base, "--json", env=fleet.hooks)
    assert json.loads(answered.stdout)["applied"] == "answered", answered.stdout
    assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"

    # Nothing lost: every event B queued is at one of the two centers. Nothing doubled: once a center
    # acknowledged an event, B never sent it again (the first's events are not at the second).
    at1, at2 = keys_at(c1), keys_at(c2)
    assert set(first) | set(second) <= set(at1) | set(at2)
    assert not set(first) & set(at2), "an event the first center acknowledged was sent again"
    assert len(at1) == len(set(at1)) and len(at2) == len(set(at2))
    b_conn = sqlite3.connect(b.home / "store.db")
    assert b_conn.execute("SELECT count(*) FROM outbox").fetchone()[0] == 0, "no dead letter, nothing left"
    b_conn.close()

    # The first center comes back on its store: the same bytes with the same Idempotency-Key (what a
    # drainer whose answer was lost sends again) are a duplicate there, and add no row.
    c1 = Center(c1.home, port=c1.port, env={"AGENT_HOOKS__FLEET__HOST": "center-1"}).start()
    fleet.c1 = c1
    rows_before = len(keys_at(c1))
    for key, body in first.items():
        again = c1.ingest(body.encode(), key=key, headers={"X-Agent-Hooks-Host": "host-b"})
        assert again.status_code == 200 and again.json().get("duplicate") is True, again.text
    assert len(keys_at(c1)) == rows_before

    # The CLI asks the host's current center first: the first, back on its own store, still lists B's
    # request as it was before the kill, the second (current) has it answered.
    assert [r["session_id"] for r in pending(c1)] == ["fo-asks"]
    listed = agent_hook("approvals", "--server", c1.base, "--json", env=fleet.hooks)
    assert json.loads(listed.stdout)["approvals"] == [], listed.stdout

    # And B stays with the second (forward.failback_after_s = 0): a new event goes there.
    fleet.quiet()
    fleet.hook("UserPromptSubmit", "fo-3")
    [late] = fleet.queued()
    fleet.drain()
    wait(lambda: late in keys_at(c2), 10, "B's next event at the second center")
    assert late not in keys_at(c1) and fleet.on(c2)

    # Doctor and `fleet status` say where B is, and when it moved.
    status = agent_hook("fleet", "status", "--json", env=fleet.hooks)
    doc = json.loads(status.stdout)
    assert doc["current"] == f"{c2.base}/api/hooks/ingest" and doc["switched_from"] == f"{c1.base}/api/hooks/ingest"
    print(f"\nB moved to the second center {moved_in:.2f} s after the first was killed")


def cancelled(home: Path, session: str) -> bool:
    conn = sqlite3.connect(home / "store.db")
    try:
        row = conn.execute("SELECT cancelled_at FROM sessions WHERE session_id = ?", (session,)).fetchone()
    finally:
        conn.close()
    return bool(row and row[0])


def test_back_at_a_center_polled_before_no_control_is_applied_twice(fleet: Fleet) -> None:
    """The subscription's cursor is kept per store: B, moved away and back, never applies the first
    center's cancel again, though it was lifted on B in between."""
    b, c1, c2 = fleet.b, fleet.c1, fleet.c2
    wait(lambda: fleet.on(c1), 10, "B subscribed to the first center")
    fleet.hook("SessionStart-startup", "fo-c")
    fleet.drain()
    wait(lambda: any(c.get("session_id") == "fo-c" for c in c1.board_cards().values()), 10, "B's card at the first")
    card = next(c["id"] for c in c1.board_cards().values() if c.get("session_id") == "fo-c")
    r = c1.http.post(f"/api/sessions/{card}/cancel", json={"reason": "stop"})
    assert r.status_code == 200, r.text
    wait(lambda: cancelled(b.home, "fo-c"), 10, "the cancel applied on B")
    agent_hook("uncancel", "fo-c", env=fleet.hooks)  # the person at B lifts it there
    assert not cancelled(b.home, "fo-c")

    kill(c1)
    wait(lambda: fleet.on(c2), MOVE_BOUND_S, "B on the second center")
    c1 = fleet.c1 = Center(c1.home, port=c1.port, env={"AGENT_HOOKS__FLEET__HOST": "center-1"}).start()
    kill(c2)
    wait(lambda: fleet.on(c1), MOVE_BOUND_S, "B back on the first center")
    assert fleet.centers()["switches"] == 2
    time.sleep(1.0)  # a poll or two at the first: its old cancel must not come back
    assert not cancelled(b.home, "fo-c"), "the first center's cancel was applied a second time"


FAILBACK_S = 4.0


def test_the_first_center_back_the_host_returns_to_it_after_failback_after_s(tmp_path: Path) -> None:
    """forward.failback_after_s: B, moved to the second center, goes back to the first that long after it
    left it, idle (no hook runs to make it look), and nothing is lost or doubled across the two moves."""
    fleet = Fleet(tmp_path, AGENT_HOOKS__FORWARD__FAILBACK_AFTER_S=str(FAILBACK_S))
    try:
        c1, c2 = fleet.c1, fleet.c2
        wait(lambda: fleet.on(c1), 10, "B subscribed to the first center")
        fleet.hook("SessionStart-startup", "fb-1")
        fleet.hook("UserPromptSubmit", "fb-1")
        priced(fleet, "fb-1", 1, 2)
        first = fleet.queued()
        fleet.drain()
        wait(lambda: set(first) <= set(keys_at(c1)), 15, "B's events at the first center")
        wait(lambda: ledger_at(c1) == b_ledger(fleet) and len(ledger_at(c1)) == 2, 10, "B's cost at the first")

        # The first goes away: B moves to the second, with what its hooks queue meanwhile.
        fleet.quiet()
        kill(c1)
        priced(fleet, "fb-1", 3)
        fleet.hook("Stop", "fb-1")
        second = fleet.queued()
        assert second and not set(second) & set(first)
        fleet.drain()
        wait(lambda: fleet.on(c2), MOVE_BOUND_S, "B on the second center")
        left_at = fleet.centers()["switched_at"]
        # The first comes back at once, on its store and port; B is left alone: no hook, no drainer.
        c1 = fleet.c1 = Center(c1.home, port=c1.port, env={"AGENT_HOOKS__FLEET__HOST": "center-1"}).start()
        wait(lambda: ledger_at(c2) == b_ledger(fleet) and len(ledger_at(c2)) == 3, MOVE_BOUND_S,
             "B's cost at the second")
        fleet.quiet()

        # While B waits to go back (idle: the CLI below uses a home of its own): a center whose machine
        # is down answers nothing at all, not even a refusal. The CLI goes on to the next after a short
        # connect timeout, not after its whole timeout. (No store there: no current center on record,
        # so the silent one is asked first.)
        with silent_port() as port:
            down = f"http://127.0.0.1:{port}"
            env = {**fleet.hooks, "AGENT_HOOKS_HOME": str(tmp_path / "cli-home"),
                   "AGENT_HOOKS_INGEST_URL": json.dumps([f"{down}/api/hooks/ingest", f"{c2.base}/api/hooks/ingest"])}
            t0 = time.monotonic()
            listed = agent_hook("approvals", "--server", down, "--all", "--json", env=env)
            assert time.monotonic() - t0 < 8.0
            assert json.loads(listed.stdout)["approvals"] == []  # the second's: B asked nothing here

        wait(lambda: fleet.on(c1), 3 * FAILBACK_S + MOVE_BOUND_S, "B back on the first center")
        st = fleet.centers()
        assert "failback_after_s" in st["reason"] and st["switched_from"] == f"{c2.base}/api/hooks/ingest", st
        assert st["switched_at"] - left_at >= FAILBACK_S, st
        assert st["switches"] >= 2 and st["switches"] % 2 == 0, st  # 2, unless the first was not up in time

        # Back there, B's next events and cost go to the first; the first gets the message spent while
        # B was away (its cursor there is where it left it), and nothing twice.
        fleet.hook("UserPromptSubmit", "fb-1")
        priced(fleet, "fb-1", 4)
        third = fleet.queued()
        assert third and not set(third) & (set(first) | set(second))
        fleet.drain()
        wait(lambda: set(third) <= set(keys_at(c1)), MOVE_BOUND_S, "B's events at the first center again")
        spent = b_ledger(fleet)
        assert len(spent) == 4
        wait(lambda: ledger_at(c1) == spent, MOVE_BOUND_S, "every priced message of B at the first center")
        assert set(ledger_at(c2)) < set(spent)

        # Nothing lost: every event is at one of the centers; nothing doubled: none at both, none twice.
        at1, at2 = keys_at(c1), keys_at(c2)
        assert set(first) | set(second) | set(third) <= set(at1) | set(at2)
        assert not set(at1) & set(at2), "an event went to both centers"
        assert len(at1) == len(set(at1)) and len(at2) == len(set(at2))
        assert set(first) | set(third) <= set(at1)
        conn = sqlite3.connect(fleet.b.home / "store.db")
        assert conn.execute("SELECT count(*) FROM outbox").fetchone()[0] == 0
        conn.close()
    finally:
        fleet.stop()
