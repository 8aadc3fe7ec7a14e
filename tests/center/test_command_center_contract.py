"""The ingest contract against the running server (`agent-hook server start`): every event from every
state, auto-registration, idempotent registration, PATCH, DELETE, each error code, the order of the
WebSocket's broadcasts, and this host's hook calls reaching the board.

Each test of the contract runs against both backends of the fleet store: the host's SQLite store, and
PostgreSQL ([center] database, a database of the tests' own cluster). A center on PostgreSQL has no
local sessions (this host's hook calls are not cards there): the tests about them run on SQLite only."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.center import Center, fleet_rows, hook_env, messages
from support.ingest_server import EVENTS, STATES
from support.scripts import BIN, run_hook


def payload(event: str, sid: str, cwd: str, **extra: object) -> dict[str, object]:
    """A hook payload of the shape Claude Code sends (reference: claude-code-hooks.md)."""
    return {"session_id": sid, "transcript_path": f"{cwd}/t.jsonl", "cwd": cwd, "hook_event_name": event, **extra}


# From idle, the events that bring a session to each state.
PATHS = {"idle": [], "running": ["start"], "awaiting_review": ["start", "prompt_ready"],
         "completed": ["start", "exit"], "failed": ["start", "failed"]}


# One center per backend and worker (session scope: the run interleaves modules, see conftest), not one per
# test: the tests use names of their own, so they share it.
@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def center(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Center]:
    env = {"AGENT_HOOKS__FLEET__HOST": "center-host"}
    if request.param == "postgres":
        pg = request.getfixturevalue("postgres_server")
        # A name of its own each time: the run may set this fixture up again (its params interleaved).
        env["AGENT_HOOKS__CENTER__DATABASE"] = pg.create_database(f"contract_{os.getpid()}_{time.monotonic_ns()}")
    home = tmp_path_factory.mktemp(f"center-{request.param}")
    server = Center(home / "agent-hooks", env=env).start()
    yield server
    server.stop()


@pytest.fixture
def local_center(center: Center) -> Center:
    """The center, for a test about this host's own sessions (its hook calls): SQLite's only."""
    if center.env.get("AGENT_HOOKS__CENTER__DATABASE"):
        pytest.skip("a center on PostgreSQL has no local sessions (docs/command-center.md)")
    return center


def register(center: Center, tmux: str, **fields: object) -> dict[str, object]:
    r = center.http.post("/api/hooks/sessions", json={"tmux_session": tmux, **fields})
    assert r.status_code in (200, 201), r.text
    return r.json()["session"]


def test_every_event_from_every_state(center: Center) -> None:
    for state in STATES:
        for event, (sources, target) in EVENTS.items():
            tmux = f"grid-{state}-{event}"
            sid = register(center, tmux)["id"]
            for step in PATHS[state]:
                assert center.ingest({"tmux_session": tmux, "event": step}).status_code == 200
            assert center.card(sid)["state"] == state
            r = center.ingest({"tmux_session": tmux, "event": event, "metadata": f"{event} from {state}"})
            assert r.status_code == 200, r.text
            expected = target if state in sources else state
            assert r.json() == {"ok": True, "session": sid, "state": expected, "ignored": state not in sources}
            card = center.card(sid)
            assert card["state"] == expected and card["last_event"] == event
            assert card["metadata"] == f"{event} from {state}"


def test_auto_registration(center: Center) -> None:
    # A start for an unknown tmux name creates the session (idle), and the start moves it to running.
    r = center.ingest({"tmux_session": "work-1", "event": "start", "agent_type": "shell"})
    assert r.status_code == 200 and r.json()["state"] == "running"
    card = center.card(r.json()["session"])
    assert card["agent_type"] == "shell" and card["tmux_session"] == "work-1" and card["host"] == "center-host"
    # Any event from an agent- tmux name registers it in running, then applies the event.
    r = center.ingest({"tmux_session": "agent-auto", "event": "to_review"})
    assert r.status_code == 200 and r.json()["state"] == "awaiting_review"
    r = center.ingest({"tmux_session": "agent-auto2", "event": "tool_use"})
    assert r.json() == {"ok": True, "session": r.json()["session"], "state": "running", "ignored": True}
    # A start by session id registers that id; later events find it by id first.
    r = center.ingest({"session_id": "direct-1", "event": "start", "tmux_session": "not-agent"})
    assert r.status_code == 200 and r.json()["session"] == "direct-1"
    assert center.ingest({"session_id": "direct-1", "event": "exit"}).json()["state"] == "completed"
    # Not auto-registerable: 404, and nothing is created.
    before = len(center.http.get("/api/hooks/sessions").json())
    for body in ({"tmux_session": "plain", "event": "tool_use"}, {"session_id": "nobody", "event": "exit"}):
        r = center.ingest(body)
        assert r.status_code == 404 and "not found" in r.json()["error"]
    assert len(center.http.get("/api/hooks/sessions").json()) == before


def test_registration_is_idempotent(center: Center) -> None:
    body = {"agent_type": "openclaw", "tmux_session": "agent-reg", "label": "My Task", "prompt": "Fix the bug",
            "task_id": "task-uuid", "depends_on": ["other-task-uuid"]}
    first = center.http.post("/api/hooks/sessions", json=body)
    assert first.status_code == 201 and first.json()["created"] is True
    s = first.json()["session"]
    assert (s["label"], s["prompt"], s["task_id"], s["depends_on"], s["state"]) == \
        ("My Task", "Fix the bug", "task-uuid", ["other-task-uuid"], "idle")
    again = center.http.post("/api/hooks/sessions", json={**body, "label": "other"})
    assert again.status_code == 200 and again.json() == {"created": False, "session": s}
    listed = [x for x in center.http.get("/api/hooks/sessions").json() if x["tmux_session"] == "agent-reg"]
    assert listed == [s]
    # The ingest of that tmux name finds the registered session (no second one).
    assert center.ingest({"tmux_session": "agent-reg", "event": "start"}).json()["session"] == s["id"]
    # Kept in the fleet store the center names (its PostgreSQL database, or its SQLite store).
    rows = fleet_rows(center, "SELECT id, state FROM fleet_sessions WHERE tmux_session = ?", ("agent-reg",))
    assert [(r["id"], r["state"]) for r in rows] == [(s["id"], "running")]


def test_patch(center: Center) -> None:
    sid = register(center, "patch-me")["id"]
    url = f"/api/hooks/sessions/{sid}"
    r = center.http.patch(url, json={"state": "running"})  # a state, mapped to its event (start)
    assert r.status_code == 200 and r.json()["event"] == "start" and r.json()["state"] == "running"
    assert center.http.patch(url, json={"event": "to_review"}).json()["state"] == "awaiting_review"
    assert center.http.patch(url, json={"state": "failed"}).json()["event"] == "exit_error"
    refused = center.http.patch(url, json={"state": "running"})
    assert refused.status_code == 409 and refused.json()["allowed"] == ["idle"]
    assert center.card(sid)["state"] == "failed"
    assert center.http.patch(url, json={"state": "idle"}).json()["event"] == "requeue"
    for bad in ({"state": "paused"}, {"event": "nope"}, {}):
        assert center.http.patch(url, json=bad).status_code == 400
    assert center.http.patch(url, content=b"{oops").status_code == 400
    assert center.http.patch("/api/hooks/sessions/missing", json={"state": "idle"}).status_code == 404


def test_delete(center: Center) -> None:
    sid = center.ingest({"tmux_session": "agent-del", "event": "tool_use"}).json()["session"]
    assert center.http.delete(f"/api/hooks/sessions/{sid}").json() == {"ok": True, "deleted": sid}
    assert center.http.delete(f"/api/hooks/sessions/{sid}").status_code == 404
    assert center.http.get(f"/api/hooks/sessions/{sid}").status_code == 404
    assert sid not in {s["id"] for s in center.http.get("/api/hooks/sessions").json()}
    # An agent- name comes back as a new session on its next event.
    assert center.ingest({"tmux_session": "agent-del", "event": "tool_use"}).json()["session"] != sid


@pytest.mark.parametrize(("raw", "status", "message"), [
    (b"{not json", 400, "invalid JSON"),
    (b'"a string"', 400, "invalid JSON"),
    (b'{"tmux_session": "agent-e"}', 400, "missing event"),
    (b'{"tmux_session": "agent-e", "event": "launch"}', 400, "unknown event type"),
    (b'{"event": "start"}', 400, "tmux_session or session_id"),
    (b'{"event": "start", "tmux_session": "agent-e", "metadata": {"x": 1}}', 400, "metadata must be a string"),
    (b'{"event": "tool_use", "tmux_session": "unknown-e"}', 404, "session not found"),
])
def test_error_codes(center: Center, raw: bytes, status: int, message: str) -> None:
    r = center.ingest(raw)
    assert r.status_code == status and message in r.json()["error"], r.text


def test_a_body_too_large_is_refused_with_or_without_a_content_length(center: Center) -> None:
    big = [b'{"event": "start", "tmux_session": "agent-big", "metadata": "', b"x" * 70_000, b'"}']
    sized = center.ingest(b"".join(big))
    chunked = center.http.post("/api/hooks/ingest", content=iter(big), headers={"Content-Type": "application/json"})
    for r in (sized, chunked):
        assert r.status_code == 400 and "body too large" in r.json()["error"], r.text
    assert "agent-big" not in {s.get("tmux_session") for s in center.http.get("/api/hooks/sessions").json()}


def test_idempotency_key_is_applied_once(center: Center) -> None:
    sid = center.ingest({"tmux_session": "agent-idem", "event": "tool_use"}, key="k-1").json()["session"]
    assert center.ingest({"tmux_session": "agent-idem", "event": "to_review"}, key="k-2").json()["state"] == \
        "awaiting_review"
    dup = center.ingest({"tmux_session": "agent-idem", "event": "exit"}, key="k-2")
    assert dup.status_code == 200 and dup.json()["duplicate"] is True
    assert center.card(sid)["state"] == "awaiting_review" and center.card(sid)["events"] == 2


def test_websocket_broadcasts_every_change_in_order(center: Center) -> None:
    with center.live() as ws:
        hello = json.loads(ws.recv(timeout=10))
        assert hello["type"] == "hello" and hello["host"] == "center-host"
        seq0 = hello["seq"]
        steps = ["start", "prompt_ready", "tool_use", "to_review", "exit", "requeue"]
        for ev in steps:
            assert center.ingest({"tmux_session": "ws-order", "event": ev}).status_code == 200
        sid = center.http.get("/api/hooks/sessions").json()
        sid = next(s["id"] for s in sid if s["tmux_session"] == "ws-order")
        center.http.patch(f"/api/hooks/sessions/{sid}", json={"state": "running"})
        center.http.delete(f"/api/hooks/sessions/{sid}")
        got = messages(ws, lambda m: any(x["type"] == "removed" and x["id"] == sid for x in m))
    seqs = [m["seq"] for m in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and seqs[0] > seq0
    events = [(m["event"], m["from"], m["to"]) for m in got if m["type"] == "event" and m["id"] == sid]
    assert events == [("register", None, "idle"), ("start", "idle", "running"),
                      ("prompt_ready", "running", "awaiting_review"), ("tool_use", "awaiting_review", "running"),
                      ("to_review", "running", "awaiting_review"), ("exit", "awaiting_review", "completed"),
                      ("requeue", "completed", "idle"), ("start", "idle", "running")]
    sources = [m["source"] for m in got if m["type"] == "event" and m["id"] == sid]
    assert sources == ["register"] + ["ingest"] * 6 + ["patch"]
    # Cards are refreshed after bursts (coalesced): the states they show follow the events' order.
    cards = [m["card"]["state"] for m in got if m["type"] == "card" and m["card"]["id"] == sid]
    to_states = iter([to for _, _, to in events])
    assert cards and all(state in to_states for state in cards), (cards, events)
    assert got[-1] == {"type": "removed", "id": sid, "seq": got[-1]["seq"]}


def test_local_hook_calls_reach_the_board_live(local_center: Center, tmp_path: Path) -> None:
    """This host's sessions come from the store: a hook executable's write shows within 1 s."""
    center = local_center
    env = {"AGENT_HOOKS_HOME": center.env["AGENT_HOOKS_HOME"], "AGENT_HOOKS_TMUX_SESSION": "agent-local",
           "AGENT_HOOKS_AGENT": "builder", "AGENT_HOOKS_TASK_ID": "T-local"}
    sid = "0a6b2c1e-local-session"
    start = payload("SessionStart", sid, str(tmp_path), source="startup")
    with center.live() as ws:
        json.loads(ws.recv(timeout=10))
        t0 = time.time()
        assert run_hook(start, env).returncode == 0
        got = messages(ws, lambda m: any(x["type"] == "card" and x["card"]["id"] == sid for x in m))
        seen = time.time() - t0
        card = next(m["card"] for m in got if m["type"] == "card" and m["card"]["id"] == sid)
        # Started, no prompt yet: the contract says running, our own state says it awaits its first prompt.
        assert card["local"] is True and card["state"] == "running" and card["own_state"] == "awaiting"
        assert card["waiting_detail"] == "its first prompt" and card["column"] == "awaiting_review"
        assert (card["agent"], card["task_id"], card["host"]) == ("builder", "T-local", "center-host")
        assert seen < 1.5, seen  # (the hook process itself takes part of this)
        pre = payload("PreToolUse", sid, str(tmp_path), tool_name="Bash", tool_use_id="toolu_1",
                      tool_input={"command": "ls", "description": "list"})
        assert run_hook(pre, env).returncode == 0
        got = messages(ws, lambda m: any(x["type"] == "card" and x["card"]["id"] == sid
                                         and x["card"]["current_tool"] for x in m))
        card = [m["card"] for m in got if m["type"] == "card" and m["card"]["id"] == sid][-1]
        assert card["current_tool"] == pre["tool_name"] and card["tool_running"] is True
        assert run_hook(payload("Stop", sid, str(tmp_path), stop_hook_active=False), env).returncode == 0
        # Stop = exit in the contract's default map: the contract says completed; our own state says awaiting.
        got = messages(ws, lambda m: any(x["type"] == "card" and x["card"]["id"] == sid
                                         and x["card"]["state"] == "completed" for x in m))
    card = [m["card"] for m in got if m["type"] == "card" and m["card"]["id"] == sid][-1]
    assert card["own_state"] == "awaiting"
    page = center.http.get(f"/api/board/sessions/{sid}").json()
    assert page["card"]["id"] == sid and [c["tool_name"] for c in page["tool_calls"]] == [pre["tool_name"]]
    assert page["tool_calls"][0]["decision"] in ("allow", None)
    assert [e["event"] for e in reversed(page["events"])] == ["start", "exit"]


def test_board_page_and_static_files(center: Center) -> None:
    r = center.http.get("/")
    assert r.status_code == 200 and "Command center" in r.text and "/static/board.js" in r.text
    for name in ("board.js", "board.css"):
        assert center.http.get(f"/static/{name}").status_code == 200
    assert "cdn" not in r.text.lower() and "https://" not in center.http.get("/static/board.js").text


def test_browser_rules_cross_site_and_rebinding(center: Center) -> None:
    body = {"tmux_session": "agent-csrf", "event": "start"}
    r = center.ingest(body, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "cross-site" in r.json()["error"]
    r = center.http.get("/api/board", headers={"Host": "evil.example:80"})
    assert r.status_code == 403 and "rebinding" in r.json()["error"]
    assert center.ingest(body, headers={"Origin": center.base}).status_code == 200


def test_doctor_checks_the_board(center: Center) -> None:
    proc = subprocess.run([str(BIN / "agent-hook"), "doctor", "--json", "--no-run"], capture_output=True, text=True,
                          env={**center.env}, timeout=120)
    board = [c for c in json.loads(proc.stdout)["checks"] if c["area"] == "board"]
    assert any(c["status"] == "ok" and f"board at {center.base}/" in c["summary"] for c in board), board


def test_server_start_prints_the_board_url(center: Center) -> None:
    out = center.cli("start").stdout
    assert f"board: {center.base}/" in out


def test_cards_show_waiting_state_and_persistence_and_sort_people_first(local_center: Center, tmp_path: Path) -> None:
    """Waiting states and persistence on the board: a local session's waiting state (the tool asked
    about, the error's kind) and its task's persistence are in the card JSON (REST and WebSocket), and
    /api/board lists the sessions that need a person first (needs input, then error) within a column."""
    center = local_center
    from support.repo import FIXTURES_330
    from support.scripts import agent_hook

    home = center.env["AGENT_HOOKS_HOME"]
    env = {"AGENT_HOOKS_HOME": home, "AGENT_HOOKS_TASK_ID": "T-wait"}
    agent_hook("task", "create", "T-wait", "--persist", "--max-continuations", "4", env={"AGENT_HOOKS_HOME": home})
    sids = {"plain": "0a6b2c1e-wait-plain", "input": "0a6b2c1e-wait-input", "error": "0a6b2c1e-wait-error"}
    for sid in (sids["plain"], sids["error"], sids["input"]):  # the plain card is first in the hub
        assert run_hook(payload("SessionStart", sid, str(tmp_path), source="startup"), env).returncode == 0
    for name, fx in (("input", "permission_request_bash.json"), ("error", "stop_failure_rate_limit.json")):
        data = json.loads((FIXTURES_330 / fx).read_text())
        data.update(session_id=sids[name], cwd=str(tmp_path))
        assert run_hook(data, env).returncode == 0
    time.sleep(0.05)
    pre = payload("PreToolUse", sids["plain"], str(tmp_path), tool_name="Read", tool_use_id="toolu_w",
                  tool_input={"file_path": str(tmp_path / "x")})
    assert run_hook(pre, env).returncode == 0
    # A person moves the plain one to review (its card's newest change), next to the one asking for input.
    r = center.http.patch(f"/api/hooks/sessions/{sids['plain']}", json={"event": "to_review"})
    assert r.status_code == 200 and r.json()["state"] == "awaiting_review", r.text
    want = {sids["input"]: ("needs_input", "Bash"), sids["error"]: ("error", "rate_limit"),
            sids["plain"]: (None, None)}
    ready = lambda c: c["id"] in want and c["waiting_on"] == want[c["id"]][0]  # noqa: E731
    for sid in sids.values():
        center.wait_card(lambda c, sid=sid: c["id"] == sid and ready(c), what=sid)
    board = center.http.get("/api/board").json()
    got = {c["id"]: c for c in board["cards"] if c["id"] in want}
    for sid, (on, detail) in want.items():
        card = got[sid]
        assert card["waiting_on"] == on, card
        assert (detail is None and card["waiting_detail"] is None) or detail in (card["waiting_detail"] or ""), card
        assert (card["waiting_since"] is None) == (on is None)
        assert card["task_state"] == "open"
        assert card["persist"] == {"persists": True, "continuations": 0, "max_continuations": 4, "let_go": None}, card
    # Both are awaiting review (the contract state); by activity alone the plain one would come first.
    assert got[sids["plain"]]["state"] == got[sids["input"]]["state"] == "awaiting_review"
    assert got[sids["plain"]]["last_activity"] > got[sids["input"]]["last_activity"]
    # Within each column: needs input, then error, then the rest (newest first).
    rank = {"needs_input": 0, "error": 1}
    for state in board["states"]:
        column = [c for c in board["cards"] if c["state"] == state]
        keys = [(rank.get(c["waiting_on"] or "", 2), -(c["last_activity"] or 0)) for c in column]
        assert keys == sorted(keys), (state, [(c["id"], c["waiting_on"]) for c in column])
    # The session page carries the same card, and the task's persistence.
    page = center.http.get(f"/api/board/sessions/{sids['input']}").json()
    assert page["card"]["waiting_on"] == "needs_input" and page["task"]["persists"] is True
    assert (page["task"]["continuations"], page["task"]["max_continuations"]) == (0, 4)
    # A task without persistence says so; marking it done shows on the card live.
    with center.live() as ws:
        json.loads(ws.recv(timeout=10))
        agent_hook("task", "done", "T-wait", "--note", "finished", env={"AGENT_HOOKS_HOME": home})
        got_msgs = messages(ws, lambda m: any(x["type"] == "card" and x["card"]["id"] == sids["plain"]
                                              and x["card"]["task_state"] == "done" for x in m))
    card = [m["card"] for m in got_msgs if m["type"] == "card" and m["card"]["id"] == sids["plain"]][-1]
    assert card["persist"]["persists"] is True and card["waiting_on"] is None


def test_the_board_follows_a_store_replaced_under_it(tmp_path: Path) -> None:
    """The command center's writer thread kept the old file open: after a store was put in the
    place of another, the board went on showing (and the fleet writes went to) the old one."""
    center = Center(tmp_path / "agent-hooks").start()
    try:
        env = hook_env(center.home, AGENT_HOOKS__FORWARD__ENABLED="false")
        start = {"hook_event_name": "SessionStart", "cwd": "/tmp", "source": "startup"}
        run_hook(dict(start, session_id="s-old"), env=env)
        center.wait_card(lambda c: "s-old" in json.dumps(c), what="the old store's session")
        other = tmp_path / "other"
        run_hook(dict(start, session_id="s-new"), env=hook_env(other, AGENT_HOOKS__FORWARD__ENABLED="false"))
        import sqlite3

        conn = sqlite3.connect(other / "store.db")  # the hook left its write in the WAL: into the file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        for name in ("store.db-wal", "store.db-shm"):
            (center.home / name).unlink(missing_ok=True)
        os.replace(other / "store.db", center.home / "store.db")
        center.wait_card(lambda c: "s-new" in json.dumps(c), what="the new store's session")
        assert not any("s-old" in json.dumps(c) for c in center.board_cards().values())
    finally:
        center.stop()
