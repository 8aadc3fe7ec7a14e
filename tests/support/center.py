"""A real command center for tests: a started server (support.servers.Server) on a free loopback port,
with httpx and a WebSocket client (websockets) pointed at it."""

from __future__ import annotations

import atexit
import json
import os
import queue
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from support.servers import Server, free_port


class Center(Server):
    """A started server; ``http`` is an httpx client on its base URL."""

    def __init__(self, home: Path, port: int | None = None, env: dict[str, str] | None = None) -> None:
        super().__init__(home, port or free_port())
        self.env["AGENT_HOOKS_HOME"] = str(home)
        user_home = home.parent / f"{home.name}-user"
        user_home.mkdir(parents=True, exist_ok=True)
        self.env["HOME"] = str(user_home)  # never the real home, whatever the fixture's scope
        self.env["AGENT_HOOKS__FORWARD__ENABLED"] = "false"
        self.env.update(env or {})
        self.http = httpx.Client(base_url=self.base, timeout=10, trust_env=False)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Center":  # type: ignore[override] - returns itself, for Center(...).start()
        super().start()
        return self

    def ingest(self, body: Any, key: str | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        h = {"Content-Type": "application/json", **(headers or {})}
        if key:
            h["Idempotency-Key"] = key
        return self.http.post("/api/hooks/ingest", content=raw, headers=h)

    def live(self) -> ClientConnection:
        return connect(f"ws://127.0.0.1:{self.port}/api/live", open_timeout=10)

    def card(self, card_id: str) -> dict[str, Any]:
        r = self.http.get(f"/api/hooks/sessions/{card_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def board_cards(self) -> dict[str, dict[str, Any]]:
        return {c["id"]: c for c in self.http.get("/api/board").json()["cards"]}

    def wait_card(self, predicate: Any, timeout: float = 10.0, what: str = "a card") -> dict[str, Any]:
        end = time.time() + timeout
        while time.time() < end:
            for card in self.board_cards().values():
                if predicate(card):
                    return card
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}: {list(self.board_cards().values())}")


def messages(ws: ClientConnection, until: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
    """WebSocket messages until ``until(list)`` is true."""
    got: list[dict[str, Any]] = []
    end = time.time() + timeout
    while not until(got):
        left = end - time.time()
        if left <= 0:
            raise AssertionError(f"timed out; got {got}")
        try:
            got.append(json.loads(ws.recv(timeout=left)))
        except TimeoutError:
            continue
    return got


def hook_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()}
    env["AGENT_HOOKS_HOME"] = str(home)
    env.update(extra)
    return env


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

    def new_context(self, sync_api: Any, viewport: dict[str, int]) -> Any:
        """A new context of the running browser; the driver and browser are (re)started first when
        there is none yet or the last one died (a crash costs one launch, not every later test)."""
        def run() -> Any:
            if self.browser is not None and self.browser.is_connected():
                try:
                    return self.browser.new_context(viewport=viewport)
                except Exception:  # noqa: BLE001 - went away since the check: start afresh below
                    pass
            self._stop()
            self.playwright = sync_api.sync_playwright().start()
            self.browser = self.playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            return self.browser.new_context(viewport=viewport)
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
def chromium_page(sync_api: Any, width: int, height: int) -> Iterator[Any]:
    """A page of Debian's headless Chromium, driven by Playwright (``playwright.sync_api``; no
    browser download), in a browser context of its own that is closed when the block ends. The page is
    a proxy to the process's shared browser (see _BrowserThread). A missing Chromium fails the test:
    `.ci/run` installs it."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)", pytrace=False)
    if not _browser:
        _browser.append(_BrowserThread())
    owner = _browser[0]
    context = owner.new_context(sync_api, {"width": width, "height": height})
    try:
        yield _Remote(owner.call(context.new_page), owner)
    finally:
        with suppress(Exception):  # the browser died: the next test starts another
            owner.call(context.close)


@contextmanager
def two_hosts(tmp_path: Path, forward: dict[str, str] | None = None,
              hook_env: dict[str, str] | None = None) -> Iterator[tuple["Center", "Center", dict[str, str]]]:
    """Host A, a command center, and host B, whose hooks forward to A and whose server subscribes to
    A's controls; ``forward`` adds to B's settings, ``hook_env`` to the environment B's hooks run in.
    Yields (a, b, the hooks' environment). B stops first; its drainer exits by itself once idle."""
    a = Center(tmp_path / "host-a", env={"AGENT_HOOKS__FLEET__HOST": "host-a"}).start()
    settings = {
        "AGENT_HOOKS__FLEET__HOST": "host-b",
        "AGENT_HOOKS__FORWARD__ENABLED": "true",
        "AGENT_HOOKS_INGEST_URL": f"{a.base}/api/hooks/ingest",
        "AGENT_HOOKS__FORWARD__IDLE_EXIT_S": "5",
        "AGENT_HOOKS__FLEET__SUBSCRIBE_BACKOFF_MAX_S": "0.5",
        **(forward or {}),
    }
    b = Center(tmp_path / "host-b", env=settings)
    try:
        b.start()
        yield a, b, {"AGENT_HOOKS_HOME": str(b.home), "HOME": b.env["HOME"], **(hook_env or {}), **settings}
    finally:
        b.stop()
        a.stop()
