"""Live updates: one writer thread for the command center, and a WebSocket that pushes every change.

:class:`Fleet` owns one store connection on one thread. Every command-center
write (ingest, register, PATCH, DELETE, cancel) runs there, in the order it
was submitted, so the transitions it publishes are in commit order. Between
jobs it polls ``PRAGMA data_version`` every ``board.poll_interval_s``: the
number changes when another connection commits, which is how hook calls and
CLI commands (separate processes) reach the board. On a change it replays
the hook feed onto local cards, rebuilds the cards and publishes the ones
that differ. Every 5 s it rebuilds anyway (a session turns stalled with no write).

Messages on ``/api/live`` (JSON, each with a rising ``seq``):

* ``hello``: on connect, every card (``cards``) and this host's name;
* ``event``: one contract transition (``id``, ``event``, ``from``, ``to``,
  ``ignored``, ``source``: ingest | hook | patch | register);
* ``card``: a card as it now is; ``removed``: a card id that is gone.

A client that cannot keep up (``QUEUE_MAX`` messages behind) is closed; the
board then reconnects and starts again from ``hello``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from agent_hooks import fleet as fleet_mod
from agent_hooks.server import access, cards, fleetdb
from agent_hooks.server.app import ServerState
from agent_hooks.store import Store

log = logging.getLogger("agent_hooks.server.live")
QUEUE_MAX = 5000
FULL_REBUILD_S = 5.0
PRUNE_EVERY = 1000


class Client:
    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()


class Fleet:
    """The command center's writer thread and live hub (see the module docstring)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.own_host = fleet_mod.host_name(state.config)
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.store: Store | None = None
        self.stopping = False
        # Worker-side: the last published form of each card, and what to refresh.
        self._published: dict[str, str] = {}
        self._dirty: set[str] = set()
        self._data_version: int | None = None
        self._last_full = 0.0
        self._writes = 0
        # Loop-side: what clients are told on connect.
        self.cards: dict[str, dict[str, Any]] = {}
        self.seq = 0
        self.clients: set[Client] = set()
        self.control_waiters: set[asyncio.Event] = set()
        self.epoch = ""

    # -- lifecycle (loop side) -------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.thread = threading.Thread(target=self._run, args=(ready,), name="agent-hooks-fleet", daemon=True)
        self.thread.start()
        await asyncio.wrap_future(ready)

    async def stop(self) -> None:
        self.stopping = True
        self.jobs.put(None)
        for client in list(self.clients):
            client.queue.put_nowait(None)
        if self.thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.thread.join, 5)

    def submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``fn(conn, *args)`` on the writer thread; its result (an Outcome is published)."""
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.jobs.put((fn, args, fut))
        return asyncio.wrap_future(fut)

    def write(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``fn(conn, *args)`` on the writer thread inside one write transaction."""
        return self.submit(_in_transaction, fn, *args)

    # -- the writer thread -------------------------------------------------------

    @property
    def conn(self) -> Any:
        assert self.store is not None
        return self.store.conn

    def _run(self, ready: concurrent.futures.Future[None]) -> None:
        try:
            self.store = Store(self.state.paths.store, int(self.state.config["runtime"]["busy_timeout_ms"]))
            with self.store.write() as conn:
                self.epoch = fleetdb.epoch(conn)
            self._tick(force=True)
        except Exception as exc:  # noqa: BLE001 - the server answers 503 on the board routes then
            ready.set_exception(exc)
            return
        ready.set_result(None)
        while not self.stopping:
            interval = max(0.01, float(self.state.config["board"]["poll_interval_s"]))
            try:
                job = self.jobs.get(timeout=interval)
            except queue.Empty:
                job = False
            if job is None:
                break
            if job:
                self._do(*job)
                # Refresh the touched cards once the burst is over (or every 50 writes under load).
                if self._dirty and (self.jobs.empty() or self._writes % 50 == 0):
                    self._flush()
            else:
                self._guarded(self._tick)
        self.store.close()

    def _guarded(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception:  # noqa: BLE001 - a bad tick must not end the board
            log.exception("command center tick failed")
            try:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
            except Exception:  # noqa: BLE001
                pass

    def _do(self, fn: Callable[..., Any], args: tuple[Any, ...], fut: concurrent.futures.Future[Any]) -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            result = fn(self.conn, *args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            fut.set_exception(exc)
            return
        if isinstance(result, fleetdb.Outcome):
            self._outcome(result)
        fut.set_result(result)

    def _outcome(self, out: fleetdb.Outcome) -> None:
        self._writes += 1
        if out.transitions and self.clients:
            self._publish([{"type": "event", **t} for t in out.transitions])
        self._dirty |= out.changed
        if out.removed:
            for cid in out.removed:
                self._published.pop(cid, None)
                self._dirty.discard(cid)
            self._publish([{"type": "removed", "id": cid} for cid in out.removed])
        if self._writes % PRUNE_EVERY == 0:
            keep = int(self.state.config["board"]["events_kept"])
            with self.store.write() as conn:  # type: ignore[union-attr]
                for cid in out.changed:
                    fleetdb.prune_events(conn, cid, keep)

    def _flush(self) -> None:
        ids, self._dirty = sorted(self._dirty), set()
        built = cards.build(self.conn, self.state.config, self.own_host, time.time(), ids)
        self._diff(built, partial=True)

    def _tick(self, force: bool = False) -> None:
        now = time.time()
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        changed = version != self._data_version
        self._data_version = version
        if changed:
            event_map = self.state.config["forward"].get("event_map")
            with self.store.write() as conn:  # type: ignore[union-attr]
                out = fleetdb.sync_local(conn, event_map if isinstance(event_map, dict) else {}, now)
            if out.transitions and self.clients:
                self._publish([{"type": "event", **t} for t in out.transitions])
        if changed or force or self._dirty or now - self._last_full >= FULL_REBUILD_S:
            self._dirty = set()
            self._last_full = now
            self._diff(cards.build(self.conn, self.state.config, self.own_host, now), partial=False)

    def _diff(self, built: dict[str, dict[str, Any]], partial: bool) -> None:
        messages = []
        for cid, card in built.items():
            text = json.dumps(card, sort_keys=True, default=str)
            if self._published.get(cid) != text:
                self._published[cid] = text
                messages.append({"type": "card", "card": card})
        if not partial:
            for cid in [c for c in self._published if c not in built]:
                del self._published[cid]
                messages.append({"type": "removed", "id": cid})
        if messages:
            self._publish(messages)

    def _publish(self, messages: list[dict[str, Any]]) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._broadcast, messages)

    # -- the hub (loop side) -------------------------------------------------------

    def _broadcast(self, messages: list[dict[str, Any]]) -> None:
        for msg in messages:
            self.seq += 1
            msg["seq"] = self.seq
            if msg["type"] == "card":
                self.cards[msg["card"]["id"]] = msg["card"]
            elif msg["type"] == "removed":
                self.cards.pop(msg["id"], None)
            for client in list(self.clients):
                if client.queue.qsize() >= QUEUE_MAX:
                    self.clients.discard(client)
                    client.queue.put_nowait(None)  # too slow: close; it reconnects and gets hello
                else:
                    client.queue.put_nowait(msg)

    def wake_controls(self) -> None:
        """Called on the loop after a control was recorded: long-polling hosts answer now."""
        for event in list(self.control_waiters):
            event.set()

    def hello(self) -> dict[str, Any]:
        return {"type": "hello", "seq": self.seq, "host": self.own_host, "cards": list(self.cards.values())}


def _in_transaction(conn: Any, fn: Callable[..., Any], *args: Any) -> Any:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn, *args)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


def fleet_of(state: ServerState) -> Fleet:
    return state.fleet  # type: ignore[attr-defined,no-any-return]


async def live(ws: WebSocket) -> None:
    state: ServerState = ws.app.state.server
    denied = access.check(state, ws)
    if denied is not None:
        await ws.close(code=4401 if denied.status_code == 401 else 4403)
        return
    hub = fleet_of(state)
    await ws.accept()
    client = Client(ws)
    client.queue.put_nowait(hub.hello())
    hub.clients.add(client)

    async def sender() -> None:
        while True:
            msg = await client.queue.get()
            if msg is None:
                await ws.close()
                return
            await ws.send_text(json.dumps(msg, default=str))

    async def receiver() -> None:
        try:
            while True:
                await ws.receive_text()  # the board sends nothing that matters; this notices a close
        except WebSocketDisconnect:
            return

    tasks = [asyncio.create_task(sender()), asyncio.create_task(receiver())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        hub.clients.discard(client)
        for t in tasks:
            t.cancel()


def routes(state: ServerState) -> list[BaseRoute]:
    state.fleet = Fleet(state)  # type: ignore[attr-defined]
    return [WebSocketRoute("/api/live", live)]


async def startup(state: ServerState) -> None:
    await fleet_of(state).start()


async def shutdown(state: ServerState) -> None:
    await fleet_of(state).stop()
