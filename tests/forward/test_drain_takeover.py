"""`queue drain` while a drainer runs, and a drainer that notices the server is back."""

from __future__ import annotations

import time

from support.forward import Home, fixture, home, server  # noqa: F401 - fixtures
from support.ingest_server import IngestServer
from support.waiting import wait_for


def _slow_backoff(home: Home) -> None:
    # The drainer's outage backoff is long, as it is in real life after a few failed rounds.
    home.env["AGENT_HOOKS__FORWARD__BACKOFF_INITIAL_S"] = "60"
    home.env["AGENT_HOOKS__FORWARD__BACKOFF_MAX_S"] = "60"
    home.env["AGENT_HOOKS__FORWARD__GIVE_UP_AFTER_S"] = "600"


def _queue_two_with_a_drainer_in_backoff(home: Home, server: IngestServer) -> None:
    server.stop()
    _slow_backoff(home)
    home.hook("session-start", fixture("SessionStart-startup"))
    home.hook("user-prompt-submit", fixture("UserPromptSubmit"))
    wait_for(lambda: home.drainer_pid() is not None, 20, what="a drainer")
    wait_for(lambda: home.queue()["last_error"] is not None, 20, what="the drainer to meet the outage")
    assert home.queue()["depth"] == 2


def test_queue_drain_wakes_the_running_drainer_and_waits_for_delivery(home: Home, server: IngestServer) -> None:
    home.env["AGENT_HOOKS__FORWARD__PROBE_INTERVAL_S"] = "0"  # only the wake-up can end its 60 s backoff
    _queue_two_with_a_drainer_in_backoff(home, server)
    running = home.drainer_pid()
    server.start()
    started = time.monotonic()
    r = home.cli("queue", "drain")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "another drainer is running" not in r.stdout + r.stderr
    assert f"pid {running}" in r.stdout and "queued" in r.stdout  # progress while it waits
    assert "all delivered" in r.stdout
    assert time.monotonic() - started < 30  # not the 60 s backoff
    assert home.queue()["depth"] == 0
    assert len(server.accepted()) == 2


def test_queue_drain_takes_over_when_the_drainer_goes_away(home: Home, server: IngestServer) -> None:
    import os
    import signal

    _queue_two_with_a_drainer_in_backoff(home, server)
    os.kill(home.drainer_pid() or 0, signal.SIGKILL)
    home.wait_drainer_gone()
    server.start()
    r = home.cli("queue", "drain")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "delivered 2" in r.stdout
    assert home.queue()["depth"] == 0


def test_a_drainer_in_backoff_notices_when_the_server_is_back(home: Home, server: IngestServer) -> None:
    _queue_two_with_a_drainer_in_backoff(home, server)
    server.start()
    # Nobody asks: the drainer's cheap probe sees the port open long before its 60 s backoff ends.
    server.wait_for(lambda: len(server.accepted()) == 2, timeout=20, what="delivery after the outage")


def test_queue_drain_gives_up_after_its_timeout_with_what_is_left(home: Home, server: IngestServer) -> None:
    _queue_two_with_a_drainer_in_backoff(home, server)
    assert home.drainer_pid() is not None
    r = home.cli("queue", "drain", "--timeout", "0.5")  # the drainer is in a 60 s backoff: nothing is delivered
    assert r.returncode == 1 and "2 events still queued" in r.stderr
