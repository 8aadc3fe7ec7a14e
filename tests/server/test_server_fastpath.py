"""The hot routes' raw ASGI fast path and the one peer-uid lookup: real loopback sockets, real app."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_hooks import config as config_mod
from agent_hooks.paths import Paths
from agent_hooks.server import peer
from agent_hooks.server.app import create_app


@pytest.fixture()
def pair() -> Iterator[tuple[tuple[str, int], tuple[str, int]]]:
    """A real loopback TCP connection: (client address, server address)."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        with socket.create_connection(srv.getsockname()) as cli:
            acc, _ = srv.accept()
            with acc:
                yield cli.getsockname(), srv.getsockname()


def test_peer_uid_is_ours_by_sock_diag_and_by_proc(pair: Any) -> None:
    client, server = pair
    assert peer.peer_uid(client, server) == os.geteuid()
    assert peer._proc_uid(client, server) == os.geteuid()  # the fallback agrees
    assert peer.peer_uid(client, (server[0], server[1] + 1 if server[1] < 65535 else 1)) is None


def test_scope_uid_uses_the_connections_lookup(pair: Any) -> None:
    client, server = pair
    assert peer.same_user_scope({"client": client, "server": server})
    # The protocol looked the uid up when the connection was made: that answer wins.
    assert not peer.same_user_scope({"client": client, "server": server, peer.SCOPE_KEY: os.geteuid() + 1})
    assert peer.same_user_scope({"client": None, "server": None, peer.SCOPE_KEY: os.geteuid()})


async def _call(app: Any, scope: dict[str, Any], body: bytes) -> tuple[int, list[Any], bytes]:
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], sent[0]["headers"], b"".join(m.get("body", b"") for m in sent[1:])


def test_fast_path_answers_as_the_starlette_route(tmp_path: Path, pair: Any) -> None:
    env = {"AGENT_HOOKS_HOME": str(tmp_path), "HOME": str(tmp_path), "AGENT_HOOKS__FORWARD__ENABLED": "false"}
    paths = Paths(env)
    config, _ = config_mod.load_lenient(paths, env)
    app = create_app(paths, config, env, port=1)
    client, server = pair

    def scope(method: str, path: str, **extra: Any) -> dict[str, Any]:
        return {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
                "root_path": "", "scheme": "http", "http_version": "1.1", "client": client, "server": server,
                "headers": [(b"host", b"127.0.0.1:1"), (b"content-type", b"application/json")], **extra}

    async def run() -> None:
        bad = b"{not json"
        fast = await _call(app, scope("POST", "/api/hooks/ingest"), bad)
        slow = await _call(app.app, scope("POST", "/api/hooks/ingest"), bad)  # Starlette's router, same callable
        assert fast == slow
        assert fast[0] == 400 and "error" in json.loads(fast[2])
        # Another method on the path is still Starlette's: 405, not taken by the fast path.
        assert (await _call(app, scope("GET", "/api/hooks/ingest"), b""))[0] == 405
        # Another user's connection: 401 on a hook route, nothing read.
        other = scope("POST", "/hooks/PreToolUse", **{peer.SCOPE_KEY: os.geteuid() + 1})
        status, headers, body = await _call(app, other, b"{}")
        assert status == 401 and json.loads(body) == {"error": "only the server's own user may call this"}
        assert (b"content-type", b"application/json") in headers
        # A path with one more segment is not the hook route.
        assert (await _call(app, scope("POST", "/hooks/PreToolUse/x"), b"{}"))[0] == 404

    asyncio.run(run())


def test_the_event_loops_store_never_waits_before_its_first_commit(hooks_home: Path) -> None:
    """server/app.py's _LoopStore: a held write lock (another of the server's threads) or a busy
    SQLite (another process) raises Deferred, with the lock given back, until the call's first
    commit; after it the store waits like any other, so a call that has written runs to its end."""
    import sqlite3
    import threading

    from agent_hooks.dispatch import Deferred
    from agent_hooks.server.app import ServerState
    from agent_hooks.store import Store

    paths = Paths(dict(os.environ))
    state = ServerState(paths, config_mod.defaults(), dict(os.environ), port=0)
    assert state.loop_store() is None  # no store yet: the loop never creates or migrates one
    state._loop_store_retry = 0.0
    Store(paths.store).close()  # created and migrated, as the pool does at start-up
    store = state.loop_store()
    assert store is not None and store is state.loop_store() and store.deferrable
    with state.write_lock, pytest.raises(Deferred, match="another of the server's threads"):
        with store.write():
            raise AssertionError("ran while another thread held the write lock")
    other = sqlite3.connect(paths.store, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(Deferred, match="another process is writing"):
        with store.write():
            raise AssertionError("ran while another process held SQLite's write lock")
    other.execute("ROLLBACK")
    assert not state.write_lock.locked() and store.deferrable
    with store.write() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('loop-test', '1')")
    assert not store.deferrable and not state.write_lock.locked()
    # Committed once: a held lock is now waited for, not deferred.
    state.write_lock.acquire()
    threading.Timer(0.3, state.write_lock.release).start()
    with store.write() as conn:
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'loop-test'")
    assert other.execute("SELECT value FROM meta WHERE key = 'loop-test'").fetchone() == ("2",)
    other.close()
    store.close()


def test_the_event_loop_answers_nothing_from_a_store_not_in_wal_mode(hooks_home: Path) -> None:
    """In rollback-journal mode any reader fails a COMMIT at once with the loop's busy timeout
    of 0: such a store is left to the pool (doctor flags the mode)."""
    import sqlite3

    from agent_hooks.server.app import ServerState
    from agent_hooks.store import Store

    paths = Paths(dict(os.environ))
    Store(paths.store).close()
    conn = sqlite3.connect(paths.store, isolation_level=None)
    assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    conn.close()
    state = ServerState(paths, config_mod.defaults(), dict(os.environ), port=0)
    assert state.loop_store() is None


def test_a_failed_commit_is_rolled_back_and_the_connection_stays_usable(hooks_home: Path) -> None:
    """A COMMIT that fails (busy: a reader in a rollback-journal store) used to leave the
    transaction open; a long-lived connection would then hold the store's lock for good."""
    import sqlite3

    from agent_hooks.store import Store

    paths = Paths(dict(os.environ))
    Store(paths.store).close()
    setup = sqlite3.connect(paths.store, isolation_level=None)
    setup.execute("PRAGMA journal_mode=DELETE")
    setup.close()
    store = Store(paths.store, busy_timeout_ms=0)
    reader = sqlite3.connect(paths.store, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM meta").fetchone()  # a shared lock: COMMIT cannot write
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        with store.write() as conn:
            conn.execute("INSERT INTO meta (key, value) VALUES ('commit-test', '1')")
    assert not store.conn.in_transaction
    reader.execute("COMMIT")
    with store.write() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('commit-test', '2')")
    assert reader.execute("SELECT value FROM meta WHERE key = 'commit-test'").fetchone() == ("2",)
    reader.close()
    store.close()
