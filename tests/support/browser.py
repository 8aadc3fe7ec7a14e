"""The board's pages in Debian's headless Chromium, driven by Playwright: one browser per test process, a
fresh browser context per test (``chromium_page``)."""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


# One Playwright driver and one Chromium per test process, a new browser context (and page) per test.
# Starting the driver (node) and Chromium for each test cost about 0.9 s of CPU a test; a context on a
# running browser about 0.2 s (6 pages: 5.4 core-s as 6 launches, 1.95 as 6 contexts of one browser).
#
# Why a thread of its own: a started sync Playwright leaves its asyncio loop marked as running in the
# thread that started it (between sync calls; see wait_for_future in playwright/_impl/_greenlets.py),
# so a later test of the same process that calls asyncio.run() fails ("cannot be called from a running
# event loop"). Its objects also belong to that thread (greenlets cannot switch across threads). So the
# driver lives in the "playwright" thread, and a test gets proxies (_Remote) whose attribute reads and
# calls run there; the test's own thread never sees Playwright's loop.


class _BrowserThread:
    """The thread that owns the driver and the browser: ``call(fn)`` runs ``fn`` there and returns its
    result (or raises its exception) in the caller's thread."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Any, Future[Any]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="playwright", daemon=True)
        self._thread.start()
        self._pid = os.getpid()
        self.playwright: Any = None
        self.browser: Any = None

    def _serve(self) -> None:
        while (job := self._calls.get()) is not None:
            fn, done = job
            try:
                done.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
                done.set_exception(exc)

    def call(self, fn: Any) -> Any:
        if threading.current_thread() is self._thread:  # a Playwright callback calling back in
            return fn()
        done: Future[Any] = Future()
        self._calls.put((fn, done))
        return done.result()

    def new_context(self, sync_api: Any, viewport: dict[str, int], touch: bool = False) -> Any:
        """A new context of the running browser; the driver and browser are (re)started first when
        there is none yet or the last one died (a crash costs one launch, not every later test).
        ``touch``: a touch screen (taps, and ``pointer: coarse``), as a phone's."""
        def run() -> Any:
            if self.browser is not None and self.browser.is_connected():
                try:
                    return self.browser.new_context(viewport=viewport, has_touch=touch)
                except Exception:  # noqa: BLE001 - went away since the check: start afresh below
                    pass
            self._stop()
            self.playwright = sync_api.sync_playwright().start()
            self.browser = self.playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            return self.browser.new_context(viewport=viewport, has_touch=touch)
        return self.call(run)

    def _stop(self) -> None:
        browser, playwright, self.browser, self.playwright = self.browser, self.playwright, None, None
        for close in (browser and browser.close, playwright and playwright.stop):
            if close:
                with suppress(Exception):  # already dead: nothing left to close
                    close()

    def close(self) -> None:
        """Close the browser and the driver (waiting for its process), then end the thread. Bounded: a
        hung call must not keep the test process from exiting (the driver then ends with its pipe)."""
        if os.getpid() != self._pid:  # a forked copy: the thread and the driver are the parent's
            return
        done: Future[Any] = Future()
        self._calls.put((self._stop, done))
        self._calls.put(None)
        with suppress(Exception):  # closing what is already dead, or a hung driver
            done.result(30)
        self._thread.join(5)


class _Remote:
    """A Playwright object owned by the browser thread: attribute reads and method calls run there, and
    the Playwright objects they return (a Locator, the Keyboard, an ElementHandle) come back as proxies."""

    __slots__ = ("_obj", "_owner")

    def __init__(self, obj: Any, owner: _BrowserThread) -> None:
        self._obj = obj
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        owner = self._owner
        value = owner.call(lambda: getattr(self._obj, name))
        if not callable(value):
            return _wrap(value, owner)
        return lambda *args, **kwargs: _wrap(owner.call(lambda: value(*_unwrap(args), **_unwrap(kwargs))), owner)

    def __repr__(self) -> str:
        return self._owner.call(lambda: repr(self._obj))


def _wrap(value: Any, owner: _BrowserThread) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_wrap(v, owner) for v in value)
    if type(value).__module__.startswith("playwright."):
        return _Remote(value, owner)
    return value


def _unwrap(value: Any) -> Any:
    if isinstance(value, _Remote):
        return value._obj
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


_browser: list[_BrowserThread] = []  # this process's, started by the first chromium_page


def _close_browser() -> None:
    if _browser:
        _browser.pop().close()


atexit.register(_close_browser)  # no chromium or node process outlives the test process


@contextmanager
def chromium_page(sync_api: Any, width: int, height: int, touch: bool = False) -> Iterator[Any]:
    """A page of Debian's headless Chromium, driven by Playwright (``playwright.sync_api``; no
    browser download), in a browser context of its own that is closed when the block ends. The page is
    a proxy to the process's shared browser (see _BrowserThread); ``touch`` makes it a touch screen (taps,
    ``pointer: coarse``). A missing Chromium fails the test:
    `.ci/run` installs it."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)", pytrace=False)
    if not _browser:
        _browser.append(_BrowserThread())
    owner = _browser[0]
    context = owner.new_context(sync_api, {"width": width, "height": height}, touch)
    try:
        yield _Remote(owner.call(context.new_page), owner)
    finally:
        with suppress(Exception):  # the browser died: the next test starts another
            owner.call(context.close)
