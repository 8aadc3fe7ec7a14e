"""`agent-hook queue`: status, drain, retry and purge, through the installed CLI."""

from __future__ import annotations

import json
import os

from support.forward import Home, fixture, home, server  # noqa: F401 - fixtures
from support.ingest_server import IngestServer

KEYS = {"enabled", "url", "centers", "problem", "problems", "depth", "oldest_at", "oldest_age_s", "retrying", "dead",
        "dead_letters", "drainer_alive", "drainer_pid", "last_ok_at", "last_error", "last_error_at"}


def test_queue_on_a_fresh_home_is_read_only(home: Home) -> None:
    data = home.queue()
    assert set(data) == KEYS
    assert data["depth"] == 0 and data["dead"] == 0 and data["problem"] is None and data["problems"] == []
    assert data["url"].startswith("http://127.0.0.1:")
    assert not os.path.exists(home.paths.store), "a read-only command never creates the store"
    r = home.cli("queue")
    assert r.returncode == 0 and "queued: 0" in r.stdout and "drainer: not running" in r.stdout


def test_queue_names_configuration_problems(home: Home) -> None:
    home.env["AGENT_HOOKS__FORWARD__EVENT_MAP"] = json.dumps({"Stop": "finished", "Bogus": "exit"})
    home.env["AGENT_HOOKS_INGEST_URL"] = "http://10.0.0.8:3000/api/hooks/ingest"
    data = home.queue()
    assert "allow_remote" in data["problem"]
    assert any("'finished' is not an event of the contract" in p for p in data["problems"])
    assert any("'Bogus' is not a hook event" in p for p in data["problems"])
    r = home.cli("queue")
    assert r.stdout.count("problem: ") == 3


def test_purge_and_retry(home: Home, server: IngestServer) -> None:
    home.env["AGENT_HOOKS__FORWARD__AUTOSTART"] = "false"
    home.hook("session-start", fixture("SessionStart-startup"))
    server.mode = "400"
    assert home.cli("queue", "drain").returncode == 0
    home.hook("stop", fixture("Stop"))  # queued, not yet sent
    data = home.queue()
    assert data["dead"] == 1 and data["depth"] == 1 and data["oldest_age_s"] >= 0
    text = home.cli("queue").stdout
    assert "dead #" in text and "HTTP 400" in text

    r = home.cli("queue", "retry")
    assert r.returncode != 0 and "--all" in r.stderr
    r = home.cli("queue", "retry", "999")
    assert "requeued 0" in r.stdout and "not dead letters" in r.stderr

    assert "purged 1" in home.cli("queue", "purge").stdout  # --dead is the default
    data = home.queue()
    assert data["dead"] == 0 and data["depth"] == 1
    assert "purged 1" in home.cli("queue", "purge", "--all", "--yes").stdout
    assert home.queue()["depth"] == 0


def test_drain_reports_what_is_left(home: Home, server: IngestServer) -> None:
    home.env["AGENT_HOOKS__FORWARD__AUTOSTART"] = "false"
    home.env["AGENT_HOOKS__FORWARD__GIVE_UP_AFTER_S"] = "0.3"
    home.hook("session-start", fixture("SessionStart-startup"))
    server.stop()
    r = home.cli("queue", "drain")
    assert r.returncode == 1 and "1 event still queued" in r.stderr and "unreachable" in r.stdout
    data = home.queue()
    assert data["depth"] == 1 and data["retrying"] == 0 and "Connect" in data["last_error"]
    server.start()
    r = home.cli("queue", "drain")
    assert r.returncode == 0 and "delivered 1" in r.stdout
    assert home.queue()["last_ok_at"]


def test_doctor_reports_a_refused_url_without_probing_it(home: Home) -> None:
    home.env["AGENT_HOOKS_INGEST_URL"] = "http://192.0.2.44:3000/api/hooks/ingest"
    home.env["AGENT_HOOKS__FORWARD__EVENT_MAP"] = json.dumps({"Stop": "finished"})
    r = home.cli("doctor", "--no-run", "--json")
    data = json.loads(r.stdout)
    checks = [c for c in data["checks"] if c["area"] == "forward"]
    assert any(c["status"] == "fail" and "not a loopback address" in c["summary"] for c in checks), checks
    assert any(c["status"] == "warn" and "'finished'" in c["summary"] for c in checks), checks
    assert r.returncode == 1
