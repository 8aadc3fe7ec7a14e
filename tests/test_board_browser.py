"""The board in headless Chromium (Debian's, via Playwright), without the real client: an ingested event
shows within 1 s with no reload, filters narrow the board, and the page reconnects by itself after the
server restarts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from center_support import Center, chromium_page

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")


@pytest.fixture
def center(tmp_path: Path) -> Iterator[Center]:
    server = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "here"}).start()
    yield server
    server.stop()


@pytest.fixture
def page(center: Center) -> Iterator[Any]:
    with chromium_page(sync_api, 1400, 800) as pg:
        yield pg


def test_live_filters_and_reconnect(center: Center, page: Any) -> None:
    page.goto(center.base + "/")
    page.wait_for_selector("#conn[data-state=live]", timeout=15000)
    loads = page.evaluate("performance.getEntriesByType('navigation').length")
    t0 = time.time()
    sid = center.ingest({"tmux_session": "agent-one", "event": "tool_use", "metadata": "Grep: ok"},
                        headers={"X-Agent-Hooks-Host": "web-1"}).json()["session"]
    page.wait_for_selector(f'#col-running .card[data-id="{sid}"]', timeout=5000)
    assert time.time() - t0 < 1.0, "the card took more than 1 s to show"
    card = page.inner_text(f'.card[data-id="{sid}"]')
    assert "web-1" in card and "Grep" in card
    center.ingest({"tmux_session": "agent-one", "event": "to_review"}, headers={"X-Agent-Hooks-Host": "web-1"})
    page.wait_for_selector(f'#col-awaiting_review .card[data-id="{sid}"]', timeout=2000)
    other = center.ingest({"tmux_session": "agent-two", "event": "tool_use"},
                          headers={"X-Agent-Hooks-Host": "web-2"}).json()["session"]
    page.wait_for_selector(f'.card[data-id="{other}"]', timeout=2000)

    # Filters: by host.
    page.select_option("#f-host", "web-2")
    page.wait_for_selector(f'.card[data-id="{sid}"]', state="detached", timeout=2000)
    assert page.locator(f'.card[data-id="{other}"]').count() == 1
    page.select_option("#f-host", "")
    page.wait_for_selector(f'.card[data-id="{sid}"]', timeout=2000)

    # The server restarts; the page notices, reconnects by itself, and shows what happens next.
    center.stop()
    page.wait_for_selector("#conn[data-state=down]", timeout=5000)
    center.start()
    page.wait_for_selector("#conn[data-state=live]", timeout=15000)
    center.ingest({"tmux_session": "agent-one", "event": "exit"}, headers={"X-Agent-Hooks-Host": "web-1"})
    page.wait_for_selector(f'#col-completed .card[data-id="{sid}"]', timeout=3000)
    assert page.evaluate("performance.getEntriesByType('navigation').length") == loads  # no reload


def test_waiting_badge_sorts_first_and_task_persistence_shows(center: Center, page: Any, tmp_path: Path) -> None:
    """A local session asking for input shows a "needs input" badge with the tool, sorts first in its
    column ahead of a newer card, and its card and page show the task's state and continuations."""
    import json

    from helpers import FIXTURES_330, agent_hook, run_hook

    home = center.env["AGENT_HOOKS_HOME"]
    agent_hook("task", "create", "T-b", "--persist", "--max-continuations", "5", env={"AGENT_HOOKS_HOME": home})
    env = {"AGENT_HOOKS_HOME": home, "AGENT_HOOKS_TASK_ID": "T-b"}
    asking, plain = "0b0a7d-asking", "0b0a7d-plain"
    for sid in (asking, plain):
        run_hook({"session_id": sid, "hook_event_name": "SessionStart", "source": "startup", "cwd": str(tmp_path)},
                 env)
    data = json.loads((FIXTURES_330 / "permission_request_bash.json").read_text())
    data.update(session_id=asking, cwd=str(tmp_path))
    assert run_hook(data, env).returncode == 0
    page.goto(center.base + "/")
    page.wait_for_selector("#conn[data-state=live]", timeout=15000)
    # The plain one moves to the same column later (newer activity), yet the one asking stays on top.
    center.http.patch(f"/api/hooks/sessions/{plain}", json={"event": "to_review"}).raise_for_status()
    page.wait_for_selector(f'#col-awaiting_review .card[data-id="{plain}"]', timeout=5000)
    badge = page.locator(f'.card[data-id="{asking}"] .badge.waiting.needs_input')
    badge.wait_for(state="visible", timeout=5000)
    assert badge.inner_text().startswith("needs input: Bash"), badge.inner_text()
    order = page.eval_on_selector_all("#col-awaiting_review .card", "ns => ns.map(n => n.dataset.id)")
    assert order.index(asking) < order.index(plain), order
    assert "open · persists 0/5" in page.inner_text(f'.card[data-id="{asking}"] .persist')
    page.click(f'.card[data-id="{asking}"]')
    page.wait_for_selector("#p-sub .badge.waiting.needs_input", timeout=5000)
    page.wait_for_function("document.getElementById('p-task').innerText.includes('0 of 5')", timeout=5000)
    # Done from the CLI: the card says so live.
    agent_hook("task", "done", "T-b", env={"AGENT_HOOKS_HOME": home})
    page.wait_for_selector(f'.card[data-id="{asking}"] .persist.done', timeout=5000)


def test_a_card_says_when_the_hold_was_let_go_and_why(center: Center, page: Any, tmp_path: Path) -> None:
    """`open · persists 1/1` alone reads as still holding: once Stop let the session go, the card says
    it may stop, and why, in words."""
    from helpers import agent_hook, run_hook

    home = center.env["AGENT_HOOKS_HOME"]
    agent_hook("task", "create", "T-g", "--persist", "--max-continuations", "1", env={"AGENT_HOOKS_HOME": home})
    env = {"AGENT_HOOKS_HOME": home, "AGENT_HOOKS_TASK_ID": "T-g"}
    sid = "0b0a7d-letgo"
    base = {"session_id": sid, "cwd": str(tmp_path)}
    run_hook({**base, "hook_event_name": "SessionStart", "source": "startup"}, env)
    for _ in range(2):  # held once, then the budget of 1 is spent (a new turn each time: not a chain)
        stop = {**base, "hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "ok"}
        assert run_hook(stop, env).returncode == 0
    page.goto(center.base + "/")
    page.wait_for_selector("#conn[data-state=live]", timeout=15000)
    page.wait_for_selector(f'.card[data-id="{sid}"] .persist', timeout=5000)
    text = page.inner_text(f'.card[data-id="{sid}"] .persist')
    assert text == "open · persists 1/1 · allowed to stop: its budget is spent", text
