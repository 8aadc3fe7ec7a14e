"""A real command center for tests: a started server (support.servers.Server) on a free loopback port,
with httpx and a WebSocket client (websockets) pointed at it; two of them as two hosts of a fleet."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from support.ports import free_port
from support.servers import Server


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

    def start(self) -> Center:  # type: ignore[override] - returns itself, for Center(...).start()
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


class SharedCenters:
    """Command centers kept running for a test worker's whole run, one per distinct settings, started when a
    test first asks for them (the ``shared_centers`` fixture, tests/conftest.py).

    A server start is about a quarter of a second of CPU and up to a second of waiting for its /health; the
    fast tier started some 230. A test marked ``shared_center`` takes one of these instead of one of its own
    (``center_for``): it must read only what any caller is served, or what is its own (its session, tmux and
    host names, its requests), never count everything on the center, change its settings or stop it.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._started: dict[frozenset[tuple[str, str]], Center] = {}

    def get(self, env: dict[str, str]) -> Center:
        key = frozenset(env.items())
        if key not in self._started:
            home = self.root / f"center-{len(self._started) + 1}" / "cc"
            self._started[key] = Center(home, env=env).start()
        return self._started[key]

    def stop(self) -> None:
        while self._started:
            self._started.popitem()[1].stop()


@contextmanager
def center_for(request: pytest.FixtureRequest, home: Path, env: dict[str, str]) -> Iterator[Center]:
    """The test's command center with these settings: the worker's shared one when the test is marked
    ``shared_center`` (see SharedCenters), else one of its own at ``home``, started for it and stopped after."""
    if request.node.get_closest_marker("shared_center"):
        yield request.getfixturevalue("shared_centers").get(env)
        return
    center = Center(home, env=env).start()
    try:
        yield center
    finally:
        center.stop()


def fleet_rows(center: Center, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Rows of the center's fleet store: its PostgreSQL database when [center] database names one, else its
    SQLite store (the query in SQLite's spelling either way: center/fleetstore.py translates it)."""
    url = center.env.get("AGENT_HOOKS__CENTER__DATABASE", "")
    if not url:
        from support.scripts import store_rows

        return store_rows(center.home, sql, params)
    import psycopg
    from psycopg.rows import dict_row

    from agent_hooks.center import fleetstore

    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(fleetstore.translate(sql, bool(params)).encode(), list(params) or None).fetchall()
    # Read by name or by position, as sqlite3.Row is.
    return [_Row(r) for r in rows]


class _Row(dict):  # type: ignore[type-arg]
    def __getitem__(self, key: Any) -> Any:
        return list(self.values())[key] if isinstance(key, int) else super().__getitem__(key)


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


@contextmanager
def two_hosts(tmp_path: Path, forward: dict[str, str] | None = None,
              hook_env: dict[str, str] | None = None, center_db: str = "") -> Iterator[tuple[Center, Center, dict[str, str]]]:
    """Host A, a command center, and host B, whose hooks forward to A and whose server subscribes to
    A's controls; ``forward`` adds to B's settings, ``hook_env`` to the environment B's hooks run in;
    ``center_db``: A's [center] database ("" = its SQLite store, or a PostgreSQL URL).
    Yields (a, b, the hooks' environment). B stops first; its drainer exits by itself once idle."""
    a = Center(tmp_path / "host-a", env={"AGENT_HOOKS__FLEET__HOST": "host-a",
                                         **({"AGENT_HOOKS__CENTER__DATABASE": center_db} if center_db else {})}).start()
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
