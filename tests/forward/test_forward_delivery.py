"""Forwarding against a real contract server on 127.0.0.1, through the installed hooks."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from agent_hooks import config as config_mod
from agent_hooks.forward import outbox
from agent_hooks.store import Store

from support.forward import SESSION, Home, fixture, home, log_text, notification, server  # noqa: F401 - fixtures
from support.ingest_server import IngestServer
from support.scripts import BIN
from support.waiting import wait_for


def enqueue_many(h: Home, n: int, sessions: int) -> list[tuple[str, str]]:
    """Queue n events spread over sessions through the outbox API; (session, event id) in order."""
    store = Store(h.paths.store)
    out: list[tuple[str, str]] = []
    try:
        with store.write() as conn:
            for i in range(n):
                key = f"agent-bulk-{i % sessions}"
                # start, then alternate the two events the state machine moves on.
                event = "start" if i < sessions else ("to_review" if (i // sessions) % 2 else "running")
                body = {"tmux_session": key, "event": event, "metadata": f"n={i}", "agent_type": "claude-code"}
                eid = outbox.enqueue(conn, key, "test", event, body, time.time(), 0.0)
                assert eid
                out.append((key, eid))
    finally:
        store.close()
    return out


def first_receipts(srv: IngestServer) -> dict[str, list[str]]:
    """Per session, the Idempotency-Keys in order of first 200."""
    seen: set[str] = set()
    per: dict[str, list[str]] = defaultdict(list)
    for r in srv.accepted():
        if r["key"] in seen:
            continue
        seen.add(r["key"])
        per[r["body"]["tmux_session"]].append(r["key"])
    return per


def assert_same_id_duplicates_only(srv: IngestServer) -> None:
    bodies: dict[str, bytes] = {}
    for r in srv.requests:
        assert r["key"], "every request carries an Idempotency-Key"
        assert bodies.setdefault(r["key"], r["raw"]) == r["raw"], "a resend must be the same event"


def expected_per_session(events: list[tuple[str, str]]) -> dict[str, list[str]]:
    per: dict[str, list[str]] = defaultdict(list)
    for key, eid in events:
        per[key].append(eid)
    return per


# (a) ---------------------------------------------------------------------------------------------

def test_a_whole_session_drives_the_state_machine_in_order(home: Home, server: IngestServer) -> None:
    steps = [
        ("session-start", fixture("SessionStart-startup")),
        ("user-prompt-submit", fixture("UserPromptSubmit")),
        ("pre-tool-use", fixture("PreToolUse-Read")),
        ("post-tool-use", fixture("PostToolUse-Read")),
        ("pre-tool-use", fixture("PreToolUse-Bash")),
        ("post-tool-use", fixture("PostToolUse-Bash")),  # coalesced: already running, heartbeat fresh
        ("notification", notification()),
        ("stop", fixture("Stop")),
        ("session-end", fixture("SessionEnd")),
    ]
    for script, payload in steps:
        r = home.hook(script, payload)
        assert r.returncode == 0 and r.stdout == b"", (script, r.stderr)
    server.wait_for(lambda: len(server.accepted()) >= 5, what="five events")
    home.wait_drainer_gone()
    got = [r["body"] for r in server.accepted()]
    assert [b["event"] for b in got] == ["start", "prompt_ready", "tool_use", "to_review", "exit"]
    assert {b["tmux_session"] for b in got} == {"agent-forward-test"}
    assert all(b["agent_type"] == "claude-code" and "session_id" not in b for b in got)
    # metadata names the tool, never its input or output.
    assert got[2]["metadata"] == f"Read: ok in {fixture('PostToolUse-Read')['duration_ms']} ms"
    text = json.dumps(got)
    assert "notes.txt" not in text and "tidy notes" not in text and "Finished." not in text
    (session,) = server.sessions.values()
    assert session["history"] == [
        ("start", "running"), ("prompt_ready", "awaiting_review"), ("tool_use", "running"),
        ("to_review", "awaiting_review"), ("exit", "completed"),
    ]
    assert session["state"] == "completed"
    assert len(server.requests) == 5 and len({r["key"] for r in server.requests}) == 5
    q = home.queue()
    assert q["depth"] == 0 and q["dead"] == 0 and not q["drainer_alive"]


def test_a_without_tmux_name_sessions_are_skipped_unless_configured(home: Home, server: IngestServer) -> None:
    env = {k: v for k, v in home.env.items() if k != "AGENT_HOOKS_TMUX_SESSION"}
    home.hook("session-start", fixture("SessionStart-startup"), env=env)
    assert home.queue()["depth"] == 0
    assert not outbox.drainer_alive(home.paths)
    # Opted in: identified by Claude Code's session_id (the server must know how to register it).
    server.register_session_ids = True
    env["AGENT_HOOKS__FORWARD__FORWARD_WITHOUT_TMUX"] = "true"
    home.hook("session-start", fixture("SessionStart-startup"), env=env)
    home.hook("stop", fixture("Stop"), env=env)
    server.wait_for(lambda: len(server.accepted()) == 2, what="two events")
    bodies = [r["body"] for r in server.accepted()]
    assert [b.get("session_id") for b in bodies] == [SESSION, SESSION]
    assert all("tmux_session" not in b for b in bodies)
    assert server.sessions[SESSION]["state"] == "completed"


def test_a_optimalos_variable_names_the_session(home: Home, server: IngestServer) -> None:
    env = dict(home.env)
    del env["AGENT_HOOKS_TMUX_SESSION"]
    env["OPTIMALOS_SESSION_TMUX"] = "agent-optimalos-7"
    home.hook("session-start", fixture("SessionStart-startup"), env=env)
    server.wait_for(lambda: len(server.accepted()) == 1, what="start")
    assert server.accepted()[0]["body"]["tmux_session"] == "agent-optimalos-7"


# (b) ---------------------------------------------------------------------------------------------

def test_b_server_down_for_1000_events_then_up_loses_nothing(home: Home, server: IngestServer) -> None:
    server.stop()
    Store(home.paths.store).close()  # create the store
    events = enqueue_many(home, 1000, sessions=4)
    drainer = home.start_drainer()
    time.sleep(1.5)  # several failed connection rounds
    assert drainer.poll() is None, "the drainer waits out the outage"
    q = home.queue()
    assert q["depth"] == 1000 and q["dead"] == 0 and q["retrying"] == 0, "an outage counts no attempts"
    assert server.requests == []
    server.start()
    server.wait_for(lambda: len({r["key"] for r in server.accepted()}) >= 1000, timeout=60, what="1000 events")
    drainer.wait(timeout=30)
    assert first_receipts(server) == expected_per_session(events)
    assert_same_id_duplicates_only(server)
    assert {r["status"] for r in server.requests} == {200}
    q = home.queue()
    assert q["depth"] == 0 and q["dead"] == 0


def test_b_drainer_exits_after_long_outage_and_hooks_resume_it(home: Home, server: IngestServer) -> None:
    server.stop()
    home.env["AGENT_HOOKS__FORWARD__GIVE_UP_AFTER_S"] = "0.6"
    home.hook("session-start", fixture("SessionStart-startup"))
    wait_for(lambda: outbox.resume_at(home.paths) > 0, 20, what="the drainer to give up")
    home.wait_drainer_gone()  # gave up, events kept
    assert home.queue()["depth"] == 1
    # Within the pause a hook does not start another drainer.
    home.env["AGENT_HOOKS__FORWARD__BACKOFF_MAX_S"] = "0.2"
    server.start()
    time.sleep(0.3)  # past the pause
    home.hook("user-prompt-submit", fixture("UserPromptSubmit"))
    server.wait_for(lambda: len(server.accepted()) == 2, what="both events")
    assert [r["body"]["event"] for r in server.accepted()] == ["start", "prompt_ready"]


# (c) ---------------------------------------------------------------------------------------------

def test_c_kill_9_mid_drain_repeated_loses_nothing(home: Home, server: IngestServer) -> None:
    server.delay_s = 0.002  # long enough for the kills to land mid-drain
    Store(home.paths.store).close()
    events = enqueue_many(home, 600, sessions=3)
    kills = 0
    for _ in range(5):
        before = len(server.requests)
        p = home.start_drainer()
        server.wait_for(lambda before=before: len(server.requests) >= before + 40, what="progress")
        p.send_signal(signal.SIGKILL)
        p.wait()
        kills += 1
    assert kills == 5
    assert len({r["key"] for r in server.accepted()}) < 600, "the kills landed before the end"
    p = home.start_drainer()
    assert p.wait(timeout=60) == 0
    assert first_receipts(server) == expected_per_session(events)
    assert_same_id_duplicates_only(server)
    q = home.queue()
    assert q["depth"] == 0 and q["dead"] == 0


# (d) ---------------------------------------------------------------------------------------------

def test_d_permanent_400_is_dead_lettered_and_retry_resends_it(home: Home, server: IngestServer) -> None:
    home.env["AGENT_HOOKS__FORWARD__AUTOSTART"] = "false"
    home.hook("session-start", fixture("SessionStart-startup"))
    home.hook("user-prompt-submit", fixture("UserPromptSubmit"))
    server.mode = "400"
    r = home.cli("queue", "drain")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dead-lettered 2" in r.stdout
    assert len(server.requests) == 2, "a permanent answer is not retried"
    q = home.queue()
    assert q["depth"] == 0 and q["dead"] == 2
    dead = q["dead_letters"]
    assert [d["event"] for d in dead] == ["start", "prompt_ready"] and dead[0]["status"] == 400
    assert dead[0]["attempts"] == 1
    keys = [rq["key"] for rq in server.requests]
    server.mode = "ok"
    home.env["AGENT_HOOKS__FORWARD__AUTOSTART"] = "true"
    r = home.cli("queue", "retry", str(dead[0]["id"]))
    assert "requeued 1" in r.stdout
    server.wait_for(lambda: len(server.accepted()) == 1, what="the resent event")
    assert server.accepted()[0]["key"] == keys[0], "the same id goes out again"
    r = home.cli("queue", "retry", "--all")
    assert "requeued 1" in r.stdout
    server.wait_for(lambda: len(server.accepted()) == 2, what="the second")
    assert [rq["key"] for rq in server.accepted()] == keys
    home.wait_drainer_gone()
    assert home.queue()["dead"] == 0
    assert list(server.sessions.values())[0]["state"] == "awaiting_review"


def test_d_failing_answers_retry_then_dead_letter_without_blocking_the_session(home: Home, server: IngestServer) -> None:
    home.env["AGENT_HOOKS__FORWARD__AUTOSTART"] = "false"
    home.env["AGENT_HOOKS__FORWARD__MAX_ATTEMPTS"] = "3"
    home.hook("session-start", fixture("SessionStart-startup"))
    server.mode = "500"
    assert home.cli("queue", "drain").returncode == 0
    assert [r["status"] for r in server.requests] == [500, 500, 500]
    assert home.queue()["dead"] == 1
    # 429 is transient too; the next event of the session goes out after the dead letter.
    home.hook("user-prompt-submit", fixture("UserPromptSubmit"))
    server.mode = "429"
    drain = subprocess.Popen([str(BIN / "agent-hook"), "queue", "drain"],
                             env=home.env, stdout=subprocess.PIPE, text=True)
    server.wait_for(lambda: sum(r["status"] == 429 for r in server.requests) >= 1, what="a 429")
    server.mode = "ok"
    drain.wait(timeout=30)
    assert server.accepted()[-1]["body"]["event"] == "prompt_ready"
    q = home.queue()
    assert q["depth"] == 0 and q["dead"] == 1


def test_d_unknown_contract_event_is_refused_by_the_server(home: Home, server: IngestServer) -> None:
    home.env["AGENT_HOOKS__FORWARD__AUTOSTART"] = "false"
    home.env["AGENT_HOOKS__FORWARD__EVENT_MAP"] = json.dumps({"Stop": "finished"})
    home.hook("stop", fixture("Stop"))
    home.cli("queue", "drain")
    assert [r["status"] for r in server.requests] == [400]
    assert home.queue()["dead_letters"][0]["error"].startswith("HTTP 400")


# (e) ---------------------------------------------------------------------------------------------

HOOK_CEILING_S = 2.0  # half the hook deadline; a hook that waited on a 30 s hang would blow it


def _timed_hooks(h: Home, n: int) -> list[float]:
    times = []
    for i in range(n):
        payload = fixture("PostToolUse-Bash", tool_use_id=f"toolu_e{i}") if i % 2 else fixture("UserPromptSubmit")
        t = time.perf_counter()
        r = h.hook("post-tool-use" if i % 2 else "user-prompt-submit", payload)
        times.append(time.perf_counter() - t)
        assert r.returncode == 0 and r.stdout == b""
    return times


def test_e_hooks_do_not_wait_while_the_server_hangs(home: Home, server: IngestServer) -> None:
    home.env["AGENT_HOOKS__FORWARD__TIMEOUT_S"] = "30"
    server.mode = "hang"
    home.hook("session-start", fixture("SessionStart-startup"))
    server.wait_for(lambda: server.hanging == 1, what="the drainer to hang")
    connections = server.connections
    times = _timed_hooks(home, 10)
    assert max(times) < HOOK_CEILING_S, times
    # Only the drainer's one connection ever reached the server; the hooks opened none.
    assert server.connections == connections == 1
    assert server.hanging == 1
    assert home.queue()["depth"] == 11


def test_e_hooks_do_not_wait_while_the_server_is_down(home: Home, server: IngestServer) -> None:
    server.stop()
    times = _timed_hooks(home, 10)
    assert max(times) < HOOK_CEILING_S, times
    assert home.queue()["depth"] == 10


def test_e_the_hook_process_never_loads_the_network_stack(home: Home, server: IngestServer) -> None:
    server.stop()
    assert home.cli("init").returncode == 0  # steady state: first use migrates (sqlite-utils), hooks do not
    for script, name in (("session-start", "SessionStart-startup"), ("post-tool-use", "PostToolUse-Bash")):
        module = script.replace("-", "_")
        r = subprocess.run(
            [sys.executable, "-X", "importtime", "-c",
             f"from agent_hooks.events.{module} import main; raise SystemExit(main())"],
            input=json.dumps(fixture(name, tool_use_id="toolu_imp")).encode(), capture_output=True,
            env=home.env, timeout=30,
        )
        assert r.returncode == 0
        loaded = {line.split("|")[-1].strip() for line in r.stderr.decode().splitlines() if "|" in line}
        assert "agent_hooks.forward.outbox" in loaded
        for banned in ("socket", "httpx", "httpcore", "filelock", "click", "sqlite_utils", "ssl"):
            assert banned not in loaded, f"{script} imported {banned}"
    assert home.queue()["depth"] == 1  # the tool_use was coalesced behind the fresh start


# configuration -------------------------------------------------------------------------------------

def test_non_loopback_url_stays_queued_unless_allowed(home: Home, server: IngestServer) -> None:
    home.env["AGENT_HOOKS_INGEST_URL"] = "http://192.0.2.10:3000/api/hooks/ingest"
    home.hook("session-start", fixture("SessionStart-startup"))
    wait_for(lambda: "not a loopback address" in log_text(home), 20, what="the drainer's refusal")
    home.wait_drainer_gone()
    q = home.queue()
    assert q["depth"] == 1 and "allow_remote" in q["problem"]
    # Still paused: the next hook does not start a drainer that would refuse again.
    home.hook("stop", fixture("Stop"))
    assert home.queue()["depth"] == 2 and not outbox.drainer_alive(home.paths)


def test_forwarding_can_be_turned_off(home: Home, server: IngestServer) -> None:
    home.env["AGENT_HOOKS__FORWARD__ENABLED"] = "false"
    home.hook("session-start", fixture("SessionStart-startup"))
    assert home.queue()["depth"] == 0 and server.requests == []


def test_config_defaults_validate() -> None:
    assert config_mod.validate(config_mod.DEFAULTS) == []
    assert config_mod.DEFAULTS["forward"]["event_map"] == {
        "SessionStart": "start", "PostToolUse": "tool_use", "Notification": "to_review",
        "UserPromptSubmit": "prompt_ready", "Stop": "exit",
        # The waiting states: a permission dialog, a turn ended on an API error.
        "PermissionRequest": "to_review", "Elicitation": "to_review", "StopFailure": "exit_error",
    }


def test_drainers_that_come_and_go_strand_nothing(home: Home, server: IngestServer) -> None:
    # A drainer that idles 50 ms exits between most hook calls: every call races the exit protocol.
    import random
    import threading

    home.env["AGENT_HOOKS__FORWARD__IDLE_EXIT_S"] = "0.05"
    rng = random.Random(7)
    n_threads, per_thread = 3, 8

    def agent(t: int) -> None:
        env = dict(home.env, AGENT_HOOKS_TMUX_SESSION=f"agent-race-{t}")
        for i in range(per_thread):
            script, name = (("user-prompt-submit", "UserPromptSubmit") if i % 2 == 0 else ("stop", "Stop"))
            home.hook(script, fixture(name), env=env)
            time.sleep(rng.uniform(0, 0.15))

    threads = [threading.Thread(target=agent, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    total = n_threads * per_thread
    server.wait_for(lambda: len({r["key"] for r in server.accepted()}) == total, timeout=30,
                    what="every event without a manual drain")
    per_session: dict[str, list[str]] = defaultdict(list)
    for r in server.accepted():
        per_session[r["body"]["tmux_session"]].append(r["body"]["event"])
    assert all(events == ["prompt_ready", "exit"] * (per_thread // 2) for events in per_session.values())
    assert len(per_session) == n_threads


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


def test_a_forward_setting_the_hooks_repair_does_not_stop_delivery(tmp_path: Path) -> None:
    """Hooks load the config leniently (a wrong-typed value falls back to its default); the drainer
    loaded it strictly and died on int('four') at every pass: the events were never delivered."""
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
