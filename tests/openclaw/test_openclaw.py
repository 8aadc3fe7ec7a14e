"""OpenClaw agents on the board: the server as an operator client of an OpenClaw gateway.

A real server (`agent-hook server start`) connects to a test gateway on loopback (tests/support/openclaw.py:
a real WebSocket server speaking protocol 4's handshake, replaying frames shaped as the real gateway's).
Runs become cards that move running -> completed with their tool calls listed; exec approvals are listed
and answered through the gateway (first answer wins); a cancel aborts the run through chat.abort; the
connection's state shows in status, doctor and the board; a gateway that is down, hostile or floods never
holds the hook routes, and a reconnect adds no card twice.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import pwd
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_hooks import config as config_mod
from agent_hooks.openclaw import frames, records, settings

from support.center import Center
from support.openclaw import (
    TOKEN,
    Gateway,
    approval,
    fixture_frames,
    lifecycle,
    resolved,
    tool,
)
from support.scripts import BIN


def center_env(gw: Gateway, **extra: str) -> dict[str, str]:
    return {"AGENT_HOOKS__OPENCLAW__URL": gw.url, "AGENT_HOOKS_OPENCLAW_TOKEN": TOKEN,
            "AGENT_HOOKS__OPENCLAW__APPROVALS": "true", "AGENT_HOOKS__OPENCLAW__CANCEL": "true",
            "AGENT_HOOKS__OPENCLAW__BACKOFF_MAX_S": "0.5", "AGENT_HOOKS__FLEET__HOST": "host-a", **extra}


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    gw = Gateway().start()
    try:
        yield gw
    finally:
        gw.close()


@pytest.fixture
def center(tmp_path: Path, gateway: Gateway) -> Iterator[Center]:
    c = Center(tmp_path / "home", env=center_env(gateway)).start()
    try:
        gateway.wait_clients()
        yield c
    finally:
        c.stop()


def oc_status(center: Center) -> dict[str, Any]:
    r = center.http.get("/api/fleet/status")
    assert r.status_code == 200, r.text
    return r.json()["openclaw"]  # type: ignore[no-any-return]


def wait_status(center: Center, state: str, timeout: float = 10.0) -> dict[str, Any]:
    end = time.time() + timeout
    while time.time() < end:
        st = oc_status(center)
        if st["state"] == state:
            return st
        time.sleep(0.05)
    raise AssertionError(f"gateway state never {state}: {oc_status(center)}")


def card_of(center: Center, key: str = "agent:main:main") -> str:
    return frames.card_id("host-a", key)


def page(center: Center, cid: str) -> dict[str, Any]:
    r = center.http.get(f"/api/board/sessions/{cid}")
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def run_turn(gw: Gateway, run: str = "run-1", key: str = "agent:main:main") -> None:
    gw.send(lifecycle(run, 1, "start", key=key, startedAt=1))
    gw.send(lifecycle(run, 2, "model", key=key, provider="fake", model="claude-sonnet-4-5"))
    gw.send(tool(run, 3, "call-1", "exec", {"command": "ls -la /tmp && API_TOKEN=hunter2 make"}, key=key))
    gw.send(tool(run, 4, "call-1", "exec", {}, phase="result", key=key))


# -- one server and gateway shared by the tests that only push frames and read the API -------------------------
#
# A server costs about a quarter second of CPU to start: the tests that neither disturb the connection nor
# configure the server differently share one per module (per xdist worker). Each gets its own session key
# and run ids (the store's idempotency keys name the run: a run id heard again is a replay, dropped), and
# matches its own approvals and requests; counters are read as deltas. Tests about the connection's life
# (refusals, restarts, reconnects, stops, config errors) keep a fresh server and gateway of their own.

class Shared:
    """One test's part of the module's shared server and gateway: its own session key (so its own card) and
    run ids. ``before`` is the gateway's status when the test began."""

    def __init__(self, center: Center, gateway: Gateway, tag: str) -> None:
        self.center, self.gateway, self.tag = center, gateway, tag
        self.key = f"agent:main:{tag}"
        self.cid = card_of(center, self.key)
        self.before = oc_status(center)

    def run(self, name: str = "run-1") -> str:
        """A run id no other test on the shared server uses."""
        return f"{self.tag}-{name}"


_tags = itertools.count(1)


@pytest.fixture(scope="session")  # one per worker: the run interleaves modules (see conftest)
def shared_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Center, Gateway, dict[str, Any]]]:
    gw = Gateway().start()
    handlers = dict(gw.handlers)
    try:
        c = Center(tmp_path_factory.mktemp("openclaw-shared") / "home", env=center_env(gw)).start()
        try:
            gw.wait_clients()
            wait_status(c, "connected")
            yield c, gw, handlers
        finally:
            c.stop()
    finally:
        gw.close()


@pytest.fixture
def shared(shared_pair: tuple[Center, Gateway, dict[str, Any]]) -> Iterator[Shared]:
    """The shared server and gateway, checked connected before the test and after it (a test that drops
    the connection needs its own); a gateway handler a test replaced is put back."""
    c, gw, handlers = shared_pair
    st = wait_status(c, "connected")
    gw.wait_clients()
    assert len(gw.clients) == 1, "the shared gateway must have the shared server as its one operator"
    s = Shared(c, gw, f"t{next(_tags)}")
    try:
        yield s
    finally:
        gw.handlers.clear()
        gw.handlers.update(handlers)
    after = oc_status(c)
    assert after["state"] == "connected" and after["connects"] == st["connects"], (
        f"a test on the shared server dropped its connection to the gateway (give it its own): {after}")
    if after["dropped"] > st["dropped"]:
        # It spent the connection's events budget (a token bucket refilled at max_events_per_s, 200 a second):
        # the next test's tool frames would be dropped unread. A second fills it again.
        time.sleep(1.0)


# -- settings (no server) ---------------------------------------------------------------------------------

def test_token_comes_from_the_environment_or_a_private_file_never_from_config(tmp_path: Path) -> None:
    cfg = config_mod.defaults()
    cfg["openclaw"]["url"] = "ws://127.0.0.1:18789"
    assert settings.token(cfg, {settings.TOKEN_ENV: " T1 "}) == "T1"
    with pytest.raises(settings.SettingError, match="no gateway token"):
        settings.token(cfg, {})
    path = tmp_path / "gw-token"
    path.write_text("T2\n")
    path.chmod(0o644)
    cfg["openclaw"]["token_file"] = str(path)
    with pytest.raises(settings.SettingError, match="readable by others"):
        settings.token(cfg, {})
    path.chmod(0o600)
    assert settings.token(cfg, {}) == "T2"
    cfg["openclaw"]["token"] = "in-the-config"
    with pytest.raises(settings.SettingError, match="never read from there"):
        settings.token(cfg, {settings.TOKEN_ENV: "T1"})
    assert any("openclaw.token" in p and "never read" in p for p in config_mod.validate(cfg))


def test_a_token_file_that_is_not_a_small_regular_file_is_refused_without_waiting(tmp_path: Path) -> None:
    """A FIFO named as the token file would hold the server's event loop on open(); a huge file is not a token."""
    import os
    import threading

    cfg = config_mod.defaults()
    cfg["openclaw"]["url"] = "ws://127.0.0.1:18789"
    fifo = tmp_path / "gw-fifo"
    os.mkfifo(fifo, 0o600)
    cfg["openclaw"]["token_file"] = str(fifo)
    got: list[BaseException] = []
    reader = threading.Thread(target=lambda: got.append(pytest.raises(settings.SettingError,
                                                                      settings.token, cfg, {}).value), daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():
        with open(fifo, "w") as f:  # let the stuck reader go before failing
            f.write("x\n")
        pytest.fail("reading a FIFO token_file blocked")
    assert got and "not a regular file" in str(got[0])
    big = tmp_path / "gw-big"
    big.write_text("x" * 10_000)
    big.chmod(0o600)
    cfg["openclaw"]["token_file"] = str(big)
    with pytest.raises(settings.SettingError, match="not a token"):
        settings.token(cfg, {})


def test_a_url_with_a_credential_is_refused_and_never_shown() -> None:
    cfg = config_mod.defaults()
    cfg["openclaw"]["url"] = "wss://op:sekrit@gw.example:18789/?token=sekrit2"
    problems = settings.problems(cfg, {settings.TOKEN_ENV: "T"})
    assert any("user name or password" in p for p in problems), problems
    assert not any("sekrit" in p for p in problems), problems
    assert settings.shown_url(cfg["openclaw"]["url"]) == "wss://***@gw.example:18789/?***"
    assert settings.url_problem("ws://127.0.0.1:18789") is None
    assert "sekrit" not in (settings.url_problem("http://op:sekrit@gw.example/") or "sekrit")


def test_a_url_with_a_credential_stays_out_of_status_and_the_board(tmp_path: Path, gateway: Gateway) -> None:
    url = gateway.url.replace("ws://", "ws://op:sekrit@")
    c = Center(tmp_path / "home", env={**center_env(gateway), "AGENT_HOOKS__OPENCLAW__URL": url}).start()
    try:
        st = wait_status(c, "down")
        assert "user name or password" in (st["last_error"] or ""), st
        for route in ("/status", "/api/fleet/status", "/api/board"):
            r = c.http.get(route)
            assert r.status_code == 200 and "sekrit" not in r.text, (route, r.text[:500])
        assert not gateway.connects  # refused before connecting
    finally:
        c.stop()


def test_distinct_gateway_request_ids_never_share_a_row() -> None:
    ids = ["a/b", "a_b", "x" * 61, "x" * 60 + "y", "x" * 60, "id with space", "id\u00e9"]
    rows = [frames.approval_id(i) for i in ids]
    assert len(set(rows)) == len(ids), rows
    assert frames.approval_id("4cbcddb3-5d57-4d5f-bb83-463c5be46eaf") == "oc-4cbcddb3-5d57-4d5f-bb83-463c5be46eaf"
    for row in rows:  # safe in a URL path and the board's ids
        assert all(ch.isalnum() or ch in "-_." for ch in row) and row.startswith("oc-"), row


def test_a_gateway_on_another_host_over_plain_ws_is_warned_about() -> None:
    cfg = config_mod.defaults()
    for url in ("ws://127.0.0.1:18789", "wss://gw.example:18789", "ws://localhost:1"):
        cfg["openclaw"]["url"] = url
        assert settings.cleartext_problem(cfg) is None, url
    cfg["openclaw"]["url"] = "ws://10.1.2.3:18789"
    assert "unencrypted" in (settings.cleartext_problem(cfg) or "")
    from agent_hooks.center.checks import openclaw_checks
    from agent_hooks.checks import WARN

    checks = openclaw_checks(cfg, None)
    assert any(c.status == WARN and "unencrypted" in c.summary for c in checks), checks


def test_nothing_configured_nothing_attempted_or_warned() -> None:
    cfg = config_mod.defaults()
    assert not settings.configured(cfg)
    assert settings.problems(cfg, {}) == []
    assert settings.scopes(cfg) == ["operator.read"]  # read only unless control is turned on
    assert settings.caps(cfg) == ["tool-events"]
    cfg["openclaw"]["cancel"] = True
    assert settings.scopes(cfg) == ["operator.read", "operator.write", "operator.admin"]
    cfg["openclaw"]["cancel"] = False
    cfg["openclaw"]["approvals"] = True
    assert settings.scopes(cfg) == ["operator.read", "operator.approvals", "operator.admin"]
    assert settings.caps(cfg) == ["tool-events", "exec-approvals"]


def test_the_server_does_not_import_the_gateway_client_without_a_gateway(tmp_path: Path) -> None:
    # A fresh interpreter: the app built and its lifespan's start-up run, as `agent-hook server` does.
    code = (
        "import asyncio, sys\n"
        "from agent_hooks.paths import Paths\n"
        "from agent_hooks import config\n"
        "from agent_hooks.openclaw import service\n"
        "from agent_hooks.server import app\n"
        "env = {'AGENT_HOOKS_HOME': sys.argv[1]}\n"
        "a = app.create_app(Paths(env), config.defaults(), env)\n"
        "asyncio.run(service.startup(a.state.server))\n"
        "print('agent_hooks.openclaw.gateway' in sys.modules, 'agent_hooks.openclaw.frames' in sys.modules,\n"
        "      'websockets.asyncio.client' in sys.modules, getattr(a.state.server, 'openclaw', None))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "home")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "False", "None"]


def test_a_tool_call_is_shown_clipped_with_secrets_masked() -> None:
    view = frames.safe_view({"command": "API_TOKEN=hunter2 curl -H x " + "y" * 500})
    assert "hunter2" not in view and "API_TOKEN=***" in view
    assert len(view) <= frames.VIEW_CHARS
    assert frames.safe_view({"path": "/etc/hosts"}) == "/etc/hosts"
    assert frames.safe_view({"a": 1}) == '{"a":1}'


# -- a run on the board ------------------------------------------------------------------------------------

def test_a_run_with_a_tool_call_moves_its_card_running_then_completed(shared: Shared) -> None:
    center, gateway, key = shared.center, shared.gateway, shared.key
    cards_before = len([c for c in center.board_cards().values() if c["agent_type"] == "openclaw"])
    hello = gateway.connects[-1]
    assert hello["role"] == "operator" and hello["minProtocol"] == 4 and hello["maxProtocol"] == 4
    assert hello["scopes"] == ["operator.read", "operator.write", "operator.approvals", "operator.admin"]
    assert hello["auth"]["token"] == TOKEN
    assert hello["caps"] == ["tool-events", "exec-approvals"]
    assert hello["client"]["id"] == "gateway-client" and hello["client"]["mode"] == "backend"
    gateway.wait_request("sessions.subscribe")
    cid = shared.cid
    run_turn(gateway, shared.run("run-1"), key)
    card = center.wait_card(lambda c: c["id"] == cid and c["tool_calls"] == 1, what="the run's card")
    assert card["agent_type"] == "openclaw" and card["state"] == "running" and card["host"] == "host-a"
    assert card["agent"] == "main" and card["label"] == key
    assert card["current_tool"] == "exec" and "ls -la /tmp" in card["current_command"]
    assert "hunter2" not in json.dumps(card)
    gateway.send(lifecycle(shared.run("run-1"), 5, "end", key=key, stopReason="stop", aborted=False))
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "completed", what="completed")
    events = [e["event"] for e in reversed(page(center, cid)["events"])]
    assert events == ["start", "tool_use", "completed"]
    tool_event = [e for e in page(center, cid)["events"] if e["event"] == "tool_use"][0]
    assert tool_event["metadata"].startswith("exec: ls -la /tmp") and tool_event["source"] == "openclaw"
    # The session's next run: the same card, back to running.
    gateway.send(lifecycle(shared.run("run-2"), 1, "start", key=key))
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "running", what="running again")
    gateway.send(lifecycle(shared.run("run-2"), 2, "error", key=key, error="model overloaded"))
    card = center.wait_card(lambda c: c["id"] == cid and c["state"] == "failed", what="failed")
    assert card["waiting_on"] == "error" and "model overloaded" in card["waiting_detail"]
    # One card for the session's two runs (the server may hold other tests' cards: counted before).
    assert len([c for c in center.board_cards().values() if c["agent_type"] == "openclaw"]) == cards_before + 1


def test_a_reconnect_hears_the_run_again_without_a_second_card_or_event(center: Center, gateway: Gateway) -> None:
    cid = card_of(center)
    run_turn(gateway)
    center.wait_card(lambda c: c["id"] == cid and c["tool_calls"] == 1)
    assert wait_status(center, "connected")["connects"] == 1
    gateway.stop()
    st = wait_status(center, "down")
    assert st["last_error"] and st["since"] <= time.time()
    board = center.http.get("/api/board").json()
    assert board["openclaw"]["state"] == "down"
    assert center.status()["openclaw"]["state"] == "down"
    gateway.start()
    gateway.wait_clients()
    assert wait_status(center, "connected")["connects"] == 2
    run_turn(gateway)  # the same frames again, as a gateway replaying a run after a restart would
    gateway.send(lifecycle("run-1", 5, "end", stopReason="stop", aborted=False))
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "completed")
    cards = [c for c in center.board_cards().values() if c["agent_type"] == "openclaw"]
    assert len(cards) == 1 and cards[0]["tool_calls"] == 1
    assert [e["event"] for e in reversed(page(center, cid)["events"])] == ["start", "tool_use", "completed"]


def test_a_gateway_restart_ends_the_runs_it_had_and_a_reconnect_to_the_same_boot_does_not(
        center: Center, gateway: Gateway) -> None:
    cid = card_of(center)
    other = card_of(center, "agent:main:other")
    gateway.send(lifecycle("run-1", 1, "start", startedAt=1))
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "running")
    gateway.stop()
    wait_status(center, "down")
    gateway.start()  # the same boot: only the connection dropped; the run goes on
    gateway.wait_clients()
    wait_status(center, "connected")
    gateway.send(lifecycle("run-2", 1, "start", key="agent:main:other", startedAt=1))
    center.wait_card(lambda c: c["id"] == other and c["state"] == "running")
    assert center.board_cards()[cid]["state"] == "running"
    gateway.stop()
    wait_status(center, "down")
    gateway.boot_id = "boot-2"  # the gateway restarted: its runs died with it and will send no end
    gateway.start()
    gateway.wait_clients()
    for card in (cid, other):
        center.wait_card(lambda c, card=card: c["id"] == card and c["state"] == "failed")
    assert "restarted" in (page(center, cid)["events"][0]["metadata"] or ""), page(center, cid)["events"][0]
    gateway.stop()
    wait_status(center, "down")
    gateway.boot_id = "boot-\ud800"  # an odd one: the cards (which keep it) are still served
    gateway.start()
    gateway.wait_clients()
    wait_status(center, "connected")
    gateway.send(lifecycle("run-3", 1, "start", startedAt=1))
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "running")
    assert center.http.get("/api/board").status_code == 200 and page(center, cid)["events"]


def test_backoff_grows_again_after_a_long_connection_ends(tmp_path: Path, gateway: Gateway) -> None:
    """After a good connection the first retry comes soon, then the pauses grow to backoff_max_s; the
    connection's age must not keep them at the shortest for good while the gateway stays down."""
    import socket

    c = Center(tmp_path / "home", env={**center_env(gateway), "AGENT_HOOKS__OPENCLAW__BACKOFF_MAX_S": "1"}).start()
    try:
        gateway.wait_clients()
        # Up longer than backoff_max_s (1 s), what makes the connection a good one (oc_gateway.run), with a 2x
        # margin: after it ends the first retry comes soon, and its age must not keep the later ones soon too.
        time.sleep(2.0)
        gateway.stop()
        tries: list[float] = []
        with socket.socket() as lsn:  # the gateway's port, taking connections and closing them at once
            lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lsn.bind(("127.0.0.1", gateway.port))
            lsn.listen(16)
            lsn.settimeout(5)
            while len(tries) < 3:  # the first try comes 0.5 s after the drop; the two pauses after it, 1 s each
                conn, _ = lsn.accept()
                tries.append(time.monotonic())
                conn.close()
        gaps = [b - a for a, b in zip(tries, tries[1:], strict=False)]  # each try and the next
        # Pauses 0.5 s then 1 s, each +-25%: some gap >= 0.75 s. Without growth every gap is <= 0.625 s.
        assert max(gaps) >= 0.7, gaps
    finally:
        c.stop()


def test_a_run_heard_in_the_middle_still_moves_its_card(shared: Shared) -> None:
    center, gateway, key = shared.center, shared.gateway, shared.key
    cid = shared.cid
    # Connected after the run started: its first frame is a tool call.
    gateway.send(tool(shared.run("run-mid"), 7, "call-m", "read", {"path": "/etc/hosts"}, key=key))
    card = center.wait_card(lambda c: c["id"] == cid and c["tool_calls"] == 1)
    assert card["state"] == "running"
    gateway.send(lifecycle(shared.run("run-mid"), 9, "end", key=key, stopReason="stop", aborted=False))
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "completed")
    # The next run is heard only by its end (a short run during a reconnect): it still counts.
    gateway.send(lifecycle(shared.run("run-short"), 3, "end", key=key, stopReason="stop", aborted=False))
    end = time.time() + 10
    while [e for e, _ in events_of(center, cid)].count("completed") < 2 and time.time() < end:
        time.sleep(0.05)
    assert [e for e, _ in events_of(center, cid)] == ["start", "tool_use", "completed", "requeue", "start", "completed"]


def test_a_gateway_that_says_it_stops_is_shown_down_with_its_reason(center: Center, gateway: Gateway) -> None:
    gateway.send({"type": "event", "event": "shutdown", "payload": {"reason": "gateway stopping"}})
    gateway.stop()
    st = wait_status(center, "down")
    assert st["last_error"] == "the gateway stopped (gateway stopping)"


def test_without_approvals_none_are_listed_and_no_admin_scope_is_asked(tmp_path: Path) -> None:
    gw = Gateway().start()
    c = Center(tmp_path / "home", env=center_env(gw, AGENT_HOOKS__OPENCLAW__APPROVALS="false")).start()
    try:
        gw.wait_clients()
        assert gw.connects[-1]["scopes"] == ["operator.read", "operator.write", "operator.admin"]
        assert gw.connects[-1]["caps"] == ["tool-events"]
        assert not gw.requests_for("exec.approval.list")
        gw.send(approval("gw-unasked-1", "rm -rf /"))
        gw.send(lifecycle("run-n", 1, "start"))
        c.wait_card(lambda x: x["id"] == frames.card_id("host-a", "agent:main:main") and x["state"] == "running")
        assert [a for a in pending(c) if a["id"].startswith("oc-")] == []
    finally:
        c.stop()
        gw.close()


def test_status_and_doctor_show_the_connection(shared: Shared) -> None:
    center, gateway = shared.center, shared.gateway
    st = center.status()["openclaw"]
    assert st["state"] == "connected" and st["url"] == gateway.url and st["last_error"] is None
    text = center.cli("status").stdout
    assert f"OpenClaw gateway {gateway.url}: connected" in text
    doctor = subprocess.run([str(BIN / "agent-hook"), "doctor"], capture_output=True, text=True,
                            env=center.env, timeout=60)
    assert f"OpenClaw gateway {gateway.url}: connected" in doctor.stdout, doctor.stdout


def test_doctor_warns_when_the_gateway_s_events_were_lost(shared: Shared) -> None:
    """Connected, but frames that could not be read: doctor says so instead of a plain OK."""
    center, gateway = shared.center, shared.gateway
    malformed = shared.before["malformed"]  # the shared server's count before this test's frame
    gateway.send("not json")
    gateway.send(lifecycle(shared.run("run-ok"), 1, "start", key=shared.key))
    center.wait_card(lambda c: c["id"] == shared.cid and c["state"] == "running")
    assert oc_status(center)["malformed"] == malformed + 1
    doctor = subprocess.run([str(BIN / "agent-hook"), "doctor"], capture_output=True, text=True,
                            env=center.env, timeout=60)
    line = [ln for ln in doctor.stdout.splitlines() if "OpenClaw gateway" in ln]
    assert line and f"{malformed + 1} frame(s) could not be read" in line[0], doctor.stdout


def test_a_wrong_token_is_shown_as_the_gateway_s_refusal(tmp_path: Path, gateway: Gateway) -> None:
    c = Center(tmp_path / "home", env=center_env(gateway, AGENT_HOOKS_OPENCLAW_TOKEN="wrong")).start()
    try:
        st = wait_status(c, "down")
        assert "refused: unauthorized" in st["last_error"]
        assert not gateway.clients
    finally:
        c.stop()


def test_a_refused_handshake_is_shown_in_the_gateway_s_words(tmp_path: Path, gateway: Gateway) -> None:
    [refused] = [f for f in fixture_frames("connect-refused-protocol-3.jsonl") if f.get("type") == "res"]
    gateway.refusal = refused["error"]  # what the real gateway answers a connect it will not take
    c = Center(tmp_path / "home", env=center_env(gateway)).start()
    try:
        st = wait_status(c, "down")
        assert st["last_error"] == "refused: protocol mismatch" and st["connects"] == 0
    finally:
        c.stop()


def test_a_gateway_error_quoting_the_token_is_shown_without_it(tmp_path: Path, gateway: Gateway) -> None:
    gateway.refusal = {"code": "INVALID_REQUEST", "message": f"unauthorized: token {TOKEN} is not known here"}
    c = Center(tmp_path / "home", env=center_env(gateway)).start()
    try:
        st = wait_status(c, "down")
        assert st["last_error"] == "refused: unauthorized: token *** is not known here", st
        for route in ("/status", "/api/fleet/status", "/api/board"):
            assert TOKEN not in c.http.get(route).text, route
    finally:
        c.stop()
    logs = [p.read_text(errors="replace") for p in (tmp_path / "home").rglob("*.log")]
    assert logs and not [text for text in logs if TOKEN in text]


def test_a_gateway_error_is_kept_on_one_clean_line(tmp_path: Path, gateway: Gateway) -> None:
    """Its words go to status, doctor and the log: a newline or an escape there must not forge a line."""
    gateway.refusal = {"code": "INVALID_REQUEST", "message": "no\nERROR forged line \x1b[2J\ud800 end"}
    c = Center(tmp_path / "home", env=center_env(gateway)).start()
    try:
        st = wait_status(c, "down")
        assert st["last_error"].startswith("refused: no ERROR forged line") and st["last_error"].endswith(" end"), st
        assert not any(ch in st["last_error"] for ch in "\n\x1b\ud800"), st
    finally:
        c.stop()


def test_a_shutdown_reason_with_odd_characters_keeps_status_up(center: Center, gateway: Gateway) -> None:
    gateway.send({"type": "event", "event": "shutdown", "payload": {"reason": "bye\ud800\nnow"}})
    gateway.stop()
    st = wait_status(center, "down")
    assert st["last_error"] == "the gateway stopped (bye? now)", st
    assert center.http.get("/status").status_code == 200


def test_a_token_in_config_toml_is_refused_with_a_clear_error(tmp_path: Path, gateway: Gateway) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[openclaw]\ntoken = "in-the-config"\n')  # AGENT_HOOKS_HOME holds it
    c = Center(home, env=center_env(gateway)).start()
    try:
        st = wait_status(c, "down")
        assert "never read from there" in st["last_error"]
        assert not gateway.connects
    finally:
        c.stop()


# -- approvals -----------------------------------------------------------------------------------------------

def pending(center: Center) -> list[dict[str, Any]]:
    return center.http.get("/api/approvals").json()["approvals"]  # type: ignore[no-any-return]


def acted(center: Center, cid: str, target: str) -> list[dict[str, Any]]:
    """Who did what to request or session ``target`` of card ``cid``, as its page's "Who acted" shows it
    (``fleet_actions``)."""
    actions = center.http.get(f"/api/board/sessions/{cid}").json()["actions"]
    return [{k: a[k] for k in ("action", "by_kind", "by_name", "note")} for a in actions if a["target"] == target]


def wait_acted(center: Center, cid: str, target: str, n: int = 1) -> list[dict[str, Any]]:
    end = time.time() + 10
    while time.time() < end and len(acted(center, cid, target)) < n:
        time.sleep(0.05)
    return acted(center, cid, target)


OWNER = f"uid {os.geteuid()} ({pwd.getpwuid(os.geteuid()).pw_name})"  # the board's and the CLI's caller here


def wait_pending(center: Center, n: int, timeout: float = 10.0, card: str | None = None) -> list[dict[str, Any]]:
    """Until ``n`` OpenClaw requests are pending (``card``: counting only that card's, on a shared server)."""
    end = time.time() + timeout
    while time.time() < end:
        got = [a for a in pending(center) if a["id"].startswith("oc-") and (card is None or a["card"] == card)]
        if len(got) == n:
            return got
        time.sleep(0.05)
    raise AssertionError(f"expected {n} OpenClaw request(s): {pending(center)}")


def test_an_exec_approval_is_listed_and_answered_through_the_gateway_first_answer_wins(shared: Shared) -> None:
    center, gateway, key = shared.center, shared.gateway, shared.key
    gid = "a1b2c3d4-0000-4000-8000-000000000001"
    cid = shared.cid
    gateway.send(lifecycle(shared.run("run-1"), 1, "start", key=key))
    gateway.send(approval(gid, "rm -rf build", key=key))
    [row] = wait_pending(center, 1, card=cid)
    assert row["tool_name"] == "exec" and row["tool_input"]["command"] == "rm -rf build"
    assert row["host"] == "host-a" and row["card"] == cid
    card = center.wait_card(lambda c: c["id"] == cid and c["waiting_on"] == "needs_input")
    assert card["state"] == "awaiting_review"
    r = center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
    assert r.status_code == 200, r.text
    sent = gateway.wait_request("exec.approval.resolve", where={"id": gid})["params"]
    assert sent == {"id": gid, "decision": "allow-once"}
    late = center.http.post(f"/api/approvals/{row['id']}", json={"decision": "deny"})
    assert late.status_code == 409 and late.json()["already"] is True
    assert len(gateway.requests_for("exec.approval.resolve", where={"id": gid})) == 1
    # Recorded as an answer to any other request is, under who gave it (the late one took nothing: not recorded).
    assert acted(center, cid, row["id"]) == [{"action": "answer: allow", "by_kind": "owner", "by_name": OWNER,
                                              "note": None}]
    card = center.wait_card(lambda c: c["id"] == cid and c["state"] == "running" and not c["waiting_on"])
    assert wait_pending(center, 0, card=cid) == []


def test_an_approval_answered_at_the_gateway_first_is_refused_here(shared: Shared) -> None:
    center, gateway, key, cid = shared.center, shared.gateway, shared.key, shared.cid
    gateway.send(approval("gw-answered-1", "git push", key=key))
    [row] = wait_pending(center, 1, card=cid)
    gateway.send(resolved("gw-answered-1", "deny", by="operator-b"))
    wait_pending(center, 0, card=cid)
    # An answer given in OpenClaw is recorded as one from the board or the CLI, naming who gave it there.
    assert wait_acted(center, cid, row["id"]) == [{"action": "answer: deny", "by_kind": "openclaw",
                                                   "by_name": "operator-b", "note": "answered at the OpenClaw gateway"}]
    r = center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
    assert r.status_code == 409, r.text
    assert "denied" in r.json()["error"]
    assert not gateway.requests_for("exec.approval.resolve", where={"id": "gw-answered-1"})
    # The gateway refuses one it no longer holds (expired there): the caller is told, the row withdrawn.
    gateway.handlers["exec.approval.resolve"] = lambda p: (False, "unknown or expired approval id")
    gateway.send(approval("gw-expired-1", "make deploy", key=key))
    [row] = wait_pending(center, 1, card=cid)
    r = center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow_always"})
    assert r.status_code == 409 and "unknown or expired" in r.json()["error"], r.text
    assert gateway.wait_request("exec.approval.resolve", where={"id": "gw-expired-1"})["params"]["decision"] == \
        "allow-always"
    history = center.http.get("/api/approvals", params={"state": "all"}).json()["approvals"]
    assert [a["state"] for a in history if a["id"] == row["id"]] == ["withdrawn"]
    # Refused for another reason (as the real gateway words a missing scope): nothing was answered, it stays pending.
    gateway.handlers["exec.approval.resolve"] = lambda p: (False, {
        "code": "FORBIDDEN", "message": "missing scope: operator.approvals",
        "details": {"code": "MISSING_SCOPE", "missingScope": "operator.approvals"}})
    gateway.send(approval("gw-forbidden-1", "make", key=key))
    [row] = wait_pending(center, 1, card=cid)
    r = center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
    assert r.status_code == 502 and "missing scope" in r.json()["error"], r.text
    assert [a["state"] for a in pending(center) if a["id"] == row["id"]] == ["pending"]


def test_an_answer_racing_one_given_at_the_gateway_records_the_gateway_s(shared: Shared) -> None:
    """Ours is on its way when someone answers at the gateway: the gateway refuses ours (409 here) and the
    row says what was decided there, by whom; whether its word comes before or after its refusal."""
    center, gateway, key, cid = shared.center, shared.gateway, shared.key, shared.cid
    for n, before in enumerate((True, False)):
        gid = f"gw-race-{n}"
        frame = json.dumps({**resolved(gid, "deny", by="operator-b"), "seq": 900 + n})

        def refuse(params: dict[str, Any], frame: str = frame, before: bool = before) -> tuple[bool, Any]:
            if before:  # the broadcast of the other answer leaves ahead of our refusal
                for ws in list(gateway.clients):
                    asyncio.ensure_future(ws.send(frame))
            return False, "approval already resolved"
        gateway.handlers["exec.approval.resolve"] = refuse
        gateway.send(approval(gid, "git push", key=key))
        [row] = wait_pending(center, 1, card=cid)
        r = center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
        assert r.status_code == 409 and r.json()["already"], r.text
        if not before:
            gateway.send(frame)
        end = time.time() + 10
        while time.time() < end:
            history = center.http.get("/api/approvals", params={"state": "all"}).json()["approvals"]
            [mine] = [a for a in history if a["id"] == row["id"]]
            if mine["state"] == "denied":
                break
            time.sleep(0.05)
        assert mine["state"] == "denied" and "operator-b" in json.dumps(mine), (before, mine)


def test_a_gateway_whose_clock_is_behind_still_has_its_requests_listed(shared: Shared) -> None:
    """The gateway's createdAtMs/expiresAtMs are its clock's: an hour behind ours, its 2-minute window is
    still 2 minutes from when the request was heard here."""
    center, gateway = shared.center, shared.gateway
    frame = approval("gw-skewed-1", "make test", key=shared.key)
    frame["payload"]["createdAtMs"] -= 3600_000
    frame["payload"]["expiresAtMs"] -= 3600_000
    gateway.send(frame)
    [row] = wait_pending(center, 1, card=shared.cid)
    assert row["id"] == frames.approval_id("gw-skewed-1")
    assert 100 <= row["expires_at"] - time.time() <= 125, row


def test_the_cli_answers_an_openclaw_request_through_the_server(shared: Shared) -> None:
    center, gateway = shared.center, shared.gateway
    gateway.send(approval("gw-cli-1", "npm publish", key=shared.key))
    [row] = wait_pending(center, 1, card=shared.cid)
    out = subprocess.run([str(BIN / "agent-hook"), "deny", row["id"], "--message", "not today"], capture_output=True,
                         text=True, env=center.env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert gateway.wait_request("exec.approval.resolve", where={"id": "gw-cli-1"})["params"] == \
        {"id": "gw-cli-1", "decision": "deny"}
    again = subprocess.run([str(BIN / "agent-hook"), "approve", row["id"]], capture_output=True, text=True,
                           env=center.env, timeout=60)
    assert again.returncode != 0 and "already answered" in again.stderr
    assert acted(center, shared.cid, row["id"]) == [{"action": "answer: deny", "by_kind": "owner", "by_name": OWNER,
                                                     "note": None}]
    assert len(gateway.requests_for("exec.approval.resolve", where={"id": "gw-cli-1"})) == 1


def test_a_reconnect_catches_up_with_requests_made_or_answered_meanwhile(center: Center, gateway: Gateway) -> None:
    gateway.send(approval("gw-old-1", "make clean"))
    [old] = wait_pending(center, 1)
    gateway.stop()
    wait_status(center, "down")
    # Meanwhile at the gateway: the old request was answered there, a new one is waiting.
    gateway.pending = [approval("gw-new-1", "make test")["payload"]]
    gateway.start()
    end = time.time() + 10
    while [a["id"] for a in pending(center)] != [frames.approval_id("gw-new-1")] and time.time() < end:
        time.sleep(0.05)
    [new] = wait_pending(center, 1)
    assert new["id"] == frames.approval_id("gw-new-1") and new["tool_input"]["command"] == "make test"
    history = center.http.get("/api/approvals", params={"state": "all"}).json()["approvals"]
    [gone] = [a for a in history if a["id"] == old["id"]]
    assert gone["state"] == "withdrawn" and "no longer pending at the OpenClaw gateway" in gone["answer"]["note"]


def test_an_answer_while_the_gateway_is_down_leaves_the_request_pending(center: Center, gateway: Gateway) -> None:
    gateway.send(approval("gw-down-1", "ls"))
    [row] = wait_pending(center, 1)
    gateway.stop()
    wait_status(center, "down")
    r = center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
    assert r.status_code == 503 and "not connected" in r.json()["error"], r.text
    assert [a["state"] for a in pending(center) if a["id"] == row["id"]] == ["pending"]


# -- cancel ---------------------------------------------------------------------------------------------------

def test_cancel_aborts_the_run_through_the_gateway(shared: Shared) -> None:
    center, gateway, key = shared.center, shared.gateway, shared.key
    cid = shared.cid
    r = center.http.post(f"/api/sessions/{cid}/cancel", json={"reason": "wrong branch"})
    assert r.status_code == 404  # no such card yet: the usual answer
    gateway.send(lifecycle(shared.run("run-9"), 1, "start", key=key))
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "running")
    r = center.http.post(f"/api/sessions/{cid}/cancel", json={"reason": "wrong branch"})
    assert r.status_code == 200, r.text
    assert r.json()["sessions"][0]["applied"] == "aborted at the OpenClaw gateway"
    assert acted(center, cid, cid) == [{"action": "cancel", "by_kind": "owner", "by_name": OWNER, "note": "wrong branch"}]
    assert gateway.wait_request("chat.abort", where={"sessionKey": key})["params"] == \
        {"sessionKey": key, "runId": shared.run("run-9")}
    gateway.send(lifecycle(shared.run("run-9"), 2, "end", key=key, stopReason="aborted", aborted=True))
    card = center.wait_card(lambda c: c["id"] == cid and c["state"] == "failed")
    assert card["badges"]["cancelled"] is True and card["badges"]["cancel_reason"] == "wrong branch"
    # No run now: refused, saying why; uncancel too.
    r = center.http.post(f"/api/sessions/{cid}/cancel", json={"reason": "again"})
    assert r.status_code == 409 and "no run in progress" in r.json()["error"]
    r = center.http.post(f"/api/sessions/{cid}/uncancel")
    assert r.status_code == 409 and "nothing to uncancel" in r.json()["error"]
    assert len(gateway.requests_for("chat.abort", where={"sessionKey": key})) == 1


def test_a_cancel_while_the_gateway_is_down_is_refused_as_unavailable(center: Center, gateway: Gateway) -> None:
    cid = card_of(center)
    gateway.send(lifecycle("run-7", 1, "start"))
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "running")
    gateway.stop()
    wait_status(center, "down")
    r = center.http.post(f"/api/sessions/{cid}/cancel", json={"reason": "stop it"})
    assert r.status_code == 503 and "nothing was cancelled" in r.json()["error"], r.text
    assert r.headers["Retry-After"] == "1"
    assert not center.board_cards()[cid]["badges"].get("cancelled")


def test_an_abort_the_gateway_refuses_is_reported_in_its_words(shared: Shared) -> None:
    center, gateway = shared.center, shared.gateway
    responses = [f for f in fixture_frames("abort-unauthorized-with-write.jsonl") if f.get("type") == "res"]
    [refused] = [f for f in responses if not f.get("ok")]
    gateway.handlers["chat.abort"] = lambda p: (False, refused["error"])  # the real gateway's answer
    cid = shared.cid
    gateway.send(lifecycle(shared.run("run-u"), 1, "start", key=shared.key))
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "running")
    r = center.http.post(f"/api/sessions/{cid}/cancel", json={"reason": "stop"})
    assert r.status_code == 502 and r.json()["error"] == "the OpenClaw gateway did not abort the run: unauthorized"
    card = center.wait_card(lambda c: c["id"] == cid)
    assert card["badges"]["cancelled"] is False and card["state"] == "running"  # nothing claimed that did not happen


def test_cancel_from_the_cli_goes_through_the_server(shared: Shared) -> None:
    center, gateway = shared.center, shared.gateway
    cid = shared.cid
    gateway.send(lifecycle(shared.run("run-7"), 1, "start", key=shared.key))
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "running")
    out = subprocess.run([str(BIN / "agent-hook"), "cancel", cid, "--reason", "stop it"], capture_output=True,
                         text=True, env=center.env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "aborted at the OpenClaw gateway" in out.stdout
    sent = gateway.wait_request("chat.abort", where={"sessionKey": shared.key})["params"]
    assert sent["runId"] == shared.run("run-7")
    undo = subprocess.run([str(BIN / "agent-hook"), "uncancel", cid], capture_output=True, text=True,
                          env=center.env, timeout=60)
    assert undo.returncode != 0 and "nothing to uncancel" in undo.stderr, (undo.stdout, undo.stderr)


def test_cancel_is_refused_when_the_gateway_offers_no_abort(tmp_path: Path) -> None:
    gw = Gateway(methods=["sessions.subscribe", "exec.approval.resolve"]).start()
    c = Center(tmp_path / "home", env=center_env(gw)).start()
    try:
        gw.wait_clients()
        gw.send(lifecycle("run-3", 1, "start"))
        cid = frames.card_id("host-a", "agent:main:main")
        c.wait_card(lambda x: x["id"] == cid and x["state"] == "running")
        r = c.http.post(f"/api/sessions/{cid}/cancel", json={"reason": "stop"})
        assert r.status_code == 409 and "offers no method to abort" in r.json()["error"], r.text
        assert not gw.requests_for("chat.abort")
    finally:
        c.stop()
        gw.close()


def test_without_cancel_the_server_asks_for_no_write_scope_and_refuses_a_cancel(tmp_path: Path) -> None:
    gw = Gateway().start()
    c = Center(tmp_path / "home", env=center_env(gw, AGENT_HOOKS__OPENCLAW__CANCEL="false")).start()
    try:
        gw.wait_clients()
        assert gw.connects[-1]["scopes"] == ["operator.read", "operator.approvals", "operator.admin"]
        gw.send(lifecycle("run-4", 1, "start"))
        cid = frames.card_id("host-a", "agent:main:main")
        c.wait_card(lambda x: x["id"] == cid and x["state"] == "running")
        r = c.http.post(f"/api/sessions/{cid}/cancel", json={"reason": "stop"})
        assert r.status_code == 409 and "cancel = true" in r.json()["error"], r.text
    finally:
        c.stop()
        gw.close()


# -- robustness -------------------------------------------------------------------------------------------------

def test_malformed_and_oversized_frames_cost_the_connection_at_most(center: Center, gateway: Gateway) -> None:
    for bad in ("not json", "[1, 2]", '{"type": "event", "event": "agent", "payload": "x"}',
                '{"type": "event", "event": "agent", "payload": {"stream": "lifecycle", "data": []}}',
                '{"type": "event", "event": "exec.approval.requested", "payload": {"id": 5}}',
                "[" * 100000):
        gateway.send(bad)
    gateway.send(lifecycle("run-ok", 1, "start"))
    cid = card_of(center)
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "running")
    assert oc_status(center)["malformed"] >= 3
    gateway.send("x" * (2 * 1024 * 1024))  # over max_frame_bytes: the connection is closed, then made again
    gateway.wait_clients()
    end = time.time() + 10
    while oc_status(center)["connects"] < 2 and time.time() < end:
        time.sleep(0.05)
    assert oc_status(center)["connects"] == 2
    gateway.wait_clients()
    gateway.send(lifecycle("run-ok", 2, "end", stopReason="stop", aborted=False))
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "completed")


def test_odd_characters_from_the_gateway_lose_no_events_and_reach_no_terminal(shared: Shared) -> None:
    """A lone surrogate (valid JSON, not storable) or a terminal escape in what the gateway sends: the
    frame's text is made safe, and the good events written in the same batch are kept."""
    center, gateway, key, run = shared.center, shared.gateway, shared.key, shared.run("run-1")
    gateway.send(lifecycle(run, 1, "start", key=key))
    gateway.send(tool(run, 2, "call-1", "exec", {"command": "echo \ud800 \x1b]0;owned\x07 \x1b[2J done"}, key=key))
    gateway.send(lifecycle(shared.run("run-bad"), 1, "start", key="agent:main:\x1b[31mred"))  # no id: dropped
    gateway.send(approval("gid-odd", "rm \udcff -rf \x1b[8m/", key=key))
    gateway.send(lifecycle(run, 3, "end", key=key, stopReason="stop", aborted=False))
    cid = shared.cid
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "completed")
    [row] = wait_pending(center, 1, card=cid)
    assert "\x1b" not in row["tool_input"]["command"] and "rm ? -rf" in row["tool_input"]["command"], row
    events = page(center, cid)["events"]
    [used] = [e for e in events if e["event"] == "tool_use"]
    assert "\x1b" not in used["metadata"] and "\x07" not in used["metadata"] and "done" in used["metadata"], used
    assert oc_status(center)["write_errors"] == shared.before["write_errors"]  # none from this test's frames
    assert not [c for c in center.board_cards().values() if "\x1b" in (c.get("label") or "")]


def test_a_gateway_inventing_sessions_and_requests_cannot_grow_the_store_without_bound(
        center: Center, gateway: Gateway) -> None:
    # The writer thread's function, called directly on the server's own store (its schema, a real file).
    import sqlite3

    from agent_hooks.center import fleetdb

    gateway.send(lifecycle("run-0", 1, "start"))
    center.wait_card(lambda c: c["id"] == card_of(center))
    store = sqlite3.connect(str(center.home / "store.db"), timeout=10)
    try:
        mapper = frames.Mapper()
        extra_cards, extra_requests = records.MAX_CARDS + 5, records.MAX_PENDING + 7
        acts = [a for i in range(extra_cards)
                for a in mapper.actions("agent", lifecycle(f"r{i}", 1, "start", key=f"agent:x:{i}")["payload"])]
        acts += [a for i in range(extra_requests)
                 for a in mapper.actions("exec.approval.requested", approval(f"flood-{i}", "ls")["payload"])]
        with store:
            out = records.apply(store, acts, "host-a", time.time())
        n_cards = store.execute("SELECT count(*) FROM fleet_sessions WHERE agent_type = 'openclaw'").fetchone()[0]
        n_pending = store.execute("SELECT count(*) FROM approvals WHERE state = 'pending'").fetchone()[0]
        assert (n_cards, n_pending) == (records.MAX_CARDS, records.MAX_PENDING)
        assert out.body["refused"] == extra_cards + 1 - records.MAX_CARDS
        assert isinstance(fleetdb.get(store, card_of(center)), dict)  # the sessions it had keep their cards
    finally:
        store.close()


def test_a_flooding_gateway_does_not_hold_the_hook_routes(shared: Shared) -> None:
    import threading

    center, gateway = shared.center, shared.gateway

    noise = json.dumps({"type": "event", "event": "agent", "payload": {
        "runId": "r", "stream": "assistant", "data": {"text": "x" * 2000, "delta": "x"}, "sessionKey": shared.key,
        "seq": 1}})
    times: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            status, _, _ = center.post({"hook_event_name": "PreToolUse", "session_id": "cc-1", "tool_name": "Bash",
                                        "tool_input": {"command": "ls"}, "cwd": "/tmp",
                                        "transcript_path": "", "permission_mode": "default"})
            times.append((time.perf_counter() - t0) * 1000)
            assert status == 200

    t = threading.Thread(target=probe)
    t.start()
    try:
        gateway.flood(noise, 30000)
        gateway.send(lifecycle(shared.run("run-f"), 1, "start", key=shared.key))  # still gets through the flood
    finally:
        stop.set()
        t.join(30)
    st = oc_status(center)
    assert st["dropped"] > shared.before["dropped"], st  # bounded per second: most of the noise was never read
    assert st["state"] == "connected"
    times.sort()
    assert len(times) >= 20
    p95 = times[int(len(times) * 0.95)]
    assert p95 < 250, f"hook answers under the flood: p50 {times[len(times) // 2]:.1f} ms, p95 {p95:.1f} ms"
    center.wait_card(lambda c: c["id"] == shared.cid and c["state"] == "running")


def test_large_frames_cost_the_events_budget_by_their_size(shared: Shared) -> None:
    """100 frames of 512 KB are 100 events but 50 MB to parse: the budget (200 a second) counts each
    64 KB begun as one event, so most of them are dropped unread."""
    center, gateway = shared.center, shared.gateway
    big = json.dumps({"type": "event", "event": "agent", "payload": {
        "runId": "r", "stream": "assistant", "data": {"text": "x" * (512 * 1024)}, "sessionKey": shared.key}})
    gateway.flood(big, 100)
    gateway.send(lifecycle(shared.run("run-big"), 1, "start", key=shared.key))
    center.wait_card(lambda c: c["id"] == shared.cid and c["state"] == "running")
    st = oc_status(center)
    assert st["dropped"] - shared.before["dropped"] >= 30, (shared.before, st)
    assert st["state"] == "connected" and st["connects"] == shared.before["connects"] == 1


# -- the board (headless Chromium) -----------------------------------------------------------------------------

def test_the_board_shows_the_gateway_in_its_header_and_filters_by_agent_type(center: Center,
                                                                               gateway: Gateway) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")
    from support.browser import chromium_page

    claude = center.ingest({"tmux_session": "agent-cc", "event": "tool_use", "agent_type": "claude-code"}).json()["session"]
    gateway.send(lifecycle("run-b", 1, "start"))
    cid = card_of(center)
    center.wait_card(lambda c: c["id"] == cid)
    with chromium_page(sync_api, 1400, 800) as page:
        page.goto(center.base + "/")
        page.wait_for_selector("#gateway[data-state=live]", timeout=15000)
        assert page.inner_text("#gateway") == "OpenClaw connected"
        page.wait_for_selector(f'#col-running .card[data-id="{cid}"]', timeout=5000)
        page.select_option("#f-type", "openclaw")
        page.wait_for_selector(f'.card[data-id="{claude}"]', state="detached", timeout=2000)
        assert page.locator(f'.card[data-id="{cid}"]').count() == 1
        assert "main · openclaw" in page.inner_text(f'.card[data-id="{cid}"]')
        page.select_option("#f-type", "claude-code")
        page.wait_for_selector(f'.card[data-id="{cid}"]', state="detached", timeout=2000)
        page.select_option("#f-type", "")
        # The gateway goes away: the header says so, with no reload; it comes back: connected again.
        gateway.stop()
        page.wait_for_selector("#gateway[data-state=down]", timeout=10000)
        assert page.inner_text("#gateway") == "OpenClaw down"
        assert "OpenClaw gateway" in (page.get_attribute("#gateway", "title") or "")
        gateway.start()
        page.wait_for_selector("#gateway[data-state=live]", timeout=15000)


def test_the_board_hides_the_gateway_when_none_is_configured(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")
    from support.browser import chromium_page

    c = Center(tmp_path / "home").start()
    try:
        assert c.status()["openclaw"] is None
        assert c.http.get("/api/board").json()["openclaw"] is None
        with chromium_page(sync_api, 1400, 800) as page:
            page.goto(c.base + "/")
            page.wait_for_selector("#conn[data-state=live]", timeout=15000)
            assert not page.is_visible("#gateway")
    finally:
        c.stop()


# -- frames recorded from the real gateway (tests/fixtures/openclaw/README.md) -----------------------------------

def _ms_stamps(value: Any) -> list[float]:
    """Every epoch-milliseconds stamp in a frame: ``ts`` and the ``...AtMs`` keys, at any depth."""
    if isinstance(value, list):
        return [t for v in value for t in _ms_stamps(v)]
    if not isinstance(value, dict):
        return []
    own = [v for k, v in value.items() if (k == "ts" or k.endswith("AtMs")) and isinstance(v, (int, float))]
    return own + [t for v in value.values() for t in _ms_stamps(v)]


def _shifted(value: Any, by_ms: float) -> Any:
    """``value`` with its stamps moved by ``by_ms``: a recording replays as if it happened now, so a
    request's expiry (createdAtMs + the gateway's timeout) lies ahead, as it did when recorded."""
    if isinstance(value, list):
        return [_shifted(v, by_ms) for v in value]
    if not isinstance(value, dict):
        return value
    return {k: (v + by_ms if (k == "ts" or k.endswith("AtMs")) and isinstance(v, (int, float)) else _shifted(v, by_ms))
            for k, v in value.items()}


def replay(gw: Gateway, name: str, start: int = 0, stop: int | None = None,
           key: str | None = None) -> list[dict[str, Any]]:
    """Send the recorded events of a capture (after the handshake), from index ``start`` to ``stop``,
    with their time stamps moved to now (the capture's first stamp becomes this moment). ``key``: the
    session key to replay it under instead of the recorded one (a test on the shared server)."""
    events = [f for f in fixture_frames(name) if f.get("type") == "event" and f.get("event") != "connect.challenge"]
    if key is not None:
        [recorded] = {f["payload"]["sessionKey"] for f in events if "sessionKey" in (f.get("payload") or {})}
        # Everywhere it is quoted (sessionKey, session.key, a request's sessionKey), as a JSON string.
        events = [json.loads(json.dumps(f).replace(json.dumps(recorded), json.dumps(key))) for f in events]
    stamps = _ms_stamps(events)
    by_ms = time.time() * 1000 - min(stamps) if stamps else 0.0
    for frame in events[start:stop]:
        gw.send(_shifted({k: v for k, v in frame.items() if k != "seq"}, by_ms))
    return events


def events_of(center: Center, cid: str) -> list[tuple[str, str | None]]:
    return [(e["event"], e["metadata"]) for e in reversed(page(center, cid)["events"])]


def test_a_recorded_turn_with_sessions_subscribed_lists_the_tool_with_its_input(shared: Shared) -> None:
    center, gateway = shared.center, shared.gateway
    gateway.wait_request("sessions.subscribe")
    replay(gateway, "turn-tool-subscribed.jsonl", key=shared.key)  # recorded as agent:main:main
    cid = shared.cid
    card = center.wait_card(lambda c: c["id"] == cid and c["state"] == "completed", what="the recorded turn")
    assert card["tool_calls"] == 1 and card["agent"] == "main" and card["session_id"] == shared.key
    assert [e for e, _ in events_of(center, cid)] == ["start", "tool_use", "completed"]
    assert ("tool_use", "exec: echo hello-two") in events_of(center, cid)


def test_a_recorded_turn_without_a_subscription_lists_the_tool_by_its_title(tmp_path: Path) -> None:
    gw = Gateway(methods=["chat.abort", "exec.approval.resolve"]).start()  # no sessions.subscribe offered
    c = Center(tmp_path / "home", env=center_env(gw)).start()
    try:
        gw.wait_clients()
        replay(gw, "turn-tool-unsubscribed.jsonl")
        cid = card_of(c)
        c.wait_card(lambda x: x["id"] == cid and x["state"] == "completed")
        got = events_of(c, cid)
        assert [e for e, _ in got] == ["start", "tool_use", "completed"]
        assert got[1] == ("tool_use", "exec: print text") and got[2] == ("completed", "stop")
        assert not gw.requests_for("sessions.subscribe")
    finally:
        c.stop()
        gw.close()


def test_a_recorded_abort_fails_the_card_once(shared: Shared) -> None:
    center, gateway = shared.center, shared.gateway  # the recording's session, run and request: this test's only
    events = replay(gateway, "abort-running-exec.jsonl")
    cid = card_of(center, "agent:gated:capture-abort")  # the recording's agent asks before each command
    card = center.wait_card(lambda c: c["id"] == cid and c["state"] == "failed", what="the aborted run")
    assert card["waiting_on"] == "error" and card["waiting_detail"] == "aborted"
    assert [e for e, _ in events_of(center, cid)] == ["start", "tool_use", "awaiting_review", "running", "failed"]
    assert events_of(center, cid)[1] == ("tool_use", "exec: echo started; sleep 30; echo finished")
    # The request was answered at the gateway (by another operator): our copy says so, and is not pending.
    gid = [e for e in events if e["event"] == "exec.approval.requested"][0]["payload"]["id"]
    history = center.http.get("/api/approvals", params={"state": "all"}).json()["approvals"]
    [row] = [a for a in history if a["id"] == frames.approval_id(gid)]
    assert row["state"] == "allowed" and row["answer"]["by"] == "gateway-client" and row["answer"]["via"] == "remote"
    assert row["tool_input"]["command"] == "echo started; sleep 30; echo finished"


def test_a_recorded_approval_is_answered_from_the_api(shared: Shared) -> None:
    center, gateway = shared.center, shared.gateway  # the recording's session, run and request: this test's only
    name = "approval-allow-then-second-resolve.jsonl"
    events = [f for f in fixture_frames(name) if f.get("type") == "event" and f.get("event") != "connect.challenge"]
    asked = [i for i, f in enumerate(events) if f["event"] == "exec.approval.requested"][0]
    replay(gateway, name, stop=asked + 1)  # up to the request
    gid = events[asked]["payload"]["id"]
    cid = card_of(center, "agent:gated:capture-approval")  # the recording's agent asks before each command
    [row] = wait_pending(center, 1, card=cid)
    assert row["id"] == frames.approval_id(gid) and row["tool_input"]["command"] == "echo approved-run"
    assert row["tool_input"]["decisions"] == ["allow", "deny"]  # the gateway offers no allow-always here
    assert row["suggestions"] is None  # so the board's "Always allow" is disabled
    r = center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow_always"})
    assert r.status_code == 400 and "does not offer allow_always" in r.json()["error"], r.text
    assert not gateway.requests_for("exec.approval.resolve", where={"id": gid})
    r = center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow", "via": "board"})
    assert r.status_code == 200, r.text
    assert gateway.wait_request("exec.approval.resolve", where={"id": gid})["params"] == \
        {"id": gid, "decision": "allow-once"}
    replay(gateway, name, start=asked + 1)
    center.wait_card(lambda c: c["id"] == cid and c["state"] == "completed")
    history = center.http.get("/api/approvals", params={"state": "all"}).json()["approvals"]
    [row] = [a for a in history if a["id"] == frames.approval_id(gid)]
    assert row["state"] == "allowed" and row["answer"]["via"] == "board"  # ours: the gateway's echo changed nothing


def test_a_server_flooding_before_its_hello_is_refused_at_once(tmp_path: Path) -> None:
    """Frames before connect.challenge are not events (no budget applies yet): a peer sending thousands
    of them is dropped as not speaking the handshake, instead of being read for the hello's 10 s."""
    import threading

    from websockets.sync.server import serve

    from support.ports import free_port

    port = free_port()

    def handler(ws: Any) -> None:
        try:
            for i in range(20000):
                ws.send(json.dumps({"type": "event", "event": "tick", "payload": {"n": i}}))
        except Exception:  # noqa: BLE001 - the client went away, as it should
            pass

    with serve(handler, "127.0.0.1", port) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        env = {"AGENT_HOOKS__OPENCLAW__URL": f"ws://127.0.0.1:{port}", "AGENT_HOOKS_OPENCLAW_TOKEN": TOKEN,
               "AGENT_HOOKS__FLEET__HOST": "host-a"}
        c = Center(tmp_path / "home", env=env).start()
        try:
            st = wait_status(c, "down", timeout=5)
            assert "frames before its hello" in (st["last_error"] or ""), st
        finally:
            c.stop()
            server.shutdown()


def test_the_server_stops_without_waiting_on_a_hung_gateway(tmp_path: Path, gateway: Gateway) -> None:
    """A gateway that stops answering (its loop frozen) after the hello: a closing handshake would wait
    out close_timeout (2 s); the server's stop ends the connection at once instead."""
    import threading

    thawed = threading.Event()

    async def freeze(ws: Any) -> None:
        thawed.wait(10)  # holds the test gateway's loop (nothing it gets is answered) until the stop is timed
    gateway.on_connect = freeze
    c = Center(tmp_path / "home", env=center_env(gateway)).start()
    try:
        gateway.wait_clients()
        wait_status(c, "connected")
    finally:
        t0 = time.monotonic()
        c.stop()
        took = time.monotonic() - t0
        thawed.set()  # the gateway's loop goes on: its teardown need not wait out the freeze
    assert took < 1.9, f"server stop took {took:.2f} s with a hung gateway"  # about 0.4 s; 2.4 s when it waited


def test_a_gateway_that_never_speaks_holds_nothing(tmp_path: Path) -> None:
    import socket

    from support.ports import free_port

    port = free_port()
    silent = socket.socket()
    silent.bind(("127.0.0.1", port))
    silent.listen(8)  # accepts (the kernel completes the handshake) and never says a word
    env = {"AGENT_HOOKS__OPENCLAW__URL": f"ws://127.0.0.1:{port}", "AGENT_HOOKS_OPENCLAW_TOKEN": TOKEN}
    c = Center(tmp_path / "home", env=env).start()
    try:
        times = []
        for _ in range(30):
            t0 = time.perf_counter()
            status, _, _ = c.post({"hook_event_name": "PreToolUse", "session_id": "cc-2", "tool_name": "Bash",
                                   "tool_input": {"command": "ls"}, "cwd": "/tmp", "transcript_path": "",
                                   "permission_mode": "default"})
            times.append((time.perf_counter() - t0) * 1000)
            assert status == 200
        assert oc_status(c)["state"] == "connecting"
        assert sorted(times)[len(times) // 2] < 100, times
    finally:
        c.stop()
        silent.close()


def test_the_board_answers_an_openclaw_request_from_needs_you(shared: Shared) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")
    from support.browser import chromium_page

    center, gateway = shared.center, shared.gateway
    gateway.send(lifecycle(shared.run("run-n"), 1, "start", key=shared.key))
    gateway.send(approval("gw-board-1", "git push origin main", key=shared.key))
    [row] = wait_pending(center, 1, card=shared.cid)
    assert row["suggestions"] == [{"type": "openclaw", "decision": "allow-always"}]  # offered: the button is live
    need = f'#needs .need[data-id="{row["id"]}"]'  # this test's (the shared server may list other tests' too)
    with chromium_page(sync_api, 1400, 900) as page:
        page.goto(center.base + "/")
        page.wait_for_selector(need, timeout=15000)
        text = page.inner_text(need)
        assert "git push origin main" in text and "exec" in text
        page.click(f"{need} button.always")
        sent = gateway.wait_request("exec.approval.resolve", where={"id": "gw-board-1"})["params"]
        assert sent == {"id": "gw-board-1", "decision": "allow-always"}
        page.wait_for_selector(need, state="detached", timeout=5000)
    history = center.http.get("/api/approvals", params={"state": "all"}).json()["approvals"]
    [done] = [a for a in history if a["id"] == row["id"]]
    assert done["state"] == "allowed" and done["answer"]["via"] == "board"
