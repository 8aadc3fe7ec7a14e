"""The resident server and a store it cannot write: calls spooled, the store retried, the spool
replayed once it is writable, and one log line per change (agent_hooks/server/recovery.py)."""

from __future__ import annotations

import http.client
import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_hooks import spool
from agent_hooks.server import process

from support.ports import free_port
from support.repo import fixture_payload
from support.scripts import BIN, agent_hook, store_rows
from support.servers import Server, mode_binding_prefix, server_log, start_with_prefix
from support.waiting import wait_for


@pytest.fixture(params=["fresh", "served-before"])
def read_only_server(request: pytest.FixtureRequest, hooks_home: Path, tmp_path: Path) -> Iterator[Server]:
    """A server started on a store that is 0444: a fresh one (whose -wal/-shm the read-only server
    makes itself, read-only), or one a server has used before (the command center's epoch is in it,
    so the server starts, as it did when every call went unrecorded)."""
    prefix = mode_binding_prefix(tmp_path)
    agent_hook("init")
    store = hooks_home / "store.db"
    server = Server(hooks_home, free_port())
    if request.param == "served-before":
        server.start()
        server.stop()
    else:
        assert not (hooks_home / "store.db-wal").exists()  # init leaves no sidecars: the server makes them
    store.chmod(0o444)
    try:
        start_with_prefix(server, prefix)
        yield server
    finally:
        server.stop()


def _writable(server: Server) -> bool:
    """Whether the server says its store can be written: its GET /status, which `agent-hook server status`
    shows; read directly, as it is polled (a process per look would cost more than the retry it waits for)."""
    doc = process.fetch(server.port, "/status")
    assert doc is not None, "the server did not answer GET /status"
    return bool(doc["store_state"]["writable"])


def _spooled_lines(home: Path) -> int:
    directory = home / "spool"
    return sum(p.read_bytes().count(b"\n") for p in directory.glob("*.jsonl")) if directory.exists() else 0


def test_a_store_read_only_at_start_is_spooled_retried_and_replayed(read_only_server: Server) -> None:
    """Read-only at start: every call was answered, none recorded, nothing spooled, even after the
    store was writable again, and the board's thread logged a traceback a second. Now the calls
    are spooled, the store is retried, and once writable the later calls are recorded and the
    earlier ones replayed from the spool; the log has one line per change."""
    server, home = read_only_server, read_only_server.home
    pre = fixture_payload("PreToolUse-Bash.json")
    prompt = dict(fixture_payload("UserPromptSubmit.json"), session_id="s-read-only")
    for i in range(3):
        status, headers, body = server.post(dict(pre, tool_use_id=f"toolu_ro_{i}"))
        assert status == 200 and body == b"", (status, body)
        assert "spooled" in headers.get("x-agent-hooks-problem", ""), headers
    status, headers, _ = server.post(prompt)
    assert status == 200 and "spooled" in headers.get("x-agent-hooks-problem", ""), headers
    assert _spooled_lines(home) == 4
    # The command center's writes cannot be kept here: 503, so a sending host keeps them and tries again.
    assert _ingest_status(server) == 503
    state = server.status()["store_state"]
    assert state["writable"] is False and "readonly" in state["problem"] and state["spooled"] == 4, state
    assert "store NOT writable" in server.cli("status").stdout
    # Longer than the board's checkpoint and the store's retry (1 s each, which ran all along since the start):
    # what was a traceback a second from the board's thread, or a line per retry, would be in the log by now.
    time.sleep(1.5)
    assert store_rows(home, "SELECT count(*) FROM tool_calls")[0][0] == 0

    (home / "store.db").chmod(0o600)
    wait_for(lambda: _writable(server), 15, "the store writable again", show=lambda: server_log(home))
    for i in range(2):
        status, headers, _ = server.post(dict(pre, tool_use_id=f"toolu_rw_{i}"))
        assert status == 200 and "x-agent-hooks-problem" not in headers, headers
    recorded = {r[0] for r in store_rows(home, "SELECT tool_use_id FROM tool_calls")}
    assert recorded == {"toolu_ro_0", "toolu_ro_1", "toolu_ro_2", "toolu_rw_0", "toolu_rw_1"}, recorded
    assert store_rows(home, "SELECT count(*) FROM sessions WHERE session_id = 's-read-only'")[0][0] == 1
    assert _spooled_lines(home) == 0
    # The store's -wal and -shm, made read-only by the read-only connection, keep nobody out now:
    # an executable (bound by file modes as the server is) records its call too.
    assert (home / "store.db-shm").exists()  # the server's WAL connections hold it
    for name in ("store.db-wal", "store.db-shm"):
        side = home / name
        if side.exists():
            assert stat.S_IMODE(side.stat().st_mode) & 0o200, (name, oct(side.stat().st_mode))
    prefix: list[str] = server.prefix  # type: ignore[attr-defined]
    hook = subprocess.run([*prefix, str(BIN / "agent-hook-pre-tool-use")], capture_output=True,
                          input=json.dumps(dict(pre, tool_use_id="toolu_exe")).encode(), env=server.env, timeout=30)
    assert hook.returncode == 0 and not hook.stderr, hook.stderr
    assert store_rows(home, "SELECT count(*) FROM tool_calls WHERE tool_use_id = 'toolu_exe'")[0][0] == 1
    wait_for(lambda: _ingest_status(server) == 200, 5, "the ingest route to answer 200")

    log = server_log(home)
    assert "Traceback" not in log, log
    assert log.count("store not writable") == 1, log
    assert log.count("store writable again") == 1 and "replayed 4" in log, log
    assert len(log.splitlines()) < 25, log
    state = server.status()["store_state"]
    assert state == {**state, "writable": True, "outages": 1, "replayed": 4}, state
    errors = (home / "logs" / "errors.log").read_text().splitlines()
    assert len(errors) == 2, errors  # the change, and the change back: not a line per call


def _ingest_status(server: Server) -> int:
    """The command center's answer to one ingest (its write goes through the board's thread)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", "/api/hooks/ingest", json.dumps({"tmux_session": "work-ro", "event": "start"}),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def test_a_store_replaced_by_a_read_only_one_is_spooled_until_writable(hooks_home: Path, tmp_path: Path) -> None:
    """A read-only store moved into the store's place while the server runs (a backup put back
    as 0444): the server follows the path to it, finds it cannot write it, spools, and replays
    into it once it is writable."""
    prefix = mode_binding_prefix(tmp_path)
    agent_hook("init")
    server = Server(hooks_home, free_port())
    try:
        start_with_prefix(server, prefix)
        pre = fixture_payload("PreToolUse-Bash.json")
        assert server.answer(dict(pre, tool_use_id="toolu_before")) is None
        other = tmp_path / "other"
        agent_hook("init", env={"AGENT_HOOKS_HOME": str(other)})
        (other / "store.db").chmod(0o444)
        for name in ("store.db-wal", "store.db-shm"):
            (hooks_home / name).unlink(missing_ok=True)
        os.replace(other / "store.db", hooks_home / "store.db")
        for i in range(3):  # the event loop's connection, then the pool's: each reopens, and cannot write
            status, headers, _ = server.post(dict(pre, tool_use_id=f"toolu_replaced_{i}"))
            assert status == 200 and "spooled" in headers.get("x-agent-hooks-problem", ""), headers
        assert store_rows(hooks_home, "SELECT count(*) FROM tool_calls")[0][0] == 0
        (hooks_home / "store.db").chmod(0o600)
        wait_for(lambda: _writable(server), 15, "the store writable again", show=lambda: server_log(hooks_home))
        assert server.answer(dict(pre, tool_use_id="toolu_after")) is None
        recorded = {r[0] for r in store_rows(hooks_home, "SELECT tool_use_id FROM tool_calls")}
        assert recorded == {"toolu_replaced_0", "toolu_replaced_1", "toolu_replaced_2", "toolu_after"}, recorded
        log = server_log(hooks_home)
        assert "Traceback" not in log and log.count("store not writable") == 1, log
        assert "replayed 3" in log, log
    finally:
        server.stop()


def test_a_store_the_server_cannot_open_at_start_is_retried_and_replayed(hooks_home: Path, tmp_path: Path) -> None:
    """A store the server may neither read nor write (0000) when it starts: SQLite cannot open it
    at all. The calls are spooled, and recorded once the store can be opened."""
    prefix = mode_binding_prefix(tmp_path)
    agent_hook("init")
    store = hooks_home / "store.db"
    store.chmod(0)
    server = Server(hooks_home, free_port())
    try:
        start_with_prefix(server, prefix)
        pre = fixture_payload("PreToolUse-Bash.json")
        for i in range(2):
            status, headers, _ = server.post(dict(pre, tool_use_id=f"toolu_unopened_{i}"))
            assert status == 200 and "spooled" in headers.get("x-agent-hooks-problem", ""), headers
        assert "unable to open" in server.status()["store_state"]["problem"]
        store.chmod(0o600)
        wait_for(lambda: _writable(server), 15, "the store writable again", show=lambda: server_log(hooks_home))
        assert server.answer(dict(pre, tool_use_id="toolu_opened")) is None
        recorded = {r[0] for r in store_rows(hooks_home, "SELECT tool_use_id FROM tool_calls")}
        assert recorded == {"toolu_unopened_0", "toolu_unopened_1", "toolu_opened"}, recorded
        log = server_log(hooks_home)
        assert "Traceback" not in log and log.count("store not writable") == 1 and "replayed 2" in log, log
    finally:
        store.chmod(0o600)
        server.stop()


def test_what_counts_as_a_store_that_cannot_be_written(tmp_path: Path) -> None:
    """Read-only and unopenable stores are kept for later (spool.unwritable); a busy store is the
    spool's other case (spool.transient), and a mistake in SQL is neither: it is reported."""
    import sqlite3

    path = tmp_path / "s.db"
    rw = sqlite3.connect(path, isolation_level=None)
    rw.execute("CREATE TABLE t (x)")
    ro = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError) as readonly:
        ro.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(sqlite3.OperationalError) as cannot_open:
        sqlite3.connect(tmp_path / "no-such-dir" / "s.db")
    rw.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError) as busy:
        other.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError) as no_table:
        ro.execute("SELECT * FROM missing")
    assert spool.unwritable(readonly.value) and spool.unwritable(cannot_open.value)
    assert spool.unwritable(PermissionError(13, "Permission denied"))
    assert not spool.unwritable(busy.value) and spool.transient(busy.value)
    assert not spool.unwritable(no_table.value) and not spool.unwritable(ValueError("x"))
    for conn in (rw, ro, other):
        conn.close()


def test_a_worker_killed_with_calls_spooled_leaves_them_to_the_next_worker(read_only_server: Server) -> None:
    """Calls spooled while the store could not be written, then the worker dies before its retries
    find the store writable (it is stopped, so it cannot), and the store is writable when the next
    worker starts: that worker's store check passes, so no outage starts and nothing replays. With
    http hooks alone no executable starts a replayer either, so the calls stayed unrecorded for good.
    The next worker replays what the spool owes when it starts. ("fresh": the dead worker left the
    store's -shm read-only; the next one's first connection mapped it so, and every retry after the
    repair was read-only too: it never recovered.)"""
    import signal

    server, home = read_only_server, read_only_server.home
    pre = fixture_payload("PreToolUse-Bash.json")
    for i in range(2):
        status, headers, _ = server.post(dict(pre, tool_use_id=f"toolu_left_{i}"))
        assert status == 200 and "spooled" in headers.get("x-agent-hooks-problem", ""), headers
    assert _spooled_lines(home) == 2
    worker = server.status()["worker_pid"]
    os.kill(worker, signal.SIGSTOP)  # its retry thread cannot see the store writable again
    (home / "store.db").chmod(0o600)
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: server.status().get("worker_pid") not in (None, worker), 15, "a new worker",
             show=lambda: server_log(home))
    wait_for(lambda: store_rows(home, "SELECT count(*) FROM tool_calls")[0][0] == 2, 10, "both calls in the store",
             show=lambda: server_log(home))
    recorded = {r[0] for r in store_rows(home, "SELECT tool_use_id FROM tool_calls")}
    assert recorded == {"toolu_left_0", "toolu_left_1"}, recorded
    assert _spooled_lines(home) == 0
    assert "replayed 2" in server_log(home), server_log(home)
