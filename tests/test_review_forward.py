"""Review of durability: the outbox, the spool, config and settings writers (subprocesses, real files)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest

from agent_hooks import config as config_mod
from agent_hooks.forward import drain, outbox
from agent_hooks.paths import Paths
from agent_hooks.store import Store

from forward_support import Home, fixture


# -- forwarding --------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["http://127.0.0.1:30a0/api/hooks/ingest",
                                 "http://127.0.0.1:3000/api/hooks/ingest\n"])
def test_a_url_the_client_refuses_is_named_and_the_events_stay_queued(tmp_path: Path, url: str) -> None:
    """It passed the loopback check (urlsplit drops a newline, reads no port) but httpx refuses it on
    every send: `queue drain` spun for ever, the detached drainer too, and doctor said all was well."""
    h = Home(tmp_path, None)
    try:
        env = dict(h.env, AGENT_HOOKS_INGEST_URL=url, AGENT_HOOKS__FORWARD__AUTOSTART="false")
        assert h.hook("session-start", fixture("SessionStart-startup"), env=env).returncode == 0
        proc = h.cli("queue", "drain", env=env)
        assert proc.returncode == 1 and "still queued" in proc.stderr
        assert repr(url) in proc.stdout
        rows = sqlite3.connect(h.dir / "store.db").execute("SELECT state FROM outbox").fetchall()
        assert rows == [("queued",)]  # kept for when the URL is fixed
        assert repr(url) in h.cli("doctor", env=env).stdout
    finally:
        h.cleanup()


def test_a_send_that_raises_something_else_stops_the_drainer_with_a_trace(tmp_path: Path) -> None:
    """An exception in a session's worker was swallowed by the pool: the row stayed due and the drainer
    looped on it for ever without a word."""
    env = {"AGENT_HOOKS_HOME": str(tmp_path / "h")}
    paths = Paths(env)
    config = config_mod.defaults()
    config["forward"].update(poll_interval_s=0.005, idle_exit_s=0.0)
    store = Store(paths.store)
    with store.write() as conn:
        outbox.enqueue(conn, "agent-a", "x", "start", {"tmux_session": "agent-a", "event": "start"}, time.time())

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.InvalidURL("Invalid non-printable ASCII character in URL")

    client = drain.make_client(config, httpx.MockTransport(refuse))
    runner = threading.Thread(target=drain.Drainer(paths, config, client=client).run, daemon=True)
    runner.start()
    runner.join(10)
    assert not runner.is_alive(), "the drainer loops on an event it can never send"
    assert store.conn.execute("SELECT state, attempts FROM outbox").fetchall() == [("queued", 0)]
    problem = dict(store.conn.execute("SELECT key, value FROM meta").fetchall())["forward.problem"]
    assert "InvalidURL" in problem
    assert "InvalidURL" in Path(paths.error_log).read_text()
