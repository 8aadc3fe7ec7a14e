"""The board in a real browser (Debian's headless Chromium, driven by Playwright) with the real client.

The page loads; a real Claude Code session appears in "running" as its hooks fire and moves to
"awaiting_review" at its Stop; the session is cancelled from its page, and the agent's next tool call
is denied by PreToolUse (from the store, no network); the card is dragged to "completed" (a PATCH).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import E2E
from model_server import text, tool_use

from support.browser import chromium_page
from support.center import Center

# The interactive map (docs/command-center.md): a turn's end awaits review instead of completing.
EVENT_MAP = '{"SessionStart": "start", "PostToolUse": "tool_use", "UserPromptSubmit": "running", "Stop": "to_review"}'

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")


@pytest.fixture
def center(e2e: E2E) -> Iterator[Center]:
    # The server reads the client's transcripts, which live under the client's HOME.
    server = Center(e2e.agent_home, env={"HOME": str(e2e.home), "AGENT_HOOKS__FORWARD__EVENT_MAP": EVENT_MAP,
                                         "AGENT_HOOKS__FLEET__HOST": "board-host"}).start()
    yield server
    server.stop()


@pytest.fixture
def page(center: Center) -> Iterator[Any]:
    with chromium_page(sync_api, 1500, 900) as pg:
        yield pg


def test_real_session_on_the_board_cancel_from_its_page_and_drag(e2e: E2E, center: Center, page: Any,
                                                                 tmp_path: Path) -> None:
    gate, entered = threading.Event(), threading.Event()
    marker = e2e.workspace / "should-not-exist"

    def held(body: dict[str, Any]) -> list[dict[str, Any]]:
        entered.set()
        gate.wait(60)  # the browser cancels the session while the model "thinks"
        return [tool_use("Bash", {"command": f"touch {marker}", "description": "after the cancel"}, id="toolu_b2")]

    e2e.server.set_script([
        [text("Starting."), tool_use("Bash", {"command": "echo first", "description": "first"}, id="toolu_b1")],
        held,
        [text("The operator cancelled this session; stopping here.")],
    ])
    page.goto(center.base + "/")
    page.wait_for_selector("#conn[data-state=live]", timeout=15000)
    assert page.locator(".card").count() == 0

    result: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: result.setdefault("run", e2e.run("Do two steps.", allowed_tools=["Bash"])))
    runner.start()
    try:
        # It appears in "running" as its hooks fire (no reload), saying in words that it works.
        card = page.wait_for_selector("#col-running .card", timeout=30000)
        sid = card.get_attribute("data-id")
        page.wait_for_selector(f'#col-running .card[data-id="{sid}"] .badge.state.working', timeout=10000)
        assert "board-host" in card.inner_text()
        # The first tool call ran; the model is on its next turn (cancelling before the prompt
        # would block the prompt itself, and no tool call would be left to deny).
        assert entered.wait(30), e2e.describe()
        page.wait_for_selector(f'#col-running .card[data-id="{sid}"] .calls:text("1 tool call")', timeout=5000)
        # Its page: cancel with a reason.
        page.click(f'.card[data-id="{sid}"]')  # the board re-renders cards: find it afresh
        page.wait_for_selector("#panel:not([hidden])")
        page.fill("#p-reason", "wrong repository, stop")
        page.click("#p-cancel")
        page.wait_for_selector(f'.card[data-id="{sid}"] .badge.cancelled', timeout=5000)
        assert "cancel: done (here)" in page.inner_text("#p-msg")
    finally:
        gate.set()
        runner.join(90)
    run = result["run"]
    assert run.returncode == 0, e2e.describe()

    # The agent's next tool call was denied with the reason; the command never ran.
    denied = [r for r in e2e.server.tool_results() if r.get("tool_use_id") == "toolu_b2"]
    assert denied and "wrong repository, stop" in str(denied[0].get("content")), (e2e.server.tool_results(), run, e2e.describe())
    assert not marker.exists()
    rows = e2e.query("SELECT tool_name, decision, rule FROM tool_calls WHERE session_id = ? ORDER BY id", sid)
    assert [r["decision"] for r in rows][-1] == "deny" and rows[-1]["rule"] == "cancel.session"

    # At its Stop it moves to awaiting_review, live; its page shows the denial, the last message, tokens.
    page.wait_for_selector(f'#col-awaiting_review .card[data-id="{sid}"]', timeout=10000)
    page.wait_for_function("document.querySelector('#p-calls') && document.querySelector('#p-calls').innerText.includes('deny')",
                           timeout=10000)
    page.wait_for_function(
        "document.querySelector('#p-last').innerText.includes('stopping here')", timeout=10000)
    assert "context" in page.inner_text("#p-usage")
    page.screenshot(path=str(tmp_path / "board-session.png"))
    page.click("#panel-close")

    # Drag the card to "completed": a PATCH the server maps to `exit`.
    page.drag_and_drop(f'.card[data-id="{sid}"]', "#col-completed")
    page.wait_for_selector(f'#col-completed .card[data-id="{sid}"]', timeout=5000)
    deadline = time.time() + 5
    while center.card(sid)["state"] != "completed" and time.time() < deadline:
        time.sleep(0.05)
    assert center.card(sid)["state"] == "completed"
    events = [e["event"] for e in reversed(center.http.get(f"/api/board/sessions/{sid}").json()["events"])]
    assert events[0] == "start" and events[-2:] == ["to_review", "exit"], events
