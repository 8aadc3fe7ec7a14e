"""The board in headless Chromium (Debian's, via Playwright), without the real client: an ingested event
shows within 1 s with no reload, filters narrow the board, and the page reconnects by itself after the
server restarts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.browser import chromium_page
from support.center import Center

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
    """A local session asking for input says it asks you, naming the tool, sorts first in its
    column ahead of a newer card, and its card and page show the task's state and continuations."""
    import json

    from support.repo import FIXTURES_330
    from support.scripts import agent_hook, run_hook

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
    assert badge.inner_text().startswith("asks you: Bash"), badge.inner_text()
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
    from support.scripts import agent_hook, run_hook

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


def test_board_fixes_commands_columns_reply_and_remote_cards(center: Center, page: Any, tmp_path: Path) -> None:
    """The session page has no "null" text; a tool call's command shows on the card and the page, as text
    (HTML in it is never parsed); a session awaiting its next prompt sits in Awaiting review though the
    contract's default map calls it completed; its Reply field types into its tmux pane; a card another host reported
    shows its agent, task, command and needs-input badge."""
    from support.scripts import run_hook
    from support.tmux import Tmux

    home = center.env["AGENT_HOOKS_HOME"]
    tmux = Tmux()
    try:
        pane = tmux.new("agent-web")
        env = {"AGENT_HOOKS_HOME": home, "HOME": center.env["HOME"], **tmux.env(pane)}
        sid, cwd = "0b0a7d-reply", str(tmp_path)
        base = {"session_id": sid, "cwd": cwd, "transcript_path": f"{cwd}/t.jsonl"}
        evil = "echo '<img src=x onerror=\"window.__pwned=1\">' && ls -la"
        run_hook({**base, "hook_event_name": "SessionStart", "source": "startup"}, env)
        run_hook({**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "toolu_1",
                  "tool_input": {"command": evil}}, env)
        remote = center.ingest({"tmux_session": "agent-far", "event": "start"},
                               headers={"X-Agent-Hooks-Host": "web-1"}).json()["session"]
        page.goto(center.base + "/")
        page.wait_for_selector("#conn[data-state=live]", timeout=15000)

        # The command, as text.
        cmd = page.locator(f'.card[data-id="{sid}"] code.cmd')
        cmd.wait_for(state="visible", timeout=5000)
        assert cmd.inner_text() == evil
        assert page.locator(".card img").count() == 0 and page.evaluate("window.__pwned") is None

        # A remote card with nothing reported: its page has no "null" in its header.
        page.click(f'.card[data-id="{remote}"]')
        page.wait_for_function(f"document.getElementById('p-sub').innerText.includes('id {remote}')", timeout=5000)
        assert "null" not in page.inner_text("#p-sub"), page.inner_text("#p-sub")
        page.click("#panel-close")

        # The turn ends: Waiting for you (the contract says completed), with a Reply field that types into the pane.
        run_hook({**base, "hook_event_name": "Stop", "stop_hook_active": False}, env)
        page.wait_for_selector(f'#col-awaiting_review .card[data-id="{sid}"] .reply-text', timeout=5000)
        assert page.inner_text(f'.card[data-id="{sid}"] .badge.state') == "waiting for a prompt"
        assert page.locator(f'#col-completed .card[data-id="{sid}"]').count() == 0
        page.fill(f'.card[data-id="{sid}"] .reply-text', "please add a test")
        page.click(f'.card[data-id="{sid}"] form.reply button')
        page.wait_for_selector(f'.card[data-id="{sid}"] .reply-msg.ok', timeout=5000)
        tmux.wait_text(pane, "please add a test")

        # The session page lists the call with its command.
        page.click(f'.card[data-id="{sid}"] .label')
        page.wait_for_selector("#p-calls td.cmd", timeout=5000)
        assert page.inner_text("#p-calls td.cmd") == evil

        # Another host's server reports its session: the card shows what a local one shows.
        report = {"cards": [{"session_id": "far-1", "tmux_session": "agent-far", "agent": "reviewer",
                             "task_id": "T-7", "task": "review the patch", "own_state": "needs_input",
                             "current_tool": "Bash", "current_command": "git push origin <main>",
                             "waiting_on": "needs_input", "waiting_detail": "Bash: git push origin <main>",
                             "tool_calls": 12, "in_tmux": True, "reply": False}]}
        assert center.http.post("/api/fleet/report", json=report,
                                headers={"X-Agent-Hooks-Host": "web-1"}).status_code == 200
        far = page.locator(f'.card[data-id="{remote}"]')
        far.locator(".badge.waiting.needs_input").wait_for(state="visible", timeout=5000)
        text = far.inner_text()
        assert "reviewer" in text and "review the patch" in text and "12 tool calls" in text, text
        assert far.locator("code.cmd").inner_text() == "git push origin <main>"
    finally:
        tmux.close()


def test_needs_you_strip_allow_keyboard_and_empty(center: Center, page: Any) -> None:
    """A held permission dialog appears in "Needs you" with its exact command (as text); a click on Allow
    answers the waiting hook and the strip empties; with two requests, j moves and d denies."""
    from support.approvals import Held
    from support.repo import fixture_payload

    env = {"AGENT_HOOKS_HOME": center.env["AGENT_HOOKS_HOME"], "HOME": center.env["HOME"], "TMUX": "", "TMUX_PANE": ""}
    base = fixture_payload("permission_request_bash.json", "2.1.330")
    evil = "rm -rf build && echo '<img src=x onerror=\"window.__pwned=1\">'"
    page.goto(center.base + "/")
    page.wait_for_selector("#conn[data-state=live]", timeout=15000)
    assert page.locator("#needs").is_hidden()

    held = Held({**base, "session_id": "needs-1", "tool_input": {"command": evil}}, env)
    item = page.locator(".need").first
    item.wait_for(state="visible", timeout=5000)
    assert page.inner_text(".need pre.ask.cmd") == evil
    assert page.locator(".need img").count() == 0 and page.evaluate("window.__pwned") is None
    assert "left" in page.inner_text(".need .left")
    shown = page.inner_text("#needs")
    assert "null" not in shown and "[object" not in shown, shown
    page.click(".need button.allow")
    page.wait_for_selector("#needs", state="hidden", timeout=5000)
    assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"

    # Two at once, oldest first; j selects the second, d denies it with the message typed in it.
    first = Held({**base, "session_id": "needs-2", "tool_input": {"command": "make one"}}, env)
    page.wait_for_selector(".need", timeout=5000)
    second = Held({**base, "session_id": "needs-3", "tool_input": {"command": "make two"}}, env)
    page.wait_for_function("document.querySelectorAll('.need').length === 2", timeout=5000)
    assert [t.strip() for t in page.locator(".need pre.ask.cmd").all_inner_texts()] == ["make one", "make two"]
    page.locator(".need").nth(1).locator(".deny-msg").fill("use make three")
    page.locator("body").click(position={"x": 5, "y": 700})
    page.keyboard.press("j")
    page.wait_for_selector(".need.selected >> text=make two", timeout=2000)
    page.keyboard.press("d")
    page.wait_for_function("document.querySelectorAll('.need').length === 1", timeout=5000)
    decision = second.answer()["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "deny" and decision["message"] == "use make three"
    page.keyboard.press("a")
    page.wait_for_selector("#needs", state="hidden", timeout=5000)
    assert first.answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"


def test_needs_you_raises_a_browser_notification_when_asked(center: Center, page: Any) -> None:
    """With "notify me" on, a request that arrives raises one notification (the browser's Notification
    API is recorded: headless Chromium shows none)."""
    from support.approvals import Held
    from support.repo import fixture_payload

    page.add_init_script("""
      window.__notes = [];
      window.Notification = function (title, options) { window.__notes.push([title, options && options.body]); };
      window.Notification.permission = "granted";
      window.Notification.requestPermission = async () => "granted";
    """)
    env = {"AGENT_HOOKS_HOME": center.env["AGENT_HOOKS_HOME"], "HOME": center.env["HOME"], "TMUX": "", "TMUX_PANE": ""}
    page.goto(center.base + "/")
    page.wait_for_selector("#conn[data-state=live]", timeout=15000)
    page.check("#needs-notify")
    base = fixture_payload("permission_request_bash.json", "2.1.330")
    held = Held({**base, "session_id": "notify-1", "tool_input": {"command": "terraform apply"}}, env)
    page.wait_for_function("window.__notes.length === 1", timeout=5000)
    title, body = page.evaluate("window.__notes[0]")
    assert title == "Needs you: here" and body == "Bash: terraform apply"
    page.click(".need button.deny")
    assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    page.wait_for_selector("#needs", state="hidden", timeout=5000)
    assert page.evaluate("window.__notes.length") == 1  # nothing new arrived


def test_needs_you_answers_questions_and_denies_with_stop(center: Center, page: Any) -> None:
    """A request with two questions (one multi-select): options are chosen, "Answer" sends both; a deny
    with "stop" ticked stops the turn."""
    from support.approvals import QUESTION, Held
    from support.repo import fixture_payload

    env = {"AGENT_HOOKS_HOME": center.env["AGENT_HOOKS_HOME"], "HOME": center.env["HOME"], "TMUX": "", "TMUX_PANE": ""}
    page.goto(center.base + "/")
    page.wait_for_selector("#conn[data-state=live]", timeout=15000)
    held = Held({**QUESTION, "session_id": "asks-two"}, env)
    page.wait_for_selector(".need .question", timeout=5000)
    assert page.locator(".need .question").count() == 2
    page.click(".need .question >> nth=0 >> button.option:text-is('Postgres')")
    page.click(".need .question >> nth=1 >> button.option:text-is('lint')")
    page.click(".need .question >> nth=1 >> button.option:text-is('types')")
    page.fill(".need .question >> nth=1 >> input.free", "only the fast ones")
    page.click(".need button.answer-all")
    page.wait_for_selector("#needs", state="hidden", timeout=5000)
    decision = held.answer()["hookSpecificOutput"]["decision"]
    assert decision["updatedInput"]["answers"] == {"Which database should we use?": "Postgres",
                                                   "Which checks should run?": "lint, types, only the fast ones"}

    base = fixture_payload("permission_request_bash.json", "2.1.330")
    held = Held({**base, "session_id": "deny-stop"}, env)
    page.wait_for_selector(".need button.deny", timeout=5000)
    page.fill(".need .deny-msg", "stop: wrong repository")
    page.check(".need input.interrupt")
    page.click(".need button.deny")
    assert held.answer()["hookSpecificOutput"]["decision"] == {
        "behavior": "deny", "message": "stop: wrong repository", "interrupt": True}


def test_cost_burn_rate_budget_mark_header_total_and_chart(center: Center, page: Any) -> None:
    """Another host's session whose forwarded events carry its running cost: its card shows the dollars,
    the burn rate over the last 10 minutes and its task's budget, is marked at 80 % of the budget; the
    header totals today's spend; its session page draws the cost over time as an inline SVG."""
    from support.scripts import agent_hook

    home = center.env["AGENT_HOOKS_HOME"]
    agent_hook("task", "create", "T-spend", "--budget-usd", "1", env={"AGENT_HOOKS_HOME": home})
    far = {"X-Agent-Hooks-Host": "web-1"}
    r = center.http.post("/api/hooks/sessions", json={"tmux_session": "agent-spend", "task_id": "T-spend",
                                                       "agent_type": "claude-code"}, headers=far)
    assert r.status_code == 201, r.text
    sid = r.json()["session"]["id"]
    page.goto(center.base + "/")
    page.wait_for_selector("#conn[data-state=live]", timeout=15000)
    for usd, event in ((0.0, "start"), (0.3, "tool_use"), (0.6, "tool_use")):
        assert center.ingest({"tmux_session": "agent-spend", "event": event, "cost_usd": usd}, headers=far).status_code == 200
    card = f'.card[data-id="{sid}"]'
    page.wait_for_function(f"document.querySelector('{card} .cost .usd')?.textContent === '60¢'", timeout=5000)
    # 60¢ in the last 10 minutes: $3.60 an hour. 60 % of the task's $1: not marked yet.
    assert page.inner_text(f"{card} .cost .burn") == "$3.60/h"
    assert page.inner_text(f"{card} .cost .budget") == "task 60¢ of $1.00 (60%)"
    assert page.locator(f"{card}.near-budget").count() == 0 and page.locator(f"{card} .near-budget").count() == 0
    assert page.inner_text("#spend-today") == "60¢"

    # A second session's spend adds to the header's total; the first crosses 80 % of its budget.
    center.ingest({"tmux_session": "agent-other", "event": "start", "cost_usd": 0.0}, headers=far)
    center.ingest({"tmux_session": "agent-other", "event": "tool_use", "cost_usd": 1.25}, headers=far)
    center.ingest({"tmux_session": "agent-spend", "event": "tool_use", "cost_usd": 0.85}, headers=far)
    page.wait_for_selector(f"{card}.near-budget", timeout=5000)
    assert page.inner_text(f"{card} .badge.near-budget") == "≥80% of budget"
    assert page.inner_text(f"{card} .cost .usd") == "85¢"
    page.wait_for_function("document.getElementById('spend-today').textContent === '$2.10'", timeout=5000)

    # The session page: the figures and a chart with one point per sample (0, 0.3, 0.6, 0.85).
    page.click(card)
    page.wait_for_selector("#p-cost svg.cost-chart circle", timeout=5000)
    assert page.locator("#p-cost svg.cost-chart circle").count() == 4
    points = page.get_attribute("#p-cost svg.cost-chart polyline", "points") or ""
    assert len(points.split()) == 4
    text = page.inner_text("#p-cost")
    assert "85¢" in text and "$5.10/h" in text and "task: 85¢ of $1.00 (85%)" in text
