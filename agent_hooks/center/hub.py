"""Live updates: one writer thread for the command center, and a WebSocket that pushes every change.

:class:`Hub` owns one store connection on one thread. Every command-center
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
import math
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket

from agent_hooks import fleet as fleet_mod
from agent_hooks import spool
from agent_hooks.center import cards, fleetdb, fleetstore, lease
from agent_hooks.server import access, jsonout
from agent_hooks.server.app import ServerState, ServerStore, close_quietly

log = logging.getLogger("agent_hooks.center.hub")
QUEUE_MAX = 5000
FULL_REBUILD_S = 5.0
# The server's connections leave the WAL to this thread, which checkpoints it this often.
CHECKPOINT_EVERY_S = 1.0
PRUNE_EVERY = 1000
# Requests of one host left out by the center's limits, counted by id up to this many.
LEFT_OUT_TRACKED = 5000
# A count of requests left out that has not changed is written again this often (limits.LEFT_OUT_KEPT_S
# forgets a host's counts a day after they were last written: a host gone for good stops being said).
LEFT_OUT_REFRESH_S = 3600.0
# The fleet's budgets are recounted at most this often after spend changed (center/ledger.py), the
# board's cost header at most this often, and the ledger pruned this often.
COST_EVERY_S = 0.05
COST_VIEW_EVERY_S = 1.0
COST_PRUNE_EVERY_S = 3600.0


class Client:
    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()  # messages as JSON text


class Hub:
    """The command center's writer thread and live hub (see the module docstring)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.own_host = fleet_mod.host_name(state.config)
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # [center] database: the fleet in PostgreSQL (shared by every center process) instead of the host's
        # SQLite store; other processes' commits then come as notifications (fleetstore.Listener).
        self.postgres = fleetstore.postgres_of(state)
        self.listener: fleetstore.Listener | None = None
        self._notices: set[str] = set()  # card ids another center changed (the loop's listener -> the writer)
        self._noticed = False
        self._notice_lock = threading.Lock()
        self.credentials_version = 0  # raised when another center paired or revoked (access.CredentialCache)
        self.thread: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.store: ServerStore | None = None
        self.stopping = False
        # Worker-side: the last published form of each card, and what to refresh.
        self._published: dict[str, str] = {}
        self._dirty: set[str] = set()
        # Each published card's row (cards.rows) and when it may change with no write (cards.due): a card
        # whose row did not change is not built again (a report that says what the last one said).
        self._rows: dict[str, tuple[Any, ...]] = {}
        # The cards as last built (writer side), for the notifier's look at what each turned into.
        self._built: dict[str, dict[str, Any]] = {}
        self._due: dict[str, float] = {}
        self._config_seen: dict[str, Any] | None = None
        # Every card id of the store at the last pass: a card not among them is new (see _members).
        self._known: set[str] = set()
        # Cards past board.max_sessions, not on the board (worker side; cards_left_out on the loop).
        self._left_out_cards = 0
        # The fleet's pending list is built again only when the approvals table changed (a trigger on this
        # thread's connection, and any other connection's commit) or a listed copy expires.
        self._approvals_dirty = True
        self._approvals_due = math.inf
        self._data_version: int | None = None
        self._last_full = 0.0
        self._writes = 0
        self._touched: set[str] = set()
        self._holding = False  # the process's write lock, held by a batch's open transaction
        self._last_failure: dict[str, str] = {}  # a tick's failure, said once until it changes
        # Loop-side: what clients are told on connect.
        self.cards: dict[str, dict[str, Any]] = {}
        self.seq = 0
        self.clients: set[Client] = set()
        # Hosts' long polls, by host: a control for one host wakes its poll only ("*": every host's).
        self.control_waiters: dict[str, set[asyncio.Event]] = {}
        self.cards_left_out = 0
        # Called on the loop after another connection committed (a hook, the CLI): held approvals
        # look at their rows again (center/approvals.py).
        self.change_listeners: list[Callable[[], None]] = []
        # A reply sent to another host, by control seq: set when that host says it typed it (or why not).
        # seq -> (the host the control went to, the future its word resolves)
        self.reply_waiters: dict[int, tuple[str, asyncio.Future[dict[str, Any]]]] = {}
        self._reading: set[asyncio.Future[None]] = set()  # words of hosts read from fleet_replies
        # Every pending approval request of the fleet (agent_hooks.center.relay), as last published, and
        # how many of each host's the list leaves out (past its fair share, or past the host's cap).
        self.approvals: list[dict[str, Any]] = []
        self.approvals_left_out: dict[str, int] = {}
        # What the center's limits (agent_hooks.center.limits) kept out, by host: "approvals" (now),
        # "cards" and "refused" (since "since"). Loop side, as the fleet store last said (fleet_left_out: every
        # center's counts with PostgreSQL); for /api/approvals, /api/fleet/status.
        self.left_out: dict[str, dict[str, Any]] = {}
        self._left_out_dirty = True  # writer side: read fleet_left_out again (counted here, or by another center)
        self._said_left_out: dict[tuple[str, str], float] = {}
        self._left_out_ids: dict[str, set[str]] = {}  # each host's pending requests not kept, by id
        self._left_out_said_at: dict[str, float] = {}  # when this center last wrote a host's count of them
        self._approvals_text = ""
        # Called on the loop with the id of every local card published (agent_hooks.center.report).
        self.local_listeners: list[Callable[[str], None]] = []
        self.epoch = ""
        # The fleet's budgets with each host's spend (center/ledger.py), as last counted: each host's long
        # poll carries its share of them. Worker-side: when to count again; loop-side: the board's header.
        self.budget_state: list[dict[str, Any]] = []
        self.cost_view: dict[str, Any] | None = None
        self._cost_dirty = True
        self._last_cost = self._last_cost_view = self._last_prune = 0.0
        self._budget_text = self._own_budgets = self._cost_view_text = ""
        self._center: bool | None = None
        # One center of the fleet counts the budgets at a time (with PostgreSQL; with SQLite this one always):
        # the others take its counts from the fleet store (fleet_shared). Writer side.
        self.budgets_lease = lease.Lease(self.postgres, lease.BUDGETS, "counts the budgets")
        # Told of every pending request and every card built, on this thread (agent_hooks.notify.service).
        self.notifier: Any = None

    # -- lifecycle (loop side) -------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        if self.postgres:
            self.listener = await fleetstore.Listener(self.postgres, self._on_notice, self._on_reconnect).start()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.thread = threading.Thread(target=self._run, args=(ready,), name="agent-hooks-fleet", daemon=True)
        self.thread.start()
        await asyncio.wrap_future(ready)

    async def stop(self) -> None:
        self.stopping = True
        if self.listener is not None:
            await self.listener.stop()
        self.jobs.put(None)
        for client in list(self.clients):
            client.queue.put_nowait(None)
        if self.thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.thread.join, 5)
        fleetstore.close_pools()

    def store_status(self) -> dict[str, Any]:
        """Where the fleet lives, for /status and doctor: the backend, and with PostgreSQL the database
        (without its password), whether the writer holds a connection, and the listener's state."""
        if not self.postgres:
            return {"backend": "sqlite"}
        return {"backend": "postgresql", "database": fleetstore.describe(self.postgres),
                "connected": self.store is not None, "counts_budgets": self.budgets_lease.holding,
                "listener": self.listener.status() if self.listener is not None else None}

    def submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``fn(conn, *args)`` on the writer thread (a read, or a write that holds its own transaction)."""
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.jobs.put((False, fn, args, fut))
        return asyncio.wrap_future(fut)

    def write(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``fn(conn, *args)`` on the writer thread inside a write transaction; a fleetdb.Result it
        returns is published (transitions at once, after the commit; cards soon after)."""
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.jobs.put((True, fn, args, fut))
        return asyncio.wrap_future(fut)

    # -- the writer thread -------------------------------------------------------

    @property
    def conn(self) -> Any:
        assert self.store is not None
        return self.store.conn

    def _open(self) -> None:
        """(Re)open the thread's connection and rebuild the board from the store it names."""
        # Its writes take the process's write lock too: meeting the hook threads on SQLite's
        # lock instead would cost one side the busy handler's sleep (1-100 ms steps).
        store = fleetstore.open_store(self.state)
        try:
            with store.write() as conn:
                epoch = fleetdb.epoch(conn)
        except BaseException:
            close_quietly(store)
            raise
        old, self.store, self.epoch = self.store, store, epoch
        if old is not None:
            close_quietly(old)
        self._data_version = None
        self._rows, self._due, self._known = {}, {}, set()
        self._watch_approvals(store.conn)
        self._tick(force=True)

    def _watch_approvals(self, conn: Any) -> None:
        """Triggers on this connection (TEMP: no other connection sees them) that note every change to the
        approvals table made here; other connections' commits are seen by PRAGMA data_version (_tick)."""
        import sqlite3

        if self.postgres:
            return  # every center hears of the table's changes, its own included, as notifications (_on_notice)

        def touched() -> None:
            self._approvals_dirty = True

        conn.create_function("agent_hooks_approvals_touched", 0, touched)
        try:
            for op in ("INSERT", "UPDATE", "DELETE"):
                conn.execute(f"CREATE TEMP TRIGGER IF NOT EXISTS agent_hooks_approvals_{op.lower()} AFTER {op}"
                             " ON main.approvals BEGIN SELECT agent_hooks_approvals_touched(); END")
        except sqlite3.OperationalError:  # a store without the table yet: built again every time, as before
            self._approvals_due = -math.inf

    def _run(self, ready: concurrent.futures.Future[None]) -> None:
        try:
            self._open()
        except Exception as exc:  # noqa: BLE001 - a store that cannot be written is waited for (recovery.py)
            if self.postgres and fleetstore.unreachable(exc):
                self._lost(exc)  # PostgreSQL away: answered 503 (hosts keep their events) until it is back
            elif not spool.unwritable(exc):
                ready.set_exception(exc)
                return
            self.state.watch.failed(exc, "the command center")
        ready.set_result(None)
        interval = max(0.01, float(self.state.config["board"]["poll_interval_s"]))
        next_tick = time.monotonic() + interval
        last_flush = last_checkpoint = 0.0
        while not self.stopping:
            try:
                job = self.jobs.get(timeout=max(0.0, next_tick - time.monotonic()))
            except queue.Empty:
                job = False
            if job is None:
                break
            self._guarded(self._follow_store)
            if job and self.paused:
                self._batch([job])  # answered at once: the store cannot be written
            elif job:
                # Group commit: the writes waiting now go in one transaction (a savepoint each).
                batch = [job]
                while len(batch) < 200:
                    try:
                        more = self.jobs.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        self.stopping = True
                        break
                    if more is not False:  # False: only a wake-up (another center's change, _on_notice)
                        batch.append(more)
                self._batch(batch)
                now = time.monotonic()
                # Cards touched by writes: refreshed when the burst is over, at least every 50 ms under load.
                if self._dirty and now - last_flush > (0.01 if self.jobs.empty() else 0.05):
                    self._guarded(self._flush)
                    last_flush = now
            if time.monotonic() >= next_tick or self._noticed:  # another center's change: at once
                if not self.paused:  # while the store cannot be written, the board stays as it was
                    self._guarded(self._tick)
                if not self.paused and time.monotonic() - last_checkpoint >= CHECKPOINT_EVERY_S:
                    self._guarded(self._checkpoint)
                    last_checkpoint = time.monotonic()
                interval = max(0.01, float(self.state.config["board"]["poll_interval_s"]))
                next_tick = time.monotonic() + interval
            if self._cost_dirty and not self.paused and time.monotonic() - self._last_cost >= COST_EVERY_S:
                self._guarded(self._cost)
            if self._left_out_dirty and not self.paused:
                self._guarded(self._load_left_out)
        if self.store is not None:
            self.store.close()
        self.budgets_lease.close()

    @property
    def paused(self) -> bool:
        """True while the store cannot be written (recovery.py): no ticks, checkpoints or writes."""
        if self.postgres:
            return self.store is None
        return self.store is None or self.state.watch.down

    # -- PostgreSQL: other centers' changes, and the database away ----------------------------------

    def _on_notice(self, notices: list[tuple[str, str]]) -> None:
        """On the loop (the listener's): what another center (or this one) committed. A host's long poll
        and a reply's waiter are woken here at once; the rest is the writer thread's, woken once for all the
        notices it has not taken yet."""
        replies: list[str] = []
        with self._notice_lock:
            wake_writer = not self._noticed
            for topic, key in notices:
                if topic == "card":
                    self._notices.add(key)
                elif topic == "control":
                    self.wake_controls(key)
                elif topic == "reply":
                    replies.append(key)
                elif topic == "credentials":
                    self.credentials_version += 1
                else:  # approvals, cost: looked at again on the writer thread
                    self._notices.add(f"\0{topic}")
            self._noticed = True
        for key in replies:
            self._remote_reply(key)
        if wake_writer:
            self.jobs.put(False)  # the writer thread wakes now, not at its next tick

    def _on_reconnect(self) -> None:
        """On the loop: the listener was away; what it missed is unknown, so everything is looked at again."""
        with self._notice_lock:
            self._notices.add("\0all")
            self._noticed = True
        self.wake_controls(None)
        self.jobs.put(False)

    def _take_notices(self) -> set[str] | None:
        with self._notice_lock:
            if not self._noticed:
                return None
            taken, self._notices, self._noticed = self._notices, set(), False
        return taken

    def _remote_reply(self, text: str) -> None:
        """On the loop: a host's word on a control, said to another center (control.replies): in the
        notification, or, too large for one, in fleet_replies by id (read only by the center that waits)."""
        try:
            doc = json.loads(text)
            seq = int(doc["seq"])
            ref = int(doc["ref"]) if "ref" in doc else None
        except (ValueError, KeyError, TypeError):
            return
        if ref is None:
            self.settle_reply(seq, doc.get("host"), doc.get("result") or {})
            return
        waiting = self.reply_waiters.get(seq)
        if waiting is not None and waiting[0] == doc.get("host") and not waiting[1].done():
            task = asyncio.ensure_future(self._stored_reply(seq, doc.get("host"), ref))
            self._reading.add(task)  # (a task nobody holds may be collected before it ends)
            task.add_done_callback(self._reading.discard)

    async def _stored_reply(self, seq: int, host: Any, ref: int) -> None:
        def take(conn: Any) -> str | None:
            row = conn.execute("DELETE FROM fleet_replies WHERE id = ? RETURNING doc", (ref,)).fetchone()
            return str(row[0]) if row is not None else None

        try:
            text = await self.write(take)
            stored = json.loads(text) if text is not None else None
        except Exception as exc:  # noqa: BLE001 - the waiter says "not confirmed yet" (202) in time
            log.warning("a host's word on control %s could not be read from the fleet store: %s", seq, exc)
            return
        if isinstance(stored, dict):
            self.settle_reply(seq, host, stored.get("result") or {})

    def settle_reply(self, seq: int, host: Any, result: dict[str, Any]) -> bool:
        """On the loop: resolve the request waiting for control ``seq``'s word (host_word), if this
        process holds it and ``host`` is the one it went to."""
        waiting = self.reply_waiters.get(seq)
        if waiting is None or waiting[0] != host or waiting[1].done():
            return False
        waiting[1].set_result(result)
        return True

    def _lost(self, exc: BaseException) -> None:
        """PostgreSQL went away: the connection is dropped and opened again at the next tick; until then
        every write is answered 503 (a host keeps its events and tries again)."""
        if self.store is not None:
            log.warning("the fleet's PostgreSQL (%s) cannot be reached: %s", fleetstore.describe(self.postgres or ""),
                        exc)
            close_quietly(self.store)
            self.store = None

    def _follow_store(self) -> None:
        """Reopen the store when its path names another file now (deleted and made again by a hook
        call, or replaced): this long-lived connection keeps the old file open, and the board would
        show, and the fleet writes go to, a file nobody else reads. One stat per wake-up. Also after
        a time the store could not be written (a new generation: SQLite keeps a connection read-only)."""
        if self.postgres:
            if self.store is None:
                self._open()  # PostgreSQL was away: try again (a failure is said once, by _guarded)
            return
        if self.state.watch.down:
            return  # the watch retries the store; this follows once it is writable
        if self.store is not None and self.store.generation == self.state.watch.generation \
                and (not self.store.moved() or not os.path.exists(self.state.paths.store)):
            return  # not moved, or gone: the next hook call makes it, then this follows
        self._open()

    def _checkpoint(self) -> None:
        """Copy the WAL into the store, here rather than in a hook's commit (see app.ServerStore).

        PASSIVE: it takes no write lock, so hook calls go on meanwhile; its fsync is paid here."""
        if self.postgres:
            return
        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()

    def _guarded(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
            self._last_failure.pop(fn.__name__, None)
        except Exception as exc:  # noqa: BLE001 - a bad tick must not end the board
            if self.postgres and fleetstore.unreachable(exc):
                self._lost(exc)
            elif spool.unwritable(exc):
                self.state.watch.failed(exc, "the command center")  # said once; retried by the watch
            elif self._last_failure.get(fn.__name__) != str(exc):
                # The same failure every second is said once, until it changes or the work succeeds.
                self._last_failure[fn.__name__] = str(exc)
                log.exception("command center %s failed (said once until it changes)", fn.__name__.strip("_"))
            try:
                if self.store is not None and self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
            except Exception:  # noqa: BLE001
                pass

    def _batch(self, batch: list[tuple[bool, Callable[..., Any], tuple[Any, ...], concurrent.futures.Future[Any]]]) -> None:
        """Run jobs in order; consecutive writes share one transaction, each in its own savepoint."""
        done: list[tuple[concurrent.futures.Future[Any], Any, BaseException | None]] = []
        if self.paused:
            # Answered 503 (StoreUnavailable): a sending host keeps its events and tries again.
            for _is_write, _fn, _args, fut in batch:
                if fut.set_running_or_notify_cancel():
                    fut.set_exception(self.state.watch.unavailable())
            return
        conn = self.conn
        for is_write, fn, args, fut in batch:
            if not fut.set_running_or_notify_cancel():
                continue
            if not is_write:
                self._commit(done)
                try:
                    done.append((fut, fn(conn, *args), None))
                except Exception as exc:  # noqa: BLE001 - handed to the awaiting request
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    done.append((fut, None, exc))
                self._commit(done)
                continue
            try:
                if not conn.in_transaction:
                    self._begin()
                conn.execute("SAVEPOINT job")
                try:
                    result = fn(conn, *args)
                except Exception:
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                    raise
                conn.execute("RELEASE job")
                done.append((fut, result, None))
            except Exception as exc:  # noqa: BLE001 - handed to the awaiting request
                done.append((fut, None, exc))
        self._commit(done)

    def _begin(self) -> None:
        """BEGIN IMMEDIATE under the process's write lock (held until :meth:`_end`)."""
        if self.postgres:
            self.conn.execute("BEGIN")  # not the host's store: the process's write lock is not needed
            return
        lock = self.state.write_lock
        lock.acquire()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            lock.release()
            raise
        self._holding = True

    def _end(self) -> None:
        """Give the write lock back once the batch's transaction is over."""
        if self._holding and not self.conn.in_transaction:
            self._holding = False
            self.state.write_lock.release()

    def _commit(self, done: list[tuple[concurrent.futures.Future[Any], Any, BaseException | None]]) -> None:
        """Commit, then answer the requests and publish their outcomes, in order."""
        if not done:
            self._end()
            return
        error: BaseException | None = None
        if self.conn.in_transaction:
            try:
                self.conn.execute("COMMIT")
            except Exception as commit_error:  # noqa: BLE001 - every job of the batch gets the error
                error = commit_error
                try:
                    self.conn.execute("ROLLBACK")
                except Exception:  # noqa: BLE001
                    pass
        self._end()
        for fut, result, exc in done:
            exc = exc or error
            if exc is not None:
                if self.postgres and fleetstore.unreachable(exc):
                    self._lost(exc)
                    exc = self.state.watch.unavailable()
                elif spool.unwritable(exc):
                    exc = self.state.watch.failed(exc, "the command center")
                fut.set_exception(exc)
                continue
            if isinstance(result, fleetdb.Result):
                self._outcome(result)
            fut.set_result(result)
        done.clear()

    def _outcome(self, out: fleetdb.Result) -> None:
        self._writes += 1
        if out.extra.get("cost"):
            self._cost_dirty = True  # a host's spend came: budgets, alerts and the header again
        if out.body.get("approvals_changed"):
            self._guarded(self._approvals_diff)  # a host's requests came or went: the strip, now
        if out.transitions and self.clients:
            self._publish([{"type": "event", **t} for t in out.transitions])
        self._dirty |= out.changed
        if out.removed:
            for cid in out.removed:
                self._published.pop(cid, None)
                self._rows.pop(cid, None)
                self._dirty.discard(cid)
            self._publish([{"type": "removed", "id": cid} for cid in out.removed])
        self._touched |= out.changed
        if self._writes % PRUNE_EVERY == 0:
            # Each card keeps its newest board.events_kept events (and their idempotency keys).
            keep = int(self.state.config["board"]["events_kept"])
            with self.store.write() as conn:  # type: ignore[union-attr]
                fleetdb.prune_events(conn, sorted(self._touched), keep)
            self._touched = set()

    def _flush(self) -> None:
        ids, self._dirty = self._dirty, set()
        self._refresh(time.time(), ids, everything=False)
        self._approvals_diff()

    def _approvals_diff(self) -> None:
        """Publish the fleet's pending requests when they changed (the board's "Needs you" strip). Built
        only when the approvals table changed, or when a listed copy of another host's request expires."""
        import sqlite3

        if self.notifier is not None:
            self._guarded(self._notify_cost_alerts)  # the ledger's alerts not queued yet: one indexed look
        now = time.time()
        if not self._approvals_dirty and now < self._approvals_due:
            return
        if self.notifier is not None:
            self._guarded(self._notify_requests)  # first: the strip shows each request's delivery "queued"
        try:
            from agent_hooks.center import relay

            self._approvals_dirty = False
            pending, listed_out = relay.pending(self.conn, self.own_host, now)
        except sqlite3.OperationalError:  # a store not migrated yet (the hooks migrate it)
            return
        self.state.stats.count("fleet_pending_built")
        if self._approvals_due != -math.inf:
            # Another host's copy leaves the list once long past its expiry (relay.pending).
            ends = [float(p["expires_at"]) + relay.EXPIRED_GRACE_S for p in pending
                    if p["host"] != self.own_host and p.get("expires_at") is not None]
            self._approvals_due = min(ends) if ends else math.inf
        text = json.dumps([pending, listed_out], sort_keys=True, default=str)
        if text != self._approvals_text:
            self._approvals_text = text
            self._publish([{"type": "approvals", "approvals": pending, "left_out": listed_out}])

    def _tick(self, force: bool = False) -> None:
        if self.postgres:
            self._tick_postgres(force)
            return
        now = time.time()
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        changed = version != self._data_version
        self._data_version = version
        if changed and self.change_listeners and self.loop is not None:
            self.loop.call_soon_threadsafe(self._changed)
        if changed or now - self._last_full >= FULL_REBUILD_S:
            self._cost_dirty = True  # this host spent, or a budget was set (a hook, the CLI); or a new day
        if changed:
            self._approvals_dirty = True  # another connection's commit: a hook's request, the CLI's answer
            event_map = self.state.config["forward"].get("event_map")
            with self.store.write() as conn:  # type: ignore[union-attr]
                out = fleetdb.sync_local(conn, event_map if isinstance(event_map, dict) else {}, now)
            if out.transitions and self.clients:
                self._publish([{"type": "event", **t} for t in out.transitions])
        self._publish_changes(now, changed or force or now - self._last_full >= FULL_REBUILD_S)

    def _tick_postgres(self, force: bool) -> None:
        """_tick on PostgreSQL: what other centers committed comes as notifications, not as a changed
        data_version, and there are no local cards (no hook feed to replay)."""
        now = time.time()
        notices = self._take_notices() or set()
        everything = force or "\0all" in notices or now - self._last_full >= FULL_REBUILD_S
        if notices & {"\0approvals", "\0all"}:
            self._approvals_dirty = True
            if self.change_listeners and self.loop is not None:
                self.loop.call_soon_threadsafe(self._changed)
        if notices & {"\0cost", "\0shared", "\0all"} or now - self._last_full >= FULL_REBUILD_S:
            self._cost_dirty = True
        if notices & {"\0left_out", "\0all"}:
            self._left_out_dirty = True
        self._dirty |= {n for n in notices if not n.startswith("\0")}
        self._publish_changes(now, everything)

    def _publish_changes(self, now: float, everything: bool) -> None:
        """After a tick: every card looked at again (``everything``), else the written ones; then the
        pending list, which also notices a listed copy that expired."""
        if everything:
            ids, self._dirty = self._dirty, set()
            self._last_full = now
            self._refresh(now, ids, everything=True)
            self._approvals_diff()
        elif self._dirty:
            self._flush()
        else:
            self._approvals_diff()  # a listed copy may have expired

    def set_center(self, is_center: bool) -> None:
        """Said by center/control.py at startup: whether this server is a command center (it subscribes to
        none). Only then are the fleet's budgets its to count; a subscribed host takes them from its center."""
        self._center = is_center
        self._cost_dirty = True

    def _cost(self) -> None:
        """Count the fleet's budgets again; when they changed, write this host's copy and wake the hosts'
        long polls (each takes its share); record alerts; refresh the board's cost header. One center of
        the fleet counts (:attr:`budgets_lease`) and writes its counts to the fleet store; the others read them."""
        import sqlite3

        from agent_hooks.center import ledger

        self._last_cost = time.monotonic()
        if self._center is None:
            return  # not known before control's startup: counted once it is (set_center)
        self._cost_dirty = False
        if not self._center:
            return
        if not self.budgets_lease.held():
            self._take_shared_cost()
            return
        now = time.time()
        cfg = self.state.config
        try:
            state = ledger.budget_state(self.conn, cfg, self.own_host, now)
            view = None
            if time.monotonic() - self._last_cost_view >= COST_VIEW_EVERY_S:
                view = ledger.board_view(self.conn, cfg, self.own_host, now)
                self._last_cost_view = time.monotonic()
            else:
                self._cost_dirty = True  # the header a moment later
        except sqlite3.OperationalError:  # a store not migrated yet (the hooks migrate it)
            return
        self.state.stats.count("fleet_budgets_counted")
        text = json.dumps(state, sort_keys=True)
        view_text = json.dumps(view, sort_keys=True, default=str) if view is not None else self._cost_view_text
        own = ledger.doc_for(state, self.own_host)
        with self.store.write() as conn:  # type: ignore[union-attr]
            if own["version"] != self._own_budgets:
                ledger.apply_budgets(conn, own, self.own_host, now, local=True)
                self._own_budgets = own["version"]
            added = ledger.record_alerts(conn, state, view, cfg, now) if (text != self._budget_text or view) else []
            if time.time() - self._last_prune >= COST_PRUNE_EVERY_S:
                ledger.prune(conn, now, float(cfg["cost"].get("fleet_keep_days") or 90.0))
                self._last_prune = time.time()
            for name, doc, before in (("budgets", text, self._budget_text), ("cost_view", view_text,
                                                                              self._cost_view_text)):
                if doc != before:  # for the other centers of the fleet (with SQLite: nobody else reads it)
                    _share(conn, name, doc, now)
        for alert in added:
            log.info("cost alert (%s %s): %s", alert["kind"], alert["subject"], alert["message"])
        self._cost_counted(text, view_text if view is not None else None)

    def _cost_counted(self, text: str, view_text: str | None) -> None:
        """Writer side: the budgets (JSON) and the board's cost header (JSON, None: not counted this time) as
        counted here or by the center that counts them: to the hosts' long polls and the boards, when changed."""
        if text != self._budget_text:
            self._budget_text = text
            if self.loop is not None:
                self.loop.call_soon_threadsafe(self._budgets_changed, json.loads(text))
        if view_text is not None and view_text != self._cost_view_text:
            self._cost_view_text = view_text
            self._publish([{"type": "cost", "cost": json.loads(view_text)}])

    def _take_shared_cost(self) -> None:
        """Another center counts the budgets: its counts, as it wrote them to the fleet store."""
        found = dict(self.conn.execute("SELECT name, doc FROM fleet_shared WHERE name IN ('budgets', 'cost_view')"))
        if "budgets" in found:
            self._cost_counted(found["budgets"], found.get("cost_view"))

    def _budgets_changed(self, state: list[dict[str, Any]]) -> None:
        self.budget_state = state
        self.wake_controls()

    def budget_doc(self, host: str) -> dict[str, Any]:
        """On the loop: the budgets as ``host`` receives them (center/ledger.doc_for)."""
        from agent_hooks.center import ledger

        return ledger.doc_for(self.budget_state, host)

    def _notify_requests(self) -> None:
        assert self.notifier is not None
        self.notifier.requests(self.store, time.time())

    def _notify_cost_alerts(self) -> None:
        assert self.notifier is not None
        self.notifier.cost_alerts(self.store, time.time())

    def _refresh(self, now: float, dirty: set[str], everything: bool) -> None:
        """Publish the cards that changed: of the written ones (``dirty``), or, ``everything``, of all the
        board shows. A card is built again only when its row changed, or its time came (cards.due)."""
        config = self.state.config
        if config is not self._config_seen:  # another configuration (stalled_after, budgets): build them all
            self._config_seen, self._rows = config, {}
        removed: list[str] = []
        if everything or any(cid not in self._known for cid in dirty):
            shown = self._members(int(config["board"]["max_sessions"]))
            removed = [cid for cid in self._published if cid not in shown]
            candidates = list(shown) if everything else [cid for cid in dirty if cid in shown]
        else:
            candidates = [cid for cid in dirty if cid in self._published or cid in self._rows]
        found = cards.rows(self.conn, sorted(candidates))
        messages: list[dict[str, Any]] = []
        rebuilt: dict[str, dict[str, Any]] = {}
        for cid in sorted(found):
            row = found[cid]
            if self._rows.get(cid) == row and now < self._due.get(cid, math.inf):
                continue  # the same row, and nothing due: the same card
            card = cards.card(self.conn, row, config, self.own_host, now)
            self._rows[cid], self._due[cid] = row, cards.due(row, config, now)
            rebuilt[cid] = self._built[cid] = card
            text = json.dumps(card, sort_keys=True, default=str)
            if self._published.get(cid) != text:
                self._published[cid] = text
                messages.append({"type": "card", "card": card})
        for cid in removed:
            self._published.pop(cid, None)
            self._rows.pop(cid, None)
            self._due.pop(cid, None)
            self._built.pop(cid, None)
            messages.append({"type": "removed", "id": cid})
        if self.notifier is not None:
            # A card that turned failed, stalled, over budget or finished: its notifications. A full pass
            # hands over every card the board shows (the notifier forgets the rest), else the rebuilt ones.
            notifier = self.notifier
            built = {cid: self._built[cid] for cid in found if cid in self._built} if everything else rebuilt
            self._guarded(lambda: notifier.cards(self.store, built, not everything, now))
        if messages:
            self._publish(messages)

    def _members(self, limit: int) -> set[str]:
        """The cards the board shows: all of them, or past ``limit`` (board.max_sessions) a set that holds
        still. A card on the board stays there until it is deleted, or a new card needs its place (the least
        recently active one gives it up); a card left out comes in when a place is free, the most recently
        active first. How many are left out is said (``cards_left_out``)."""
        activity = {cid: float(at or 0.0) for cid, at in self.conn.execute(cards.ACTIVITY_SQL)}
        known, self._known = self._known, set(activity)
        if self._known != known:
            self._approvals_dirty = True  # a request of another host names its card: one came or went
        if len(activity) <= limit:
            shown = set(activity)
        else:
            by_activity = sorted(activity, key=lambda c: activity[c], reverse=True)
            new = [c for c in by_activity if c not in known and c not in self._published][:limit]
            kept = [c for c in by_activity if c in self._published][:limit - len(new)]
            shown = set(new) | set(kept)
            for cid in by_activity:
                if len(shown) >= limit:
                    break
                shown.add(cid)
        left_out = len(activity) - len(shown)
        if left_out != self._left_out_cards:
            if left_out and not self._left_out_cards:
                log.warning("%d card(s) left out of the board, past board.max_sessions (%d): the board shows the"
                            " same cards until one is deleted or a new one comes", left_out, limit)
            self._left_out_cards = left_out
            self._publish([{"type": "cards_left_out", "count": left_out, "max_sessions": limit}])
        return shown

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
                if msg["card"].get("local"):
                    for listener in self.local_listeners:
                        listener(msg["card"]["id"])
            elif msg["type"] == "removed":
                self.cards.pop(msg["id"], None)
            elif msg["type"] == "cost":
                self.cost_view = msg["cost"]
            elif msg["type"] == "approvals":
                self.approvals = msg["approvals"]
                self.approvals_left_out = msg["left_out"]
                msg["left_out"] = self.left_out_of(msg["left_out"])
            elif msg["type"] == "cards_left_out":
                self.cards_left_out = msg["count"]
            if not self.clients:
                continue
            # Encoded once for every board. Strict JSON: a browser's JSON.parse refuses the Infinity that
            # json.dumps writes by default.
            text = jsonout.dumps(msg, default=str).decode("utf-8")
            for client in list(self.clients):
                if client.queue.qsize() >= QUEUE_MAX:
                    self.clients.discard(client)
                    client.queue.put_nowait(None)  # too slow: close; it reconnects and gets hello
                else:
                    client.queue.put_nowait(text)

    def announce(self, message: dict[str, Any]) -> None:
        """On the loop: send one message to every board now (a change no store write carries)."""
        self._broadcast([message])

    def _changed(self) -> None:
        for listener in list(self.change_listeners):
            try:
                listener()
            except Exception:  # noqa: BLE001 - one listener must not stop the others
                log.exception("store change listener failed")

    def wake_controls(self, host: str | None = None) -> None:
        """Called on the loop after a control was recorded for ``host``: its long poll answers now. None
        or "*" (a control for every host): every host's."""
        if host is None or host == "*":
            waiting = [e for events in self.control_waiters.values() for e in events]
        else:
            waiting = list(self.control_waiters.get(host, ()))
        for event in waiting:
            event.set()
        if waiting:
            self.state.stats.add("fleet_polls_woken", len(waiting))

    def wait_controls(self, host: str) -> asyncio.Event:
        """An event set when a control for ``host`` is recorded (give it back with :meth:`unwait_controls`)."""
        event = asyncio.Event()
        self.control_waiters.setdefault(host, set()).add(event)
        return event

    def unwait_controls(self, host: str, event: asyncio.Event) -> None:
        events = self.control_waiters.get(host)
        if events is not None:
            events.discard(event)
            if not events:
                del self.control_waiters[host]

    async def host_word(self, seq: int, wait_s: float, host: str) -> dict[str, Any] | None:
        """Wake the long-polling hosts, then wait up to ``wait_s`` for ``host`` (the one control ``seq``
        went to) to say what became of it (POST /api/fleet/replies); None when it said nothing in time.
        A method here, so that control.py and relay.py, which import each other's
        neighbours, need not import it."""
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.reply_waiters[seq] = (host, waiter)
        self.wake_controls(host)
        try:
            return await asyncio.wait_for(waiter, wait_s)
        except TimeoutError:
            return None
        finally:
            self.reply_waiters.pop(seq, None)

    def hello(self) -> dict[str, Any]:
        return {"type": "hello", "seq": self.seq, "host": self.own_host, "cards": cards.ordered(list(self.cards.values())),
                "cards_left_out": self.cards_left_out,
                "approvals": self.approvals, "approvals_left_out": self.left_out_of(self.approvals_left_out),
                "cost": self.cost_view, **self.state.channel_status()}

    # -- what the limits kept out (loop side) --------------------------------------------

    def left_out_of(self, listed_out: dict[str, int]) -> dict[str, int]:
        """Each host's pending requests not in the list: past its fair share of the list (``listed_out``,
        from relay.pending) and past its cap, whose copies were never kept (from its last report)."""
        out = dict(listed_out)
        for host, counts in self.left_out.items():
            if counts.get("approvals"):
                out[host] = out.get(host, 0) + counts["approvals"]
        return out

    def note_left_out(self, host: str, out: fleetdb.Result) -> None:
        """After a host's report: what its caps left out, counted in the fleet store, and said in the log (at
        most once a minute per host and kind, and whenever the number of requests left out changes)."""
        counts = self.left_out.setdefault(host, _no_counts())
        found = out.body.get("left_out")
        left: dict[str, Any] = found if isinstance(found, dict) else {}
        approvals: int | None = None
        if "approvals_left_out" in out.extra:
            # By id: a report that is not full (its requests did not all fit) adds to what earlier ones left
            # out, and the same request reported again is counted once.
            ids = self._left_out_ids.setdefault(host, set())
            if out.extra["approvals_full"]:
                ids.clear()
            ids -= out.extra["approvals_settled"]
            ids |= set(list(out.extra["approvals_left_out"])[:max(0, LEFT_OUT_TRACKED - len(ids))])
            if len(ids) != counts["approvals"]:
                approvals = counts["approvals"] = len(ids)
                self._said_left_out.pop((host, "approvals"), None)
                # The boards' strip says it now (the list itself may not have changed).
                self._broadcast([{"type": "approvals", "approvals": self.approvals,
                                  "left_out": dict(self.approvals_left_out)}])
            elif ids and time.monotonic() - self._left_out_said_at.get(host, 0.0) >= LEFT_OUT_REFRESH_S:
                approvals = len(ids)  # still so: said again now and then, or the count is forgotten after a day
            left["approvals"] = len(ids)
        cards_out = int(left.get("cards") or 0) + len(out.removed)
        if cards_out:
            counts["cards"] += cards_out
            self._say(host, "cards", f"host {host}: {counts['cards']} card(s) left out or dropped, past"
                      " fleet.max_cards_per_host (the host keeps its newest)")
        if approvals is not None or cards_out:
            self._count_left_out(host, approvals, cards_out, 0)
            if approvals is not None:
                self._left_out_said_at[host] = time.monotonic()
        if counts["approvals"]:
            self._say(host, "approvals", f"host {host}: {counts['approvals']} pending request(s) left out, past"
                      " fleet.max_requests_per_host (its newest are listed)")
        if out.status == 429:
            self.note_refused(host, str(out.body.get("error") or ""))

    def note_refused(self, host: str, why: str) -> None:
        """A host (or its new rows) refused for the center's limits (429): counted, and said in the log."""
        counts = self.left_out.setdefault(host, _no_counts())
        counts["refused"] += 1
        self._count_left_out(host, None, 0, 1)
        self._say(host, "refused", f"refused host {host} ({counts['refused']} time(s) counted): {why}")

    def _count_left_out(self, host: str, approvals: int | None, cards: int, refused: int) -> None:
        """On the loop: add to the fleet store's counts (limits.count_left_out) on the writer thread. Nobody
        waits for it; the counts shown come back from the store (:meth:`_load_left_out`)."""
        def count(conn: Any) -> None:
            from agent_hooks.center import limits

            limits.count_left_out(conn, host, approvals, cards, refused, time.time())
            self._left_out_dirty = True  # (with PostgreSQL every center hears of it: fleet_left_out's trigger)

        self.jobs.put((True, count, (), concurrent.futures.Future()))

    def _load_left_out(self) -> None:
        """On the writer thread: what the limits kept out, as the fleet store counts it, to the loop."""
        import sqlite3

        from agent_hooks.center import limits

        self._left_out_dirty = False
        try:
            counts = limits.left_out_counts(self.conn, time.time())
        except sqlite3.OperationalError:  # a store not migrated yet (the hooks migrate it)
            return
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._left_out_loaded, counts)

    def _left_out_loaded(self, counts: dict[str, dict[str, Any]]) -> None:
        """On the loop: the counts from the store; the boards' strip told when a host's requests left out changed."""
        before = {h: c["approvals"] for h, c in self.left_out.items() if c["approvals"]}
        self.left_out = counts
        if {h: c["approvals"] for h, c in counts.items() if c["approvals"]} != before:
            self._broadcast([{"type": "approvals", "approvals": self.approvals,
                              "left_out": dict(self.approvals_left_out)}])

    def _say(self, host: str, kind: str, message: str) -> None:
        now = time.monotonic()
        last = self._said_left_out.get((host, kind))
        if last is None or now - last >= 60.0:
            self._said_left_out[(host, kind)] = now
            log.warning("%s", message)


def _share(conn: Any, name: str, doc: str, now: float) -> None:
    """One document of what the fleet's centers share (fleet_shared): with PostgreSQL its trigger tells them."""
    conn.execute("INSERT INTO fleet_shared (name, doc, at) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE"
                 " SET doc = excluded.doc, at = excluded.at", (name, doc, now))


def _no_counts() -> dict[str, Any]:
    return {"approvals": 0, "cards": 0, "refused": 0, "since": time.time()}


def hub_of(state: ServerState) -> Hub:
    """The command center's hub of this server (made when the app is built, by :func:`routes`)."""
    if state.hub is None:
        raise RuntimeError("the command center's hub is not running: agent_hooks.center.hub is not a route module")
    return state.hub


async def live(ws: WebSocket) -> None:
    state: ServerState = ws.app.state.server
    try:
        await access.check(state, ws, access.PEOPLE)
    except access.Refused as refused:
        await ws.close(code=4401 if refused.status == 401 else 4403)
        return
    hub = hub_of(state)
    await ws.accept()
    client = Client(ws)
    client.queue.put_nowait(jsonout.dumps(hub.hello(), default=str).decode("utf-8"))
    hub.clients.add(client)

    async def sender() -> None:
        while True:
            text = await client.queue.get()
            if text is None:
                await ws.close()
                return
            await ws.send_text(text)

    async def receiver() -> None:
        # The board sends nothing that matters; this notices a close. Any frame, text or binary, is
        # read and dropped (receive_text() raised on a binary one, and the connection fell without a close).
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return

    tasks = [asyncio.create_task(sender()), asyncio.create_task(receiver())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        hub.clients.discard(client)
        for t in tasks:
            t.cancel()


def routes(state: ServerState) -> list[BaseRoute]:
    state.hub = Hub(state)
    return [WebSocketRoute("/api/live", live)]


async def startup(state: ServerState) -> None:
    await hub_of(state).start()


async def shutdown(state: ServerState) -> None:
    await hub_of(state).stop()
