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

from support.forward import Home, fixture


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
        assert repr(url) in h.cli("doctor", "--no-run", env=env).stdout
    finally:
        h.cleanup()


def test_a_send_that_raises_something_else_stops_the_drainer_with_a_trace(tmp_path: Path) -> None:
    """An exception in a session's worker was swallowed by the pool: the row stayed due and the drainer
    looped on it for ever without a word."""
    env = {"AGENT_HOOKS_HOME": str(tmp_path / "h")}
    paths = Paths(env)
    config = config_mod.defaults()
    config["forward"].update(url="http://127.0.0.1:3000/api/hooks/ingest", poll_interval_s=0.005, idle_exit_s=0.0)
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


# -- config.toml edits (hooks enable / disable) -------------------------------------------------------

def _handler_home(tmp_path: Path) -> Path:
    from support.handlers import write_handler

    home = tmp_path / "agent-hooks-home"
    write_handler(home / "hooks", "x")
    return home


def test_enable_edits_a_symlinked_config_at_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    from support.scripts import agent_hook

    home = _handler_home(tmp_path)
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "config.toml"
    real.write_text("# mine\n[loops]\nwindow = 30\n")
    (home / "config.toml").symlink_to(real)
    agent_hook("hooks", "enable", "x")
    assert (home / "config.toml").is_symlink(), "the dotfiles link was replaced by a copy"
    assert real.read_text() == "# mine\n[loops]\nwindow = 30\n\n[handlers.entries.x]\nenabled = true\n"


def test_enable_refuses_a_read_only_config_and_leaves_it_alone(tmp_path: Path) -> None:
    from support.scripts import agent_hook

    home = _handler_home(tmp_path)
    cfg = home / "config.toml"
    cfg.write_text("[loops]\nwindow = 30\n")
    cfg.chmod(0o400)
    proc = agent_hook("hooks", "enable", "x", check=False)
    assert proc.returncode == 1 and "read-only" in proc.stderr
    assert cfg.read_text() == "[loops]\nwindow = 30\n" and cfg.stat().st_mode & 0o777 == 0o400


def test_config_edits_leave_no_file_readable_by_others(tmp_path: Path) -> None:
    import os
    import subprocess

    from support.scripts import BIN

    home = _handler_home(tmp_path)
    (home / "config.toml").write_text("[loops]\nwindow = 30\n")
    # A user's usual umask: the CLI must not depend on it for the files it makes.
    subprocess.run(["sh", "-c", f"umask 022 && exec {BIN / 'agent-hook'} hooks enable x"], check=True,
                   env=dict(os.environ), capture_output=True)
    loose = {p.name: oct(p.stat().st_mode & 0o777) for p in home.iterdir()
             if p.is_file() and p.stat().st_mode & 0o077}
    assert loose == {}


# -- the spool ---------------------------------------------------------------------------------------

def test_a_replay_retry_the_full_spool_refuses_is_not_lost_silently(hooks_home: Path) -> None:
    """A replayed call that meets a busy store is spooled again; when the spool is full that save
    failed, its answer was ignored, the call counted as 'retried' and its taken file deleted."""
    from agent_hooks import spool
    from support.scripts import error_log, fixture_payload, run_hook

    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0
    env = {"AGENT_HOOKS_HOME": str(hooks_home)}
    paths = Paths(env)
    config = config_mod.load(paths, env)
    post = dict(fixture_payload("PostToolUse-Bash.json"), tool_use_id="toolu_full_1")
    line = json.dumps({"v": 1, "id": "call-full", "event": "PostToolUse", "at": time.time(), "tries": 0,
                       "env": {}, "data": json.dumps(post)}).encode()
    config["spool"]["max_bytes"] = 100  # full: the retry's line does not fit
    store = Store(paths.store, 50)
    blocker = sqlite3.connect(paths.store, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        outcome = spool._apply(store, paths, config, line)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        store.close()
    saved = b"call-full" in (Path(spool.pending_path(paths)).read_bytes() if spool.has_work(paths) else b"")
    traced = [e for e in error_log(hooks_home) if "toolu_full_1" in json.dumps(e) or "spool is full" in e["message"]]
    assert saved or (outcome == "failed" and traced), (outcome, saved, traced)


def test_a_forward_setting_the_hooks_repair_does_not_stop_delivery(tmp_path: Path) -> None:
    """Hooks load the config leniently (a wrong-typed value falls back to its default); the drainer
    loaded it strictly and died on int('four') at every pass: the events were never delivered."""
    from support.ingest_server import IngestServer

    srv = IngestServer().start()
    h = Home(tmp_path, srv)
    try:
        h.dir.mkdir(parents=True, exist_ok=True)
        (h.dir / "config.toml").write_text('[forward]\nconcurrency = "four"\n')
        assert h.hook("session-start", fixture("SessionStart-startup"), env=h.env).returncode == 0
        srv.wait_for(lambda: len(srv.accepted()) == 1, timeout=15, what="the start event")
        proc = h.cli("queue", "drain", env=h.env)
        assert proc.returncode == 0, proc.stderr
    finally:
        h.cleanup()
        srv.stop()
