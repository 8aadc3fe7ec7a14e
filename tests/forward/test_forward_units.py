"""Forwarding units: the event map, coalescing, URL policy, and the drainer's client over httpx.MockTransport."""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_hooks import config as config_mod
from agent_hooks.dispatch import Context
from agent_hooks.forward import drain, eventmap, outbox
from agent_hooks.paths import Paths
from agent_hooks.payload import Payload
from agent_hooks.store import Store

from support.repo import FIXTURES

# The command center these tests name (none is named by default).
CENTER = "http://127.0.0.1:3000/api/hooks/ingest"


def cfg(**forward: Any) -> dict[str, Any]:
    c = copy.deepcopy(config_mod.DEFAULTS)
    c["forward"].update({"url": CENTER, **forward})
    return c


def payload(name: str, **changes: Any) -> Payload:
    raw = json.loads((FIXTURES / f"{name}.json").read_text())
    raw.update(changes)
    return Payload(raw)


# -- event map -------------------------------------------------------------------------------------

def test_contract_map_and_unmapped_events() -> None:
    c = cfg()
    assert [eventmap.contract_event(c, e) for e in
            ("SessionStart", "PostToolUse", "Notification", "UserPromptSubmit", "Stop")] == \
        ["start", "tool_use", "to_review", "prompt_ready", "exit"]
    for e in ("PreToolUse", "PostToolUseFailure", "PreCompact", "SessionEnd"):
        assert eventmap.contract_event(c, e) is None
    c["forward"]["event_map"]["Stop"] = ""
    c["forward"]["event_map"]["SessionEnd"] = "completed"
    assert eventmap.contract_event(c, "Stop") is None
    assert eventmap.contract_event(c, "SessionEnd") == "completed"


def test_metadata_is_short_and_never_raw_by_default() -> None:
    c = cfg()
    post = payload("PostToolUse-Bash")
    assert eventmap.metadata(post, c) == f"Bash: ok in {post.get('duration_ms')} ms"
    fail = payload("PostToolUseFailure-Bash")
    assert eventmap.metadata(fail, c).startswith("Bash: failed")
    prompt = payload("UserPromptSubmit")
    assert eventmap.metadata(prompt, c) == "prompt submitted (10 chars)"
    assert eventmap.metadata(payload("SessionStart-startup"), c) == "session startup"
    assert eventmap.metadata(payload("Stop"), c) == "turn ended"
    assert eventmap.metadata(payload("SessionEnd"), c) == "session ended: other"
    for p in (post, fail, prompt, payload("Stop"), payload("PreToolUse-Write")):
        text = eventmap.metadata(p, c)
        assert "echo a" not in text and "tidy notes" not in text and "Finished." not in text
        assert "\n" not in text


def test_metadata_with_include_raw_is_one_capped_line() -> None:
    c = cfg(include_raw=True, metadata_max_chars=40)
    post = payload("PostToolUse-Bash", tool_input={"command": "echo a\n" * 50})
    text = eventmap.metadata(post, c)
    assert text.startswith(f"Bash: ok in {post.get('duration_ms')} ms {{") and "echo a" in text
    assert len(text) == 40 and "\n" not in text and text.endswith("…")
    assert "tidy notes" in eventmap.metadata(payload("UserPromptSubmit"), cfg(include_raw=True))


def test_body_identification() -> None:
    p = payload("Stop")
    assert eventmap.build_body(p, "exit", {}, cfg()) is None  # no tmux name: skipped, as OptimalOS's launcher does
    assert eventmap.build_body(p, "exit", {}, cfg(forward_without_tmux=True)) == {
        "session_id": p.session_id, "event": "exit", "metadata": "turn ended", "agent_type": "claude-code"}
    env = {"OPTIMALOS_SESSION_TMUX": "agent-a", "AGENT_HOOKS_TMUX_SESSION": "agent-b"}
    body = eventmap.build_body(p, "exit", env, cfg())
    assert body == {"tmux_session": "agent-a", "event": "exit", "metadata": "turn ended", "agent_type": "claude-code"}
    assert eventmap.build_body(p, "exit", {"AGENT_HOOKS_TMUX_SESSION": "agent-b"}, cfg())["tmux_session"] == "agent-b"


# -- coalescing ------------------------------------------------------------------------------------

def test_coalesce_is_pure() -> None:
    assert not outbox.coalesce(None, "tool_use", 10, 30)
    assert outbox.coalesce(("running", 0.0), "tool_use", 29.9, 30)
    assert not outbox.coalesce(("running", 0.0), "tool_use", 30.0, 30)
    assert not outbox.coalesce(("awaiting_review", 0.0), "tool_use", 1, 30)
    assert not outbox.coalesce(("running", 0.0), "to_review", 1, 30)


def test_heartbeat_coalescing_in_the_store(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store.db"))
    sent = []

    def put(event: str, at: float) -> None:
        with store.write() as conn:
            eid = outbox.enqueue(conn, "agent-s", "x", event, {"event": event}, at, 30.0)
        sent.append((event, at, eid is not None))

    put("start", 0)
    put("tool_use", 1)  # running since 0: dropped
    put("tool_use", 29)  # dropped
    put("tool_use", 31)  # interval passed: a heartbeat
    put("tool_use", 40)  # dropped (heartbeat at 31)
    put("prompt_ready", 41)
    put("tool_use", 42)  # last state was not running: sent at once
    put("exit", 43)
    put("tool_use", 44)  # completed: sent (the server ignores it, but we do not guess)
    assert [s for s in sent if s[2]] == [("start", 0, True), ("tool_use", 31, True), ("prompt_ready", 41, True),
                                         ("tool_use", 42, True), ("exit", 43, True), ("tool_use", 44, True)]
    rows = store.conn.execute("SELECT event FROM outbox ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["start", "tool_use", "prompt_ready", "tool_use", "exit", "tool_use"]
    ids = store.conn.execute("SELECT event_id FROM outbox").fetchall()
    assert all(len(r[0]) == 32 and r[0][12] == "4" for r in ids) and len({r[0] for r in ids}) == 6
    store.close()


def test_a_broken_outbox_never_costs_the_hook_its_work(tmp_path: Path) -> None:
    env = {"AGENT_HOOKS_HOME": str(tmp_path), "AGENT_HOOKS_TMUX_SESSION": "agent-x"}
    paths = Paths(env)
    store = Store(paths.store)
    store.conn.execute("DROP TABLE outbox")
    ctx = Context(payload("Stop"), cfg(autostart=False), paths, env, store)
    with store.write() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('hook-work', 'done')")
        assert outbox.forward(conn, ctx) is None
    assert store.conn.execute("SELECT value FROM meta WHERE key = 'hook-work'").fetchone() == ("done",)
    (kind, message), = store.conn.execute("SELECT kind, message FROM errors").fetchall()
    assert kind == "error" and message.startswith("forward:") and "outbox" in message
    assert any(e["message"].startswith("forward:") for e in map(json.loads, open(paths.error_log)))
    store.close()


# -- URL policy, classification, backoff -----------------------------------------------------------

@pytest.mark.parametrize("url", ["http://127.0.0.1:3000/api/hooks/ingest", "http://localhost:3000/x",
                                 "http://[::1]:3000/x", "http://127.9.9.9/x"])
def test_loopback_urls_are_fine(url: str) -> None:
    assert drain.url_problem(url, False) is None


@pytest.mark.parametrize("url", ["http://192.0.2.1:3000/x", "https://board.example.com/api/hooks/ingest",
                                 "http://0.0.0.0:3000/x"])
def test_remote_urls_need_allow_remote(url: str) -> None:
    assert "allow_remote" in drain.url_problem(url, False)
    assert drain.url_problem(url, True) is None


def test_bad_urls() -> None:
    assert drain.url_problem("ftp://127.0.0.1/x", True)
    assert drain.url_problem("127.0.0.1:3000", False)


def test_classify_and_backoff() -> None:
    assert [drain.classify(s) for s in (200, 202, 204)] == ["ok"] * 3
    assert [drain.classify(s) for s in (408, 429, 500, 502, 503)] == ["transient"] * 5
    assert [drain.classify(s) for s in (301, 400, 401, 403, 404, 409, 410, 422)] == ["permanent"] * 8
    assert [drain.backoff(n, 1.0, 30.0) for n in (1, 2, 3, 5, 6, 10)] == [1, 2, 4, 16, 30, 30]


# -- the drainer over MockTransport ----------------------------------------------------------------

class World:
    """A store with queued events and a drainer whose HTTP goes to a handler function."""

    def __init__(self, tmp_path: Path, handler: Any, **forward: Any) -> None:
        self.env = {"AGENT_HOOKS_HOME": str(tmp_path / "h")}
        self.paths = Paths(self.env)
        defaults = dict(backoff_initial_s=0.01, backoff_max_s=0.05, poll_interval_s=0.005)
        defaults.update(forward)
        self.config = cfg(**defaults)
        self.store = Store(self.paths.store)
        self.requests: list[httpx.Request] = []
        self.handler = handler

        def record(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            return self.handler(request)

        self.transport = httpx.MockTransport(record)

    def put(self, session: str, event: str) -> str:
        with self.store.write() as conn:
            eid = outbox.enqueue(conn, session, "x", event, {"tmux_session": session, "event": event}, time.time())
        assert eid
        return eid

    def drain(self, idle: float = 0.0) -> drain.Drainer:
        d = drain.Drainer(self.paths, self.config, client=drain.make_client(self.config, self.transport),
                          idle_exit_s=idle)
        d.run()
        return d

    def rows(self) -> list[tuple[Any, ...]]:
        return self.store.conn.execute(
            "SELECT event_id, session_key, state, attempts, last_status FROM outbox ORDER BY id").fetchall()

    def sent(self) -> list[tuple[str, str]]:
        return [(json.loads(r.content)["tmux_session"], r.headers["idempotency-key"]) for r in self.requests]


def test_drainer_sends_the_exact_body_with_its_idempotency_key(tmp_path: Path) -> None:
    w = World(tmp_path, lambda r: httpx.Response(200))
    eid = w.put("agent-a", "start")
    stored = w.store.conn.execute("SELECT body FROM outbox").fetchone()[0]
    d = w.drain()
    assert d.delivered == 1 and w.rows() == []
    (req,) = w.requests
    assert req.method == "POST" and str(req.url) == "http://127.0.0.1:3000/api/hooks/ingest"
    assert req.headers["idempotency-key"] == eid and req.headers["content-type"] == "application/json"
    assert req.content == stored.encode()


def test_a_retrying_session_does_not_hold_up_the_others(tmp_path: Path) -> None:
    failures = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body["tmux_session"] == "agent-a" and failures["n"] < 2:
            failures["n"] += 1
            return httpx.Response(503)
        return httpx.Response(200)

    w = World(tmp_path, handler)
    a = [w.put("agent-a", e) for e in ("start", "prompt_ready", "exit")]
    b = [w.put("agent-b", e) for e in ("start", "prompt_ready", "exit")]
    d = w.drain()
    assert d.delivered == 6 and w.rows() == []
    ok_a = [k for s, k in w.sent() if s == "agent-a"]
    assert ok_a == [a[0], a[0], a[0], a[1], a[2]], "retries of the head, then the rest in order"
    assert [k for s, k in w.sent() if s == "agent-b"] == b
    # b was not made to wait for a's retries.
    assert w.sent().index(("agent-b", b[2])) < w.sent().index(("agent-a", a[1]))


def test_failing_answers_dead_letter_after_max_attempts_then_the_session_goes_on(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500) if json.loads(request.content)["event"] == "start" else httpx.Response(200)

    w = World(tmp_path, handler, max_attempts=3)
    first = w.put("agent-a", "start")
    w.put("agent-a", "exit")
    d = w.drain()
    assert d.dead == 1 and d.delivered == 1
    assert w.rows() == [(first, "agent-a", "dead", 3, 500)]
    assert [json.loads(r.content)["event"] for r in w.requests] == ["start", "start", "start", "exit"]


def test_a_permanent_answer_is_dead_lettered_at_once(tmp_path: Path) -> None:
    # A 404 (session not found) first tries to register the session; refused too, the event is dead at once.
    w = World(tmp_path, lambda r: httpx.Response(404, json={"error": "session not found"}))
    w.put("agent-a", "tool_use")
    d = w.drain()
    assert d.dead == 1 and [r.url.path for r in w.requests] == ["/api/hooks/ingest", "/api/hooks/sessions"]
    (row,) = w.rows()
    assert row[2:] == ("dead", 1, 404)
    err = w.store.conn.execute("SELECT last_error FROM outbox").fetchone()[0]
    assert err.startswith("HTTP 404") and "session not found" in err
    # Any other 4xx: one request, nothing more.
    w = World(tmp_path / "other", lambda r: httpx.Response(422, json={"error": "unknown event"}))
    w.put("agent-a", "tool_use")
    d = w.drain()
    assert d.dead == 1 and [r.url.path for r in w.requests] == ["/api/hooks/ingest"]


def test_retry_after_is_honoured_within_the_cap(tmp_path: Path) -> None:
    calls: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(time.time())
        return httpx.Response(429, headers={"Retry-After": "0.3"}) if len(calls) == 1 else httpx.Response(200)

    w = World(tmp_path, handler, backoff_max_s=1.0)
    w.put("agent-a", "start")
    w.drain()
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.29


def test_an_unreachable_server_counts_no_attempts_and_the_drainer_gives_up_for_a_while(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    w = World(tmp_path, handler, give_up_after_s=0.2)
    w.put("agent-a", "start")
    w.put("agent-a", "exit")
    t = time.time()
    w.drain()
    assert time.time() - t < 5
    assert len(w.requests) >= 3, "it kept trying"
    assert [r[2:4] for r in w.rows()] == [("queued", 0), ("queued", 0)]
    assert outbox.resume_at(w.paths) > time.time() - 1, "hooks are asked to wait before restarting it"
    meta = dict(w.store.conn.execute("SELECT key, value FROM meta").fetchall())
    assert "connection refused" in meta["forward.last_error"]


def test_a_second_drainer_exits_at_once(tmp_path: Path) -> None:
    w = World(tmp_path, lambda r: httpx.Response(200))
    w.put("agent-a", "start")
    from filelock import FileLock

    os.makedirs(w.paths.lock_dir, exist_ok=True)
    with FileLock(outbox.lock_path(w.paths)):
        assert outbox.drainer_alive(w.paths)
        d = w.drain()
        assert d.delivered == 0 and w.requests == []
    assert not outbox.drainer_alive(w.paths)
    assert w.drain().delivered == 1


def test_disabled_forwarding_sends_nothing(tmp_path: Path) -> None:
    w = World(tmp_path, lambda r: httpx.Response(200), enabled=False)
    w.put("agent-a", "start")
    w.drain()
    assert w.requests == [] and len(w.rows()) == 1


def test_a_burst_of_hooks_starts_one_drainer(tmp_path: Path) -> None:
    env = dict(os.environ, AGENT_HOOKS_HOME=str(tmp_path / "h"))
    paths = Paths(env)
    assert outbox.maybe_start_drainer(paths, env) is True
    # Until the new drainer takes its lock, the next hooks leave it be.
    assert outbox.maybe_start_drainer(paths, env) is False
    assert os.path.exists(outbox.starting_path(paths))
    end = time.time() + 20
    while os.path.exists(outbox.starting_path(paths)) and time.time() < end:
        time.sleep(0.02)
    assert not os.path.exists(outbox.starting_path(paths)), "the drainer clears the mark once it holds the lock"
    while outbox.drainer_alive(paths) and time.time() < end:
        time.sleep(0.02)  # no store here: it exits at once
    assert not outbox.drainer_alive(paths)
    # A stale mark (a drainer that died before its lock) only holds hooks back for the grace period.
    os.close(os.open(outbox.starting_path(paths), os.O_WRONLY | os.O_CREAT, 0o600))
    old = time.time() - 10
    os.utime(outbox.starting_path(paths), (old, old))
    assert outbox.maybe_start_drainer(paths, env, grace_s=5.0) is True
    while outbox.drainer_alive(paths) or os.path.exists(outbox.starting_path(paths)):
        assert time.time() < end + 20
        time.sleep(0.02)


def test_an_event_purged_during_its_send_cannot_take_a_new_event_with_it(tmp_path: Path) -> None:
    """`queue purge` while an event is on the wire, then a new event: the outbox reuses the row
    id (no AUTOINCREMENT), and settling the sent one by id alone deleted the new, unsent one."""
    reused: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if not reused:
            other = sqlite3.connect(w.paths.store)
            with other:
                other.execute("DELETE FROM outbox")  # purged meanwhile
                reused.append(outbox.enqueue(other, "agent-b", "x", "start", {"tmux_session": "agent-b"}, time.time()))
            reused.append(other.execute("SELECT id FROM outbox").fetchone()[0])
            other.close()
        return httpx.Response(200)

    w = World(tmp_path, handler)
    w.put("agent-a", "start")
    first_id = w.store.conn.execute("SELECT id FROM outbox").fetchone()[0]
    w.drain()
    assert reused[1] == first_id  # the purged event's row id, given to the new one
    sent = [r.headers["idempotency-key"] for r in w.requests]
    assert reused[0] in sent or [r[0] for r in w.rows()] == [reused[0]]  # sent, or still queued: not deleted


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
