"""The command center's fleet in PostgreSQL ([center] database), against a server the tests start themselves.

Units of the store's interface (center/fleetstore.py): the SQL it translates, the schema it derives from
the same named migrations as SQLite's. Then two command-center processes on one database: host B reports
to the first; the second lists B's card and B's pending request, and its boards hear of B's report;
an answer given on the second wakes the long poll B holds on the first, and reaches the hook that waits
on B within 1 s (LISTEN/NOTIFY between them, no polling).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_hooks import schema
from agent_hooks.center import fleetstore

from support.approvals import Held
from support.center import Center, fleet_rows, messages
from support.repo import fixture_payload
from support.waiting import wait_for

PERMISSION = {**fixture_payload("permission_request_bash.json", "2.1.330"), "session_id": "b-asks-pg"}


# -- the interface ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("sqlite", "postgres"), [
    ("SELECT a FROM t WHERE b = ? AND c LIKE 'x%?'", "SELECT a FROM t WHERE b = %s AND c LIKE 'x%%?'"),
    ("INSERT OR IGNORE INTO t (a) VALUES (?)", "INSERT INTO t (a) VALUES (%s) ON CONFLICT DO NOTHING"),
    ("INSERT OR IGNORE INTO t (a) VALUES (?) RETURNING id",
     "INSERT INTO t (a) VALUES (%s) ON CONFLICT DO NOTHING RETURNING id"),
    ("UPDATE t SET a = 1 WHERE (b IS NOT ? OR c IS ?)",
     "UPDATE t SET a = 1 WHERE (b IS DISTINCT FROM %s OR c IS NOT DISTINCT FROM %s)"),
    ("SELECT id FROM t ORDER BY id LIMIT -1 OFFSET ?", "SELECT id FROM t ORDER BY id LIMIT ALL OFFSET %s"),
    ("SELECT a || char(31) || b FROM t", "SELECT a || chr(31) || b FROM t"),
    ("BEGIN IMMEDIATE", "BEGIN"),
])
def test_the_centers_sql_as_postgresql_reads_it(sqlite: str, postgres: str) -> None:
    assert fleetstore.translate(sqlite) == postgres


def test_postgresql_is_migrated_from_the_same_named_list_once(fleet_db: str) -> None:
    assert [name for name, _ in fleetstore.postgres_migrations()] == schema.MIGRATIONS
    store = fleetstore.PgStore(fleet_db)
    try:
        conn = store.conn
        applied = [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY name").fetchall()]
        assert applied == sorted(schema.MIGRATIONS)
        assert fleetstore.migrate(conn) == []  # a second center starting finds nothing to do
        # The fleet's tables, with SQLite's columns and PostgreSQL's types.
        cols = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns"
                                 " WHERE table_name = 'fleet_sessions'").fetchall())
        assert cols["updated_at"] == "double precision" and cols["events"] == "bigint" and cols["id"] == "text"
        assert cols["details"] == "text"  # added by a later migration (m013)
        # SQLite's integer primary key numbers rows; a table without one has a rowid, as in SQLite.
        seq = [conn.execute("INSERT INTO fleet_controls (host, kind, action, at) VALUES (?, ?, ?, ?) RETURNING seq",
                            ("h", "cancel", "cancel", 1.0)).fetchone()[0] for _ in range(2)]
        assert seq[1] == seq[0] + 1
        conn.execute("INSERT INTO fleet_cost_samples (fleet_id, at, usd) VALUES (?, ?, ?)", ("c", 1.0, 0.5))
        assert conn.execute("SELECT rowid FROM fleet_cost_samples").fetchone()[0] >= 1
        # SQLite's two-argument max and min.
        assert conn.execute("SELECT max(1.5, ?), min(?, 3)", (2.5, 1)).fetchone() == (2.5, 1)
        # The first answer wins, as in SQLite: a conditional UPDATE.
        conn.execute("INSERT INTO approvals (id, host, session_id, kind, tool_name, state, created_at)"
                     " VALUES ('r1', 'h', 's', 'permission', 'Bash', 'pending', 1)")
        won = [conn.execute("UPDATE approvals SET state = ? WHERE id = 'r1' AND state = 'pending'",
                            (s,)).rowcount for s in ("allowed", "denied")]
        assert won == [1, 0]
    finally:
        store.close()


# -- two command centers, one fleet --------------------------------------------------------------------

def pending(center: Center) -> list[dict[str, Any]]:
    r = center.http.get("/api/approvals")
    assert r.status_code == 200, r.text
    return r.json()["approvals"]  # type: ignore[no-any-return]


@pytest.fixture
def fleet(tmp_path: Path, fleet_db: str) -> Iterator[tuple[Center, Center, Center, dict[str, str]]]:
    """Two command centers on one PostgreSQL database, and host B, whose hooks forward to the first and
    whose server subscribes there. (first, second, B, B's hooks' environment)"""
    db = {"AGENT_HOOKS__CENTER__DATABASE": fleet_db}
    first = Center(tmp_path / "center-1", env={"AGENT_HOOKS__FLEET__HOST": "center-1", **db}).start()
    second = Center(tmp_path / "center-2", env={"AGENT_HOOKS__FLEET__HOST": "center-2", **db})
    settings = {
        "AGENT_HOOKS__FLEET__HOST": "host-b",
        "AGENT_HOOKS__FORWARD__ENABLED": "true",
        "AGENT_HOOKS_INGEST_URL": f"{first.base}/api/hooks/ingest",
        "AGENT_HOOKS__FORWARD__IDLE_EXIT_S": "5",
        "AGENT_HOOKS__FORWARD__FORWARD_WITHOUT_TMUX": "true",
        "AGENT_HOOKS__FLEET__SUBSCRIBE_BACKOFF_MAX_S": "0.5",
    }
    b = Center(tmp_path / "host-b", env=settings)
    try:
        second.start()
        b.start()
        yield first, second, b, {"AGENT_HOOKS_HOME": str(b.home), "HOME": b.env["HOME"], "TMUX": "", "TMUX_PANE": "",
                                 **settings}
    finally:
        b.stop()
        second.stop()
        first.stop()


def test_an_answer_on_the_second_center_reaches_the_hook_on_b_through_the_first(
        fleet: tuple[Center, Center, Center, dict[str, str]]) -> None:
    first, second, b, env = fleet
    board = second.live()  # a board on the second center, from before B said anything
    try:
        held = Held(PERMISSION, env)
        # B reports to the first center only; the second lists B's request and B's card.
        # (B may report the request a moment before the card its hook feed makes: the row names its card
        # once both are in.)
        [row] = wait_for(lambda: [p for p in pending(second) if p["session_id"] == "b-asks-pg" and p["card"]],
                         timeout=10, what="B's request listed by the second center, with its card")
        assert row["host"] == "host-b" and row["state"] == "pending"
        assert row["card"], row
        card = wait_for(lambda: second.board_cards().get(row["card"]), what="B's card on the second center's board")
        assert card["host"] == "host-b" and card["local"] is False
        # The second center's board heard of it live (a report taken by the first, through PostgreSQL).
        messages(board, lambda ms: any(m["type"] == "card" and m["card"]["id"] == row["card"] for m in ms)
                 and any(m["type"] == "approvals" and any(p["id"] == row["id"] for p in m["approvals"]) for m in ms))
        wait_for(lambda: b.http.get("/api/fleet/status").json()["subscription"]["connected"],
                 what="B's long poll held by the first center")

        # Answered on the second: the long poll B holds on the first wakes, B answers its hook.
        t0 = time.monotonic()
        r = second.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow", "via": "board"})
        answer = held.answer()
        took = time.monotonic() - t0
        assert answer["hookSpecificOutput"]["decision"]["behavior"] == "allow"
        assert took < 1.0, f"the answer reached B's hook {took:.2f} s after it was given on the second center"
        # And the second center was told B's word (it came to the first): 200, not 202.
        assert r.status_code == 200 and r.json()["applied"] == "answered", r.text
        wait_for(lambda: not [p for p in pending(first) + pending(second) if p["id"] == row["id"]],
                 what="the request gone from both centers' lists")
        # Who answered, in the fleet's shared record; the first center serves the card's page from it too.
        recorded = fleet_rows(first, "SELECT target, by_kind FROM fleet_actions WHERE target = ?", (row["id"],))
        assert [(r["target"], r["by_kind"]) for r in recorded] == [(row["id"], "owner")]
        page = first.http.get(f"/api/board/sessions/{row['card']}")
        assert page.status_code == 200 and page.json()["card"]["host"] == "host-b", page.text
    finally:
        board.close()


def test_a_cancel_on_the_second_center_is_sent_down_the_first_ones_long_poll(
        fleet: tuple[Center, Center, Center, dict[str, str]]) -> None:
    first, second, b, _env = fleet
    r = first.http.post("/api/fleet/report", headers={"X-Agent-Hooks-Host": "host-x"},
                        json={"cards": [{"session_id": "x-1"}]})
    assert r.status_code == 200, r.text
    card = wait_for(lambda: [c for c in second.board_cards().values() if c["host"] == "host-x"],
                    what="host-x's card on the second center")[0]
    # host-x holds a long poll on the first center; the cancel is given on the second.
    import threading

    got: dict[str, Any] = {}

    def poll() -> None:
        t = time.monotonic()
        got["r"] = first.http.get("/api/fleet/controls", params={"host": "host-x", "after": "0", "wait": "10"},
                                  timeout=15)
        got["took"] = time.monotonic() - t

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.5)  # the poll is held (no control yet)
    t0 = time.monotonic()
    r = second.http.post(f"/api/sessions/{card['id']}/cancel", json={"reason": "wrong branch"})
    assert r.status_code == 200, r.text
    poller.join(15)
    assert got["r"].status_code == 200, got["r"].text
    controls = got["r"].json()["controls"]
    assert [c["action"] for c in controls] == ["cancel"] and controls[0]["reason"] == "wrong branch"
    assert time.monotonic() - t0 < 1.0 and got["took"] < 5.0, got


def test_postgresql_down_is_a_503_the_host_retries_and_the_center_comes_back_by_itself(tmp_path: Path) -> None:
    from support.postgres import Postgres

    pg = Postgres().start()  # a cluster of this test's own: it is stopped and started again
    try:
        url = pg.create_database("fleet")
        center = Center(tmp_path / "center", env={"AGENT_HOOKS__FLEET__HOST": "center",
                                                  "AGENT_HOOKS__CENTER__DATABASE": url}).start()
        try:
            assert center.ingest({"tmux_session": "agent-1", "event": "start"}, key="k1").status_code == 200
            assert pg.data.exists()
            pg._run(f"{pg.bin}/pg_ctl", "stop", "-D", str(pg.data), "-m", "immediate", "-w")
            r = center.ingest({"tmux_session": "agent-1", "event": "exit"}, key="k2")
            # Not a 4xx that a drainer would drop: the host keeps the event and sends it again.
            assert r.status_code == 503, r.text
            pg._run(f"{pg.bin}/pg_ctl", "start", "-D", str(pg.data), "-w", "-o",
                    f"-c listen_addresses=127.0.0.1 -c port={pg.port} -c unix_socket_directories={pg.root}",
                    "-l", str(pg.root / "server.log"))
            deadline = time.monotonic() + 15
            while True:
                r = center.ingest({"tmux_session": "agent-1", "event": "exit"}, key="k2")
                if r.status_code == 200 or time.monotonic() > deadline:
                    break
                assert r.status_code == 503, r.text
                time.sleep(0.2)
            assert r.status_code == 200, r.text
            card = wait_for(lambda: [c for c in center.board_cards().values() if c["tmux_session"] == "agent-1"
                                     and c["state"] == "completed"], what="the card after the database came back")
            assert card
        finally:
            center.stop()
    finally:
        pg.stop()


def test_two_centers_draining_one_outbox_send_each_notification_once(fleet_db: str) -> None:
    from agent_hooks.notify import outbox
    from agent_hooks.notify.text import Message

    one, two = fleetstore.PgStore(fleet_db), fleetstore.PgStore(fleet_db, migrate_now=False)
    try:
        with one.write() as conn:
            assert outbox.enqueue(conn, "req-1", "request", "chan", "phone", Message("t", "b", "", ""), 100.0)
        [row] = outbox.due(one.conn, 200.0)
        [same] = outbox.due(two.conn, 200.0)  # both centers see it due
        with one.write() as conn:
            first = outbox.claim(conn, row, 200.0)
        with two.write() as conn:
            second = outbox.claim(conn, same, 200.0)
        assert (first, second) == (True, False)
        assert outbox.due(two.conn, 200.0 + outbox.CLAIM_S - 1) == []  # taken, until its sender would be long dead
    finally:
        one.close()
        two.close()


def test_server_threads_borrow_from_a_pool_of_pool_size_connections_and_a_dropped_one_is_replaced(
        tmp_path: Path, fleet_db: str) -> None:
    """Every server thread that reads the fleet (here: a presented credential checked) borrows a connection
    from the process's pool: however many requests run at once, PostgreSQL sees at most [center] pool_size
    of them; and one PostgreSQL dropped is replaced before it is lent, unseen by the caller."""
    import concurrent.futures
    import secrets

    import httpx

    center = Center(tmp_path / "center", env={"AGENT_HOOKS__FLEET__HOST": "center",
                                              "AGENT_HOOKS__CENTER__DATABASE": fleet_db,
                                              "AGENT_HOOKS__CENTER__POOL_SIZE": "2"}).start()
    admin = fleetstore.PgStore(fleet_db, migrate_now=False)
    pooled = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()" \
             " AND application_name = 'agent-hooks center pool'"

    def unknown_credential() -> int:
        # A credential never paired: looked up in the fleet's table (a borrowed connection), then refused.
        r = httpx.get(f"{center.base}/api/fleet/status", timeout=10,
                      headers={"Authorization": f"Bearer ah1.{secrets.token_hex(8)}.{secrets.token_urlsafe(24)}"})
        return r.status_code

    try:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(lambda _: unknown_credential(), range(48)))
        assert set(statuses) == {401}, statuses
        held = admin.conn.execute(pooled).fetchall()
        assert 1 <= len(held) <= 2, held
        for (pid,) in held:
            admin.conn.execute("SELECT pg_terminate_backend(?)", (pid,))
        wait_for(lambda: all(pid not in {r[0] for r in admin.conn.execute(pooled).fetchall()} for (pid,) in held),
                 what="the pool's connections dropped by PostgreSQL")
        # Not 503 (the database is there): the dropped connections are replaced before they are lent.
        assert [unknown_credential() for _ in range(4)] == [401] * 4
    finally:
        admin.close()
        center.stop()


def test_a_session_moment_seen_by_two_centers_is_told_once(tmp_path: Path, fleet_db: str) -> None:
    """Both centers build the failed card (each hears of it through PostgreSQL) and both have the channel:
    the moment is one row of the shared outbox, so the person is told once."""
    import json

    from support.receiver import Receiver

    with Receiver(path="/moments") as inbox:
        env = {"AGENT_HOOKS__CENTER__DATABASE": fleet_db,
               "AGENT_HOOKS__NOTIFY__CHANNELS": json.dumps([{"url": inbox.url, "on": ["failed"]}])}
        one = Center(tmp_path / "c1", env={"AGENT_HOOKS__FLEET__HOST": "c1", **env}).start()
        two = Center(tmp_path / "c2", env={"AGENT_HOOKS__FLEET__HOST": "c2", **env}).start()
        try:
            headers = {"X-Agent-Hooks-Host": "host-x"}
            assert one.ingest({"tmux_session": "agent-x", "event": "start"}, key="x1", headers=headers).status_code == 200
            card = wait_for(lambda: [c for c in two.board_cards().values() if c["tmux_session"] == "agent-x"],
                            what="the card on the second center")[0]
            assert one.ingest({"tmux_session": "agent-x", "event": "failed"}, key="x2", headers=headers).status_code == 200
            wait_for(lambda: two.card(card["id"])["state"] == "failed", what="the failed card on the second center")
            [told] = inbox.wait(1)
            assert "stopped on an error" in told["title"], told
            time.sleep(2.0)  # the other center's notifier had time to send its own
            assert len(inbox.bodies()) == 1, inbox.bodies()
        finally:
            two.stop()
            one.stop()


def test_begin_and_savepoints_ride_with_the_next_statement_and_a_failed_job_is_its_own(fleet_db: str) -> None:
    """The writer's pattern (BEGIN, then SAVEPOINT job / RELEASE job around each job, one COMMIT): the
    statements that return nothing are sent with the next one, and a job that fails is rolled back alone."""
    store = fleetstore.PgStore(fleet_db)
    conn = store.conn
    try:
        conn.execute("BEGIN")
        assert conn.in_transaction  # held, not yet sent: still a transaction to the caller
        outcomes = []
        for host in ("h1", "bad", "h2"):
            conn.execute("SAVEPOINT job")
            try:
                if host == "bad":
                    conn.execute("INSERT INTO fleet_controls (host, kind, action, at) VALUES (?, ?, ?, ?)",
                                 (host, "cancel", "cancel", "not a number"))
                else:
                    conn.execute("INSERT INTO fleet_controls (host, kind, action, at) VALUES (?, ?, ?, ?)",
                                 (host, "cancel", "cancel", 1.0))
            except Exception as exc:  # noqa: BLE001
                conn.execute("ROLLBACK TO job")
                conn.execute("RELEASE job")
                outcomes.append(type(exc).__name__)
                continue
            conn.execute("RELEASE job")
            outcomes.append("ok")
        conn.execute("COMMIT")
        assert outcomes == ["ok", "InvalidTextRepresentation", "ok"]
        assert [r[0] for r in conn.execute("SELECT host FROM fleet_controls ORDER BY seq").fetchall()] == ["h1", "h2"]
        # Statements that do not wait for each other go in one pipeline; each cursor has its own answer,
        # and a failing one fails the call (the writer's job), not a later one.
        conn.execute("BEGIN")
        one, two = fleetstore.run_all(conn, [("SELECT ?::bigint + 1", (1,)),
                                             ("SELECT host FROM fleet_controls WHERE host = ?", ("h2",))])
        assert one.fetchone() == (2,) and two.fetchall() == [("h2",)]
        with pytest.raises(Exception, match="invalid input"):
            fleetstore.run_all(conn, [("SELECT 1", ()), ("SELECT ?::bigint", ("x",))])
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT 1").fetchone() == (1,)
        # A transaction that ran nothing never reached the server, and ends without a word.
        conn.execute("BEGIN")
        conn.execute("SAVEPOINT job")
        conn.execute("RELEASE job")
        conn.execute("COMMIT")
        assert not conn.in_transaction
    finally:
        store.close()
