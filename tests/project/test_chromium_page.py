"""chromium_page (tests/support/browser.py): one browser per test process, a fresh context per test. The
test's own thread stays free for asyncio, a test's context does not leak into the next, and a browser that
crashed is replaced for the next page."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from support.browser import chromium_page

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")


async def _answer() -> int:
    await asyncio.sleep(0)
    return 42


def test_a_page_leaves_the_tests_thread_free_for_asyncio() -> None:
    """A started sync Playwright marks its event loop running in the thread that started it: had the
    shared browser been started in the test's thread, asyncio.run() would fail there from then on."""
    with chromium_page(sync_api, 800, 600) as page:
        assert page.evaluate("1 + 1") == 2
        assert asyncio.run(_answer()) == 42  # while the page is open
    assert asyncio.run(_answer()) == 42  # and after


def test_each_page_has_a_context_of_its_own_with_the_viewport_asked_for() -> None:
    url = "http://127.0.0.1:9/"  # never fetched: the cookie only names an origin
    with chromium_page(sync_api, 800, 600) as page:
        assert page.viewport_size == {"width": 800, "height": 600}
        page.context.add_cookies([{"name": "left-over", "value": "1", "url": url}])
        assert [c["name"] for c in page.context.cookies(url)] == ["left-over"]
    with chromium_page(sync_api, 1024, 700) as page:
        assert page.viewport_size == {"width": 1024, "height": 700}
        assert page.context.cookies(url) == []


def _browser_pids() -> set[int]:
    """The main Chromium processes below this one: those whose parent (Playwright's driver) is not
    Chromium itself (its renderers and helpers are)."""
    parent, name = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            pid = int(entry.name)
            name[pid] = stat[stat.index("(") + 1:stat.rindex(")")]
            parent[pid] = int(stat[stat.rindex(")") + 1:].split()[1])

    def below_us(pid: int) -> bool:
        while pid > 1:
            pid = parent.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    return {pid for pid in name
            if name[pid] == "chromium" and name.get(parent[pid]) != "chromium" and below_us(pid)}


def test_a_crashed_browser_is_replaced_for_the_next_page() -> None:
    with chromium_page(sync_api, 800, 600) as page:
        assert page.evaluate("1 + 1") == 2
        [browser] = _browser_pids()
    os.kill(browser, signal.SIGKILL)
    end = time.monotonic() + 10
    while browser in _browser_pids() and time.monotonic() < end:
        time.sleep(0.05)
    assert browser not in _browser_pids()
    with chromium_page(sync_api, 800, 600) as page:
        assert page.evaluate("2 + 2") == 4
        assert _browser_pids() and browser not in _browser_pids()
