"""A phone paired in a real browser (headless Chromium): the link's page pairs it, the board opens with
its cookie, its Allow answers a held request, and the session's panel names the phone as who answered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.approvals import Held
from support.browser import chromium_page
from support.center import Center
from support.pairing import pair_code
from support.repo import fixture_payload
from support.waiting import wait_for

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")

PERMISSION = {**fixture_payload("permission_request_bash.json", "2.1.330"), "session_id": "d-asks-1"}


@pytest.fixture
def center(tmp_path: Path) -> Iterator[Center]:
    c = Center(tmp_path / "center", env={"AGENT_HOOKS__FLEET__HOST": "center"}).start()
    try:
        yield c
    finally:
        c.stop()


def test_a_browser_pairs_by_its_link_answers_and_the_panel_names_it(center: Center) -> None:
    link = pair_code(center, "--device", "phone")["link"]
    held = Held(PERMISSION, {"AGENT_HOOKS_HOME": str(center.home), "HOME": center.env["HOME"]})
    [row] = wait_for(lambda: center.http.get("/api/approvals").json()["approvals"], what="the request")
    page: Any
    with chromium_page(sync_api, 1200, 900) as page:
        page.goto(link)
        assert page.input_value("#code") == link.split("code=", 1)[1]
        page.click("button[type=submit]")
        page.wait_for_selector("#conn[data-state=live]", timeout=15000)  # the board, opened with the cookie
        [cookie] = [c for c in page.context.cookies() if c["name"] == "agent_hooks_device"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
        assert page.evaluate("document.cookie") == ""  # HttpOnly: no script on the page can read it
        page.click(f'.need[data-id="{row["id"]}"] button.allow', timeout=10000)
        assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"
        page.evaluate(f"openPanel({row['session_id']!r})")
        cell = page.wait_for_selector(f'#p-approvals tr[data-id="{row["id"]}"] .answered-by', timeout=10000)
        assert cell.inner_text() == "phone"
        page.wait_for_selector("#p-actions td:has-text('answer: allow')", timeout=5000)
        assert "phone" in page.inner_text("#p-actions")
