"""Several command centers, the host side: the switching rule (agent_hooks.forward.centers), forward.url as
a list, where a credential goes, and the drainer moving on (its HTTP over httpx.MockTransport)."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_hooks import config as config_mod
from agent_hooks import fleet
from agent_hooks.forward import centers, drain, outbox
from agent_hooks.paths import Paths
from agent_hooks.store import Store

FIRST = "http://127.0.0.1:3001/api/hooks/ingest"
SECOND = "http://127.0.0.1:3002/api/hooks/ingest"
THIRD = "http://127.0.0.1:3003/api/hooks/ingest"


# -- forward.url --------------------------------------------------------------------------------

def test_forward_url_is_one_url_or_a_list_in_order() -> None:
    assert centers.ingest_urls({"url": ""}) == []
    assert centers.ingest_urls({"url": FIRST}) == [FIRST]
    assert centers.ingest_urls({"url": [SECOND, " ", FIRST, SECOND]}) == [SECOND, FIRST], "order kept, no repeats"
    assert centers.ingest_urls({"url": FIRST + "\n"}) == [FIRST + "\n"], "refused by name later, never mended"
    c = copy.deepcopy(config_mod.DEFAULTS)
    c["forward"]["url"] = [FIRST, SECOND]
    assert config_mod.validate(c) == []
    c["forward"]["url"] = [FIRST, 3]
    assert config_mod.validate(c) == ["forward.url must be a URL or a list of URLs, got list ['http://127.0.0.1:3001/api/hooks/ingest', 3]"]
    layer = config_mod.env_layer({"AGENT_HOOKS_INGEST_URL": json.dumps([FIRST, SECOND])})
    assert layer == {"forward": {"url": [FIRST, SECOND]}}
    assert config_mod.env_layer({"AGENT_HOOKS__FORWARD__URL": FIRST}) == {"forward": {"url": FIRST}}
    problems: list[str] = []
    config_mod.env_layer({"AGENT_HOOKS_INGEST_URL": "[1, 2]"}, problems)
    assert problems and "a JSON list of URLs" in problems[0]


# -- the rule ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("status", "counts"), [(None, True), (500, True), (502, True), (503, True), (200, False),
                                                (400, False), (401, False), (403, False), (404, False),
                                                (408, False), (413, False), (429, False)])
def test_only_no_answer_or_a_5xx_counts_toward_moving_on(status: int | None, counts: bool) -> None:
    assert centers.failure(status) is counts


def test_a_sender_moves_the_host_on_after_n_tries_in_a_row() -> None:
    c = centers.Counter(3)
    assert not c.failed("drain", FIRST) and not c.failed("drain", FIRST)
    c.answered("drain", FIRST)  # an answer in between: the count starts over
    assert not c.failed("drain", FIRST) and not c.failed("drain", FIRST)
    assert not c.failed("report", FIRST), "each sender counts its own tries"
    assert c.failed("drain", FIRST)


def test_a_move_is_a_compare_and_set_on_the_stores_row(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "s.db"))
    urls = [FIRST, SECOND, THIRD]
    assert centers.read(store.conn, urls).url == FIRST, "no row yet: the first"
    with store.write() as conn:
        moved = centers.move(conn, urls, FIRST, "drain: refused", 100.0)
    assert (moved.url, moved.switched_from, moved.switched_at, moved.switches) == (SECOND, FIRST, 100.0, 1)
    # Another sender that saw the same outage asks to move on from FIRST too: the host stays on SECOND.
    with store.write() as conn:
        again = centers.move(conn, urls, FIRST, "report: refused", 101.0)
    assert again.url == SECOND and again.switches == 1
    with store.write() as conn:
        centers.move(conn, urls, SECOND, "x", 102.0)
        last = centers.move(conn, urls, THIRD, "y", 103.0)
    assert last.url == FIRST and last.switches == 3, "round the list, back to the first"
    # forward.url edited: the current center is kept while listed, else the host starts at the first.
    with store.write() as conn:
        centers.move(conn, urls, FIRST, "z", 104.0)
    assert centers.read(store.conn, [THIRD, SECOND]).url == SECOND
    assert centers.read(store.conn, [THIRD, FIRST]).url == THIRD
    # One center: nothing to move to.
    with store.write() as conn:
        assert centers.move(conn, [FIRST], FIRST, "n", 105.0).url == FIRST


def test_the_host_stays_unless_failback_is_set() -> None:
    choice = centers.Choice([FIRST, SECOND], 1, since=1000.0, switched_at=1000.0)
    assert not centers.failback_due(choice, 0.0, 10_000.0), "0: stay where the host moved to"
    assert not centers.failback_due(choice, 600.0, 1599.0)
    assert centers.failback_due(choice, 600.0, 1600.0)
    assert not centers.failback_due(centers.Choice([FIRST, SECOND], 0, since=0.0), 600.0, 10_000.0)


# -- where a credential goes ------------------------------------------------------------------

def test_a_credential_goes_to_the_centers_recorded_at_pairing_and_nowhere_else(tmp_path: Path) -> None:
    p = Paths({"AGENT_HOOKS_HOME": str(tmp_path / "h")})
    cfg = copy.deepcopy(config_mod.DEFAULTS)
    fleet.write_credential(p, "http://127.0.0.1:3001", "host-b", "s3cret", ["http://127.0.0.1:3002"])
    for url in (FIRST, SECOND, "http://127.0.0.1:3002"):
        assert fleet.client_headers(p, cfg, {}, url=url)["Authorization"] == "Bearer s3cret", url
    # forward.url naming another server does not make it a receiver: only what pairing recorded.
    cfg["forward"]["url"] = [FIRST, THIRD]
    assert "Authorization" not in fleet.client_headers(p, cfg, {}, url=THIRD)
    assert "Authorization" not in fleet.client_headers(p, cfg, {}, url="http://127.0.0.1:3002/elsewhere")
    # A file written before several centers: its own center only.
    path = fleet.credential_path(p)
    doc = json.loads(Path(path).read_text())
    del doc["centers"]
    Path(path).write_text(json.dumps(doc))
    assert fleet.read_credential(p)["centers"] == ["http://127.0.0.1:3001"]  # type: ignore[index]
    assert "Authorization" not in fleet.client_headers(p, cfg, {}, url=SECOND)


# -- the drainer moving on ----------------------------------------------------------------------

class Fleet:
    """A host store with queued events and a drainer whose HTTP goes to ``handlers[url]``."""

    def __init__(self, tmp_path: Path, handlers: dict[str, Any], **forward: Any) -> None:
        self.paths = Paths({"AGENT_HOOKS_HOME": str(tmp_path / "h")})
        self.config = copy.deepcopy(config_mod.DEFAULTS)
        self.config["forward"].update({"url": list(handlers), "backoff_initial_s": 0.01, "backoff_max_s": 0.02,
                                       "poll_interval_s": 0.005, "give_up_after_s": 2.0, **forward})
        self.store = Store(self.paths.store)
        self.sent: list[tuple[str, str]] = []  # (center's ingest URL, Idempotency-Key)

        def route(request: httpx.Request) -> httpx.Response:
            url = str(request.url)
            if request.url.path == "/api/hooks/sessions":  # a registration goes to its center's handler
                url = url.replace("/api/hooks/sessions", "/api/hooks/ingest")
                return handlers[url](request)  # type: ignore[no-any-return]
            self.sent.append((url, request.headers["idempotency-key"]))
            return handlers[url](request)  # type: ignore[no-any-return]

        self.transport = httpx.MockTransport(route)

    def put(self, session: str, event: str) -> str:
        with self.store.write() as conn:
            eid = outbox.enqueue(conn, session, "x", event, {"tmux_session": session, "event": event}, time.time())
        assert eid
        return eid

    def drain(self) -> drain.Drainer:
        d = drain.Drainer(self.paths, self.config, client=drain.make_client(self.config, self.transport),
                          idle_exit_s=0.0)
        d.run()
        return d


def refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def test_the_drainer_moves_on_after_n_unanswered_passes_and_keeps_each_events_key(tmp_path: Path) -> None:
    f = Fleet(tmp_path, {FIRST: refused, SECOND: lambda r: httpx.Response(200)}, failover_after=3)
    ids = [f.put("agent-a", e) for e in ("start", "prompt_ready", "exit")]
    d = f.drain()
    assert d.delivered == 3 and d.switches == 1
    assert [u for u, _ in f.sent].count(FIRST) == 3, "three tries at the first, then the next"
    assert [k for u, k in f.sent if u == SECOND] == ids, "in order, each with its own Idempotency-Key"
    choice = centers.read(f.store.conn, [FIRST, SECOND])
    assert choice.url == SECOND and choice.switched_from == FIRST and "connection refused" in (choice.reason or "")
    # The next drainer starts where the host is: the second center, no try at the first.
    f.sent.clear()
    f.put("agent-a", "start")
    f.drain()
    assert [u for u, _ in f.sent] == [SECOND]


def test_5xx_moves_the_host_on_but_4xx_never_does(tmp_path: Path) -> None:
    f = Fleet(tmp_path, {FIRST: lambda r: httpx.Response(503), SECOND: lambda r: httpx.Response(200)},
              failover_after=2)
    eid = f.put("agent-a", "start")
    d = f.drain()
    assert d.switches == 1 and d.delivered == 1 and f.sent == [(FIRST, eid), (FIRST, eid), (SECOND, eid)]

    g = Fleet(tmp_path / "g", {FIRST: lambda r: httpx.Response(401, json={"error": "who?"}),
                               SECOND: lambda r: httpx.Response(200)}, failover_after=1)
    g.put("agent-a", "start")
    d = g.drain()
    assert d.switches == 0 and d.dead == 1 and [u for u, _ in g.sent] == [FIRST], "a 4xx is final, never a move"
    assert centers.read(g.store.conn, [FIRST, SECOND]).url == FIRST


def test_with_every_center_down_the_drainer_gives_up_and_loses_nothing(tmp_path: Path) -> None:
    f = Fleet(tmp_path, {FIRST: refused, SECOND: refused}, failover_after=1, give_up_after_s=0.3)
    f.put("agent-a", "start")
    f.drain()
    assert {u for u, _ in f.sent} == {FIRST, SECOND}, "both tried"
    assert f.store.conn.execute("SELECT state, attempts FROM outbox").fetchall() == [("queued", 0)]


def test_after_a_move_a_session_is_registered_before_its_first_event(tmp_path: Path) -> None:
    """The second center never saw the session's start: without its registration first, it would refuse
    the session's next event with 404 (final), and the event would be lost to a dead letter."""
    known: set[str] = set()

    def second(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == "/api/hooks/sessions":
            known.add(body["session_id"])
            return httpx.Response(201, json={"id": body["session_id"]})
        if body["event"] != "start" and body["session_id"] not in known:
            return httpx.Response(404, json={"error": "session not found"})
        return httpx.Response(200)

    f = Fleet(tmp_path, {FIRST: refused, SECOND: second}, failover_after=1)
    with f.store.write() as conn:
        eid = outbox.enqueue(conn, "s-1", "x", "tool_use", {"session_id": "s-1", "event": "tool_use",
                                                           "agent_type": "claude-code"}, time.time())
    d = f.drain()
    assert d.delivered == 1 and d.dead == 0 and known == {"s-1"}
    assert f.sent[-1] == (SECOND, eid)


def test_an_event_of_a_session_the_center_never_saw_start_is_registered_and_sent_again(tmp_path: Path) -> None:
    """One center, no move: a session whose start was never forwarded (its first event here is a
    permission dialog) is answered 404, which is final; the drainer registers it and sends the event
    again, once, instead of letting it die. Another 404 after that is final, as the contract says."""
    known: set[str] = set()

    def center(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == "/api/hooks/sessions":
            if body["session_id"] != "s-unregistrable":
                known.add(body["session_id"])
                return httpx.Response(201, json={"id": body["session_id"]})
            return httpx.Response(400, json={"error": "no"})
        if body["event"] != "start" and body["session_id"] not in known:
            return httpx.Response(404, json={"error": "session not found"})
        return httpx.Response(200)

    f = Fleet(tmp_path, {FIRST: center})
    with f.store.write() as conn:
        eid = outbox.enqueue(conn, "s-1", "x", "to_review", {"session_id": "s-1", "event": "to_review",
                                                            "agent_type": "claude-code"}, time.time())
        lost = outbox.enqueue(conn, "s-unregistrable", "x", "to_review",
                              {"session_id": "s-unregistrable", "event": "to_review"}, time.time())
    d = f.drain()
    assert known == {"s-1"} and d.delivered == 1 and d.dead == 1
    assert f.sent.count((FIRST, eid)) == 2 and f.sent.count((FIRST, lost)) == 1  # once more, after the registration
