"""The command center's pure parts and store operations (no server): the OptimalOS contract's table,
validation, auto-registration, PATCH mapping, and the hook feed replayed onto local cards."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent_hooks.center import contract, fleetdb
from agent_hooks.forward import eventmap
from agent_hooks.store import Store

# EVENTS: the contract's table, written out independently of contract.EVENTS (the test ingest server's
# copy, which the forwarder's tests run against): event -> (from states, to).
from support.ingest_server import EVENTS, STATES


def test_twelve_events_five_states() -> None:
    assert set(contract.EVENTS) == set(EVENTS) and len(contract.EVENTS) == 12
    assert list(contract.STATES) == STATES
    # The forwarder's table of targets agrees with ours.
    assert {e: t for e, (_, t) in contract.EVENTS.items()} == eventmap.CONTRACT_EVENTS


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("event", list(EVENTS))
def test_every_event_from_every_state(state: str, event: str) -> None:
    sources, target = EVENTS[event]
    assert contract.transition(state, event) == (target if state in sources else None)


@pytest.mark.parametrize(("state", "wanted", "event"), [
    ("idle", "running", "start"), ("awaiting_review", "running", "running"),
    ("running", "awaiting_review", "prompt_ready"), ("running", "completed", "exit"),
    ("awaiting_review", "failed", "exit_error"), ("completed", "idle", "requeue"), ("failed", "idle", "requeue"),
    ("idle", "completed", None), ("completed", "running", None), ("running", "idle", None),
])
def test_drag_maps_a_column_to_its_event(state: str, wanted: str, event: str | None) -> None:
    assert contract.event_for_state(state, wanted) == event
    if event:
        assert contract.transition(state, event) == wanted


@pytest.mark.parametrize(("raw", "message"), [
    (b"{not json", "invalid JSON"),
    (b"[1, 2]", "invalid JSON"),
    (b'{"tmux_session": "agent-x"}', "missing event"),
    (b'{"tmux_session": "agent-x", "event": ""}', "missing event"),
    (b'{"tmux_session": "agent-x", "event": "explode"}', "unknown event type"),
    (b'{"tmux_session": "agent-x", "event": 3}', "event must be a string"),
    (b'{"event": "start"}', "tmux_session or session_id is required"),
    (b'{"event": "start", "tmux_session": ""}', "tmux_session or session_id is required"),
    (b'{"event": "start", "tmux_session": "t", "metadata": {"a": 1}}', "metadata must be a string"),
    (b'{"event": "start", "tmux_session": "t", "agent_type": "cobol"}', "unknown agent_type"),
    (b'{"event": "start", "tmux_session": "t\\u0000"}', "NUL"),
])
def test_bad_ingest_bodies_say_why(raw: bytes, message: str) -> None:
    with pytest.raises(contract.BodyError, match=message):
        contract.parse_ingest(raw)


def test_good_ingest_body_defaults_and_clips() -> None:
    body = contract.parse_ingest(json.dumps({"tmux_session": "agent-a", "event": "tool_use",
                                             "metadata": "x" * 5000}).encode())
    assert body.agent_type == "claude-code" and body.session_id is None
    assert body.metadata is not None and len(body.metadata) == contract.MAX_METADATA_CHARS
    with pytest.raises(contract.BodyError, match="too large"):
        contract.parse_ingest(b'{"event": "start", "tmux_session": "' + b"a" * 70000 + b'"}')


@pytest.mark.parametrize(("doc", "how"), [
    ({"tmux_session": "work", "event": "start"}, "start"),
    ({"session_id": "abc", "event": "start"}, "start"),
    ({"tmux_session": "agent-x", "event": "tool_use"}, "agent"),
    ({"tmux_session": "agent-x", "event": "requeue"}, "agent"),
    ({"tmux_session": "work", "event": "tool_use"}, None),
    ({"session_id": "agent-x", "event": "tool_use"}, None),
])
def test_auto_registration_rule(doc: dict[str, str], how: str | None) -> None:
    assert contract.auto_registration(contract.parse_ingest(json.dumps(doc).encode())) == how


def test_patch_and_registration_bodies() -> None:
    assert contract.parse_patch(b'{"state": "completed"}') == ("state", "completed")
    assert contract.parse_patch(b'{"event": "requeue"}') == ("event", "requeue")
    for bad in (b'{"state": "done"}', b'{"event": "nope"}', b"{}", b'{"state": "idle", "event": "start"}'):
        with pytest.raises(contract.BodyError):
            contract.parse_patch(bad)
    reg = contract.parse_registration(b'{"tmux_session": "agent-t", "label": "L", "depends_on": ["a", "b"]}')
    assert reg.depends_on == ("a", "b") and reg.label == "L" and reg.agent_type == "claude-code"
    with pytest.raises(contract.BodyError, match="depends_on"):
        contract.parse_registration(b'{"tmux_session": "t", "depends_on": "a"}')
    assert contract.parse_reason(b"", required=False) is None
    with pytest.raises(contract.BodyError, match="reason is required"):
        contract.parse_reason(b"{}", required=True)


# -- the store side ------------------------------------------------------------

@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    store = Store(str(tmp_path / "store.db"))
    return store.conn


class _Tx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.execute("COMMIT" if exc[0] is None else "ROLLBACK")


def ingest(conn: sqlite3.Connection, doc: dict[str, str], host: str = "host-b", key: str | None = None,
           at: float = 100.0) -> fleetdb.Result:
    with _Tx(conn) as c:
        return fleetdb.ingest(c, contract.parse_ingest(json.dumps(doc).encode()), host, at, key)


def test_ingest_registers_applies_and_is_idempotent(conn: sqlite3.Connection) -> None:
    assert ingest(conn, {"tmux_session": "work", "event": "tool_use"}).status == 404
    first = ingest(conn, {"tmux_session": "work", "event": "start"}, key="k1")
    assert first.status == 200 and first.body["state"] == "running"
    sid = first.body["session"]
    assert [t["event"] for t in first.transitions] == ["register", "start"]
    again = ingest(conn, {"tmux_session": "work", "event": "prompt_ready"}, key="k1")
    assert again.body == {"ok": True, "duplicate": True, "session": sid}
    assert fleetdb.get(conn, sid)["state"] == "running"  # the duplicate was not applied
    # The same tmux name on another host is another session.
    assert ingest(conn, {"tmux_session": "work", "event": "prompt_ready"}, host="host-c").status == 404
    assert ingest(conn, {"tmux_session": "work", "event": "prompt_ready"}).body["state"] == "awaiting_review"
    # Lookup by session id first: the card id wins over the tmux name.
    by_id = ingest(conn, {"session_id": sid, "tmux_session": "other", "event": "exit"})
    assert by_id.body["session"] == sid and by_id.body["state"] == "completed"
    ignored = ingest(conn, {"session_id": sid, "event": "tool_use"})
    assert ignored.status == 200 and ignored.body["ignored"] and ignored.body["state"] == "completed"
    events = conn.execute("SELECT event, from_state, to_state FROM fleet_events WHERE fleet_id = ? ORDER BY id",
                          (sid,)).fetchall()
    assert events == [("start", "idle", "running"), ("prompt_ready", "running", "awaiting_review"),
                      ("exit", "awaiting_review", "completed"), ("tool_use", "completed", None)]


def test_agent_prefix_registers_in_running(conn: sqlite3.Connection) -> None:
    out = ingest(conn, {"tmux_session": "agent-7", "event": "prompt_ready", "agent_type": "openclaw"})
    assert out.body["state"] == "awaiting_review"
    card = fleetdb.get(conn, out.body["session"])
    assert card["host"] == "host-b" and card["agent_type"] == "openclaw" and card["tmux_session"] == "agent-7"


def _hook(conn: sqlite3.Connection, sid: str, event: str, at: float, tmux: str | None = None) -> None:
    conn.execute(
        "INSERT INTO sessions (session_id, state, first_seen_at, last_seen_at, last_event, tmux_session)"
        " VALUES (?, 'live', ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET last_seen_at = excluded.last_seen_at,"
        " last_event = excluded.last_event", (sid, at, at, event, tmux))


def test_hook_feed_moves_local_cards_through_the_map(conn: sqlite3.Connection) -> None:
    event_map = {"SessionStart": "start", "PostToolUse": "tool_use", "UserPromptSubmit": "prompt_ready",
                 "Stop": "exit"}
    for i, ev in enumerate(["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"]):
        _hook(conn, "local-1", ev, 10.0 + i, tmux="agent-l")
    # A session the feed first sees mid-way is running (it is working), not idle.
    _hook(conn, "local-2", "UserPromptSubmit", 20.0)
    out = fleetdb.sync_local(conn, event_map, 30.0)
    assert out.changed == {"local-1", "local-2"}
    hist = [(t["id"], t["event"], t["to"]) for t in out.transitions]
    assert hist == [("local-1", "register", "idle"), ("local-1", "start", "running"),
                    ("local-1", "prompt_ready", "awaiting_review"), ("local-1", "tool_use", "running"),
                    ("local-1", "exit", "completed"), ("local-2", "register", "running"),
                    ("local-2", "prompt_ready", "awaiting_review")]
    assert fleetdb.get(conn, "local-1")["local"] == 1 and fleetdb.get(conn, "local-1")["host"] == ""
    assert fleetdb.sync_local(conn, event_map, 31.0).changed == set()  # the cursor moved on
    # A forwarder pointed at this server (same host, same tmux) moves the same card, not a new one.
    out = ingest(conn, {"tmux_session": "agent-l", "event": "requeue"}, host="")
    assert out.body["session"] == "local-1" and out.body["state"] == "idle"
    assert conn.execute("SELECT count(*) FROM fleet_sessions").fetchone()[0] == 2


def test_feed_is_capped_by_its_trigger(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO local_feed (id, session_id, hook_event, at) VALUES (30000, 'x', 'Stop', 1)")
    _hook(conn, "s", "Stop", 2.0)
    assert conn.execute("SELECT min(id), max(id) FROM local_feed").fetchone() == (30000, 30001)
    conn.execute("INSERT INTO local_feed (id, session_id, hook_event, at) VALUES (5, 'x', 'Stop', 1)")
    _hook(conn, "s", "PreToolUse", 3.0)  # an update: prunes everything 20000 below the newest
    assert conn.execute("SELECT min(id) FROM local_feed").fetchone()[0] == 30000


def test_patch_delete_and_controls(conn: sqlite3.Connection) -> None:
    sid = ingest(conn, {"tmux_session": "agent-p", "event": "tool_use"}).body["session"]
    conn.execute("BEGIN IMMEDIATE")
    assert fleetdb.patch(conn, sid, "state", "completed", 1.0).body["event"] == "exit"
    refused = fleetdb.patch(conn, sid, "state", "running", 2.0)
    assert refused.status == 409 and refused.body["allowed"] == ["idle"]
    assert fleetdb.patch(conn, sid, "event", "requeue", 3.0).body["state"] == "idle"
    assert fleetdb.patch(conn, "nope", "state", "idle", 3.0).status == 404
    assert fleetdb.delete(conn, sid).status == 200 and fleetdb.delete(conn, sid).status == 404
    a = fleetdb.add_control(conn, host="host-b", kind="session", action="cancel", at=1.0, tmux="agent-p")
    b = fleetdb.add_control(conn, host="*", kind="task", action="cancel", at=2.0, task_id="T")
    fleetdb.add_control(conn, host="host-c", kind="task", action="uncancel", at=3.0, task_id="T")
    conn.execute("COMMIT")
    assert [c["seq"] for c in fleetdb.controls_after(conn, "host-b", 0)] == [a, b]
    assert [c["seq"] for c in fleetdb.controls_after(conn, "host-b", a)] == [b]


class _Counting:
    """A sqlite3 connection that counts the calls made on it: with PostgreSQL each is a round trip the
    writer thread waits for (an executemany is one pipeline)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.calls = conn, 0

    def execute(self, *args: object) -> sqlite3.Cursor:
        self.calls += 1
        return self.conn.execute(*args)  # type: ignore[arg-type]

    def executemany(self, *args: object) -> sqlite3.Cursor:
        self.calls += 1
        return self.conn.executemany(*args)  # type: ignore[arg-type]


def test_a_reports_round_trips_do_not_grow_with_its_cards(conn: sqlite3.Connection) -> None:
    from agent_hooks.center import limits, report

    caps = limits.Limits(hosts=10, cards_per_host=100, requests_per_host=10, rows=1000)

    def calls(n: int, host: str) -> int:
        items = [{"session_id": f"{host}-{i}", "tmux_session": f"t{i}", "agent": "a", "current_tool": "Bash"}
                 for i in range(n)]
        with _Tx(conn) as c:
            report.store_report(c, host, items, 100.0, requests=[], caps=caps)  # the cards made
        counting = _Counting(conn)
        with _Tx(conn):
            out = report.store_report(counting, host, [{**i, "current_tool": "Read"} for i in items], 101.0,  # type: ignore[arg-type]
                                      requests=[], caps=caps)
        assert out.status == 200 and out.body["cards"] == n, out.body
        assert json.loads(conn.execute("SELECT details FROM fleet_sessions WHERE id = ?",
                                       (f"{host}-{n - 1}",)).fetchone()[0])["current_tool"] == "Read"
        return counting.calls

    assert calls(40, "host-big") == calls(4, "host-small")
