"""The one Starlette app of the resident server, built from route modules.

Routes are data: every module named in :data:`ROUTE_MODULES` has

    def routes(state: ServerState) -> list[starlette.routing.BaseRoute]

and may have ``async def startup(state)`` / ``async def shutdown(state)``,
run by the app's lifespan in the list's order (shutdown in reverse). To add
an area (the command center's ingest, live board, control), write a module
beside this one and add its name to ``ROUTE_MODULES``; everything it needs
from the process is on the :class:`ServerState` it is handed (also at
``request.app.state.server``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.routing import BaseRoute

from agent_hooks import __version__, spool
from agent_hooks import config as config_mod
from agent_hooks.dispatch import Deferred
from agent_hooks.paths import Paths
from agent_hooks.server import access, fastpath, local, peer
from agent_hooks.server.held import Holds
from agent_hooks.server.jsonout import JSONResponse
from agent_hooks.server.recovery import StoreUnavailable, StoreWatch
from agent_hooks.store import Store, StoreError, Transaction

if TYPE_CHECKING:
    from agent_hooks.center.channels import Channel
    from agent_hooks.center.control import Subscriber
    from agent_hooks.center.failover import Upstream
    from agent_hooks.center.hub import Hub
    from agent_hooks.center.report import Reporter
    from agent_hooks.notify.service import Notifier
    from agent_hooks.server.embedding import Embedder

T = TypeVar("T")
P = ParamSpec("P")

# Route modules, in order. The command center adds its own here:
# "agent_hooks.center.ingest", "agent_hooks.center.hub", "agent_hooks.center.control", ...
ROUTE_MODULES: list[str] = [
    "agent_hooks.server.meta",
    "agent_hooks.server.hooks",
    # The command center (docs/command-center.md); live first: it owns the writer thread.
    "agent_hooks.center.hub",
    "agent_hooks.center.ingest",
    "agent_hooks.center.control",
    "agent_hooks.center.approvals",
    # Telling a person: channels through Apprise and Web Push, from the outbox (after the hub: it is told by it).
    "agent_hooks.notify.service",
    # Starting sessions on any host (center/launch.py does it on this one).
    "agent_hooks.center.launcher",
    # Pairing a host or a device: a one-time code for its own credential (center/credentials.py).
    "agent_hooks.center.pairing",
    # OpenClaw agents through their gateway: starts nothing, imports no more, without [openclaw] url.
    "agent_hooks.openclaw.service",
    # After control: a host subscribed to a command center reports its sessions to it.
    "agent_hooks.center.report",
    # The fleet's cost: the hosts' priced messages in one ledger, its totals (center/ledger.py).
    "agent_hooks.center.spend",
    "agent_hooks.center.board",
    # Embeddings of memory files and summaries, computed here while the server runs.
    "agent_hooks.server.embedding",
]

# Answer times kept for p50/p99 (the newest ones).
TIMES_KEPT = 10_000


class Stats:
    """Counters and recent answer times of this process (read by /status)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.times_ms: deque[float] = deque(maxlen=TIMES_KEPT)

    def count(self, what: str, ms: float | None = None) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1
            if ms is not None:
                self.times_ms.append(ms)

    def add(self, what: str, n: int) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            times = sorted(self.times_ms)
            counts = dict(self.counts)

        def pct(q: float) -> float | None:
            return round(times[min(len(times) - 1, int(q * len(times)))], 3) if times else None

        return {"counts": counts, "answered": len(times), "p50_ms": pct(0.50), "p99_ms": pct(0.99)}


class _SerialTransaction(Transaction):
    """``BEGIN IMMEDIATE ... COMMIT`` under the process's write lock.

    The server's threads would otherwise meet on SQLite's lock, whose busy
    handler sleeps in steps of up to 100 ms; a Python lock hands the write
    over as soon as it is free. Other processes (the executables, the CLI)
    still meet on SQLite's lock with the busy timeout.
    """

    __slots__ = ("lock",)

    def __init__(self, conn: Any, lock: threading.Lock) -> None:
        super().__init__(conn)
        self.lock = lock

    def __enter__(self) -> Any:
        self._take_lock()
        try:
            return super().__enter__()
        except BaseException:
            self.lock.release()
            raise

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            self.lock.release()

    def _take_lock(self) -> None:
        self.lock.acquire()


WAL_PAGES_BOUND = 10_000
LOOP_STORE_RETRY_S = 30.0


def _file_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path`` now, or None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class ServerStore(Store):
    """A worker thread's connection whose write transactions take the process's write lock."""

    def __init__(self, path: str, busy_timeout_ms: int, lock: threading.Lock, migrate: bool = True) -> None:
        super().__init__(path, busy_timeout_ms, migrate)
        self.write_lock = lock
        # A commit that crosses SQLite's auto-checkpoint (1,000 pages) copies the WAL and fsyncs
        # while it holds the write lock: 10-60 ms here, every other hook call waiting behind it
        # (p99 16 ms under 20 sessions). The command center's thread checkpoints every second
        # instead (hub.py); this much higher threshold only bounds the WAL (~40 MB) should
        # that thread ever stop.
        self.conn.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES_BOUND}")
        # The file this connection has open. A long-lived connection keeps an inode, not a path:
        # after the store is deleted or another file is moved into its place, it would go on
        # writing where nobody reads (the executables open the path anew on every call).
        self.identity = _file_identity(path)
        self.generation = 0  # the StoreWatch generation it was opened in (set by ServerState)

    def moved(self) -> bool:
        """True when the store's path no longer names the file this connection has open (one stat)."""
        return _file_identity(self.path) != self.identity

    def write(self) -> Transaction:
        return _SerialTransaction(self.conn, self.write_lock)


class _LoopTransaction(_SerialTransaction):
    """The event loop's write: it takes the process's write lock and SQLite's only if both are
    free at once. Until the call's first commit, either one busy raises Deferred (the call has
    committed nothing yet, and moves to the pool). After it, the Python lock is waited for as
    the pool's threads do (they hold it for one short transaction); SQLite's is not (busy
    timeout 0), and a busy store then fails the write, which dispatch spools."""

    __slots__ = ("store",)

    def __init__(self, store: _LoopStore) -> None:
        super().__init__(store.conn, store.write_lock)
        self.store = store

    def _take_lock(self) -> None:
        if not self.lock.acquire(blocking=False):
            if self.store.deferrable:
                raise Deferred("another of the server's threads is writing", busy=True)
            self.lock.acquire()

    def __enter__(self) -> Any:
        try:
            return super().__enter__()  # the lock (_take_lock), then BEGIN IMMEDIATE
        except BaseException as exc:
            if self.store.deferrable and spool.transient(exc):
                raise Deferred(f"another process is writing ({exc})", busy=True) from exc
            raise

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        super().__exit__(exc_type, exc, tb)  # COMMIT (a failed one is rolled back), the lock released
        if exc_type is None:
            self.store.deferrable = False  # committed: from here on the call runs to its end


class _LoopStore(ServerStore):
    """The event loop's own connection, for the quick calls server/hooks.py answers inline.
    Its busy timeout is 0: a store another process is writing raises at once (see
    _LoopTransaction) instead of blocking every request of the server. It never migrates
    (the pool does, at start-up or on a call's first use), and it needs WAL: in another
    journal mode a reader would fail its every COMMIT."""

    def __init__(self, path: str, lock: threading.Lock) -> None:
        super().__init__(path, 0, lock, migrate=False)
        mode = str(self.conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if mode != "wal":
            self.conn.close()
            raise StoreError(f"the store is in {mode} journal mode, not WAL: hook calls go to the pool")
        self.deferrable = True

    def write(self) -> Transaction:
        return _LoopTransaction(self)


class _Pool(ThreadPoolExecutor):
    """The server's thread pool: every job ends with ``after()`` on its thread (ServerState.settle_store),
    whoever submitted it (``run_blocking``, the hook route, a held request)."""

    def __init__(self, max_workers: int, after: Callable[[], None]) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="agent-hooks")
        self._after = after

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        def job() -> T:
            try:
                return fn(*args, **kwargs)
            finally:
                self._after()

        return super().submit(job)


async def stop_background(task: Any) -> None:
    """Cancel a background task the lifespan started and wait for it to end, whatever it raises."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):  # noqa: BLE001 - at shutdown, nothing is left to tell
        pass


class ServerState:
    """What every route module gets: where the store is, the configuration, the
    process's environment, a thread pool for blocking work, its counters."""

    def __init__(self, paths: Paths, config: dict[str, Any], env: Mapping[str, str],
                 port: int | None = None) -> None:
        self.paths = paths
        self.env: dict[str, str] = {k: v for k, v in env.items() if k not in local.SESSION_ENV}
        self.port = port if port is not None else int(config["serve"]["port"])
        # The Host values that name this server on loopback (the front door's one set lookup, access.py).
        self.door_hosts = access.door_hosts(self.port)
        # The fleet token, read again only when its file changes (access.TokenFile).
        self.token_file = access.TokenFile(self.env)
        # Paired credentials as last verified, dropped when the credentials table changes (access.CredentialCache).
        self.credential_cache = access.CredentialCache()
        self.version = __version__
        self.build = local.build_id()
        self.started = time.time()
        self.stats = Stats()
        self.pool: ThreadPoolExecutor = _Pool(max(1, int(config["serve"]["threads"])), self.settle_store)
        self._config = config
        self._config_stamp = self._stamp()
        self._local = threading.local()
        self._loop_store: _LoopStore | None = None
        self._loop_store_retry = 0.0
        # One writer at a time among this process's threads (see _SerialTransaction).
        self.write_lock = threading.Lock()
        # Whether the store can be written; spooling and retrying while it cannot (recovery.py).
        self.watch = StoreWatch(self)
        # The hot routes, answered ahead of Starlette (agent_hooks.server.fastpath).
        self.fast_exact: dict[tuple[str, str], fastpath.ASGIApp] = {}
        self.fast_prefixes: list[tuple[str, str, fastpath.ASGIApp]] = []
        # The process that holds the socket and restarts this one (server/supervisor.py); None when
        # the app runs unsupervised (tests that build it directly).
        self.supervisor_pid: int | None = None
        # Whether uvicorn was asked to stop (set by server/worker.py). A request that waits (a held
        # approval, a host's long poll) looks at it, so that it answers within uvicorn's graceful
        # shutdown instead of holding the stop up for its whole wait.
        self.stop_requested: Callable[[], bool] = lambda: False
        # Called on the loop once the server is asked to stop (:meth:`stop_now`): what waits wakes up.
        self.stop_listeners: list[Callable[[], None]] = []
        self.loop: asyncio.AbstractEventLoop | None = None  # the server's event loop, once it runs
        # Http hooks held for a person's answer (server/held.py).
        self.holds = Holds()
        self.stop_listeners.append(self.holds.wake)  # a stop: every held request answers now
        # What the route modules set up when the app is built or starts; None while theirs is off.
        self.hub: Hub | None = None  # the command center's writer thread and live board (center/hub.py)
        self.subscriber: Subscriber | None = None  # this host's long poll to its command center (center/control.py)
        self.upstream: Upstream | None = None  # which of its command centers this host talks to (center/failover.py)
        self.reporter: Reporter | None = None  # this host's reports to its command center (center/report.py)
        self.channels: list[Channel] = []  # agents reached through a client of their own (center/channels.py)
        self.embedder: Embedder | None = None  # the embedding thread (server/embedding.py)
        self.notifier: Notifier | None = None  # notifications and Web Push (agent_hooks/notify/service.py)

    def stopping(self) -> bool:
        """True once the server was asked to stop."""
        return self.stop_requested()

    def stop_now(self) -> None:
        """The server was asked to stop (called from any thread, a signal handler's included): each of
        :attr:`stop_listeners` runs on the loop, so that what waits answers now."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        for listener in list(self.stop_listeners):
            loop.call_soon_threadsafe(listener)

    def channel_status(self) -> dict[str, Any]:
        """Each channel's connection under its name (``{"openclaw": ...}``), for /status and the board."""
        return {channel.name: channel.status() for channel in self.channels}

    def centers_status(self) -> dict[str, Any] | None:
        """The command centers this host talks to and the current one (center/failover.py), with whether
        the subscription is connected there; None when it talks to none."""
        if self.upstream is None:
            return None
        sub = self.subscriber
        return {**self.upstream.status(), "connected": bool(sub is not None and sub.connected),
                "last_error": sub.last_error if sub is not None else None}

    def fast_route(self, path: str, fn: fastpath.ASGIApp, method: str = "POST") -> BaseRoute:
        """A raw ASGI route taken before Starlette's router (see :mod:`agent_hooks.server.fastpath`);
        the returned Starlette route serves the same callable for whatever the fast path passes on."""
        return fastpath.route(path, fn, method, self.fast_exact, self.fast_prefixes)

    # Configuration: re-read when the file changes, as the executables would see it.
    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.paths.config_file)
            return (st.st_mtime_ns, st.st_size)
        except OSError:
            return None

    @property
    def config(self) -> dict[str, Any]:
        stamp = self._stamp()
        if stamp != self._config_stamp:
            self._config, _problems = config_mod.load_lenient(self.paths, self.env)
            self._config_stamp = stamp
        return self._config

    def store(self) -> Store:
        """This thread's connection to the store (opened, and migrated, on first use).

        Meant for the pool's threads: SQLite connections stay in their thread.
        """
        store = getattr(self._local, "store", None)
        # Deleted or replaced: open the path again. Opened in another generation (before or during a
        # time the store could not be written, recovery.py): SQLite keeps a connection read-only.
        if store is not None and (store.moved() or store.generation != self.watch.generation):
            close_quietly(store)
            store = None
        if store is None:
            try:
                store = self.open_store()
            except Exception as exc:
                # Not even opened (a directory it may not write, a file it may not read): a time the store
                # cannot be written, as for a failed write; a request answers 503 (create_app).
                if spool.unwritable(exc):
                    raise self.watch.failed(exc, "opening the store") from exc
                raise
            self._local.store = store
        return store

    def settle_store(self) -> None:
        """After each job of the pool, on its thread: close the thread's connection if it was opened while
        the store could not be written, or before the last change of that. SQLite maps the store's
        ``-shm`` once per process, shared by every connection, read-only when the first of them could not
        write it; one connection left open on an idle thread (a board's read during the outage) kept the
        retries' connections read-only, and the store was never found writable again (recovery.py)."""
        store = getattr(self._local, "store", None)
        if store is not None and (self.watch.down or store.generation != self.watch.generation):
            self.drop_store()

    def drop_store(self) -> None:
        """Close this thread's connection, if it has one (the next use opens another). For a time the
        store cannot be written: a connection SQLite opened with a read-only ``-shm`` keeps that file's
        mapping read-only for every later connection of this process, the retries' too (recovery.py)."""
        store = getattr(self._local, "store", None)
        self._local.store = None
        if store is not None:
            close_quietly(store)

    def loop_store(self) -> Store | None:
        """The event loop's connection (see _LoopStore), or None while it cannot be had (the store
        is missing, behind, not in WAL mode: tried again after LOOP_STORE_RETRY_S). On the loop only."""
        if self.watch.down:
            return None  # the pool's calls spool while the store cannot be written (recovery.py)
        if self._loop_store is not None and (self._loop_store.moved()
                                             or self._loop_store.generation != self.watch.generation):
            self.drop_loop_store()  # deleted or replaced: the pool's call opens (and migrates) the new one
            self._loop_store_retry = 0.0
        if self._loop_store is None and time.monotonic() >= self._loop_store_retry:
            if not os.path.exists(self.paths.store):
                return None  # the pool creates it; the loop's connection never migrates
            try:
                generation = self.watch.generation
                self._loop_store = _LoopStore(self.paths.store, self.write_lock)
                self._loop_store.generation = generation
            except Exception:  # noqa: BLE001 - the pool's calls open the store and report what is wrong
                self._loop_store_retry = time.monotonic() + LOOP_STORE_RETRY_S
        return self._loop_store

    def drop_loop_store(self) -> None:
        """Close the loop's connection (left inside a transaction: never expected); the next call opens another."""
        store, self._loop_store = self._loop_store, None
        if store is not None:
            close_quietly(store)

    def open_store(self) -> ServerStore:
        """A new connection whose write transactions take the process's write lock."""
        generation = self.watch.generation
        store = ServerStore(self.paths.store, int(self.config["runtime"]["busy_timeout_ms"]), self.write_lock)
        store.generation = generation
        return store

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the pool (store work never runs on the event loop)."""
        return await asyncio.wrap_future(self.pool.submit(fn, *args))

    def caller_allowed(self, request: Request | Any) -> bool:
        """True when the request (a Starlette request, or an ASGI scope) comes from a process of the server's own user."""
        scope = request if isinstance(request, dict) else request.scope
        return peer.same_user_scope(scope)

    def info(self) -> dict[str, Any]:
        return {
            # The server's pid is the supervisor's: the one server.json names and `stop` signals.
            "pid": self.supervisor_pid or os.getpid(),
            "worker_pid": os.getpid(),
            "port": self.port,
            "version": self.version,
            "build": self.build,
            "started": self.started,
            "uptime_s": round(time.time() - self.started, 3),
            "store": self.paths.store,
        }


def state_of(conn: HTTPConnection) -> ServerState:
    """The server's state, for a route handler: from its request or WebSocket (the app's ``state.server``)."""
    state: ServerState = conn.app.state.server
    return state


def close_quietly(store: Store) -> None:
    try:
        store.close()
    except Exception:  # noqa: BLE001 - a connection to a file that is gone
        pass


UNAUTHORIZED = {"error": "only the server's own user may call this"}


def unauthorized() -> JSONResponse:
    """The answer to a caller who is not the server's user: 401, nothing done."""
    return JSONResponse(UNAUTHORIZED, status_code=401)


async def _shut_down(module: Any, state: ServerState) -> None:
    """One module's shutdown; an error in it is logged (doctor shows it) and the others still run."""
    try:
        await module.shutdown(state)
    except Exception as exc:  # noqa: BLE001 - one area's failure must not keep the others running
        import logging
        import traceback

        from agent_hooks.dispatch import log_error

        logging.getLogger("agent_hooks.server").error("%s: shutdown failed: %s: %s", module.__name__,
                                                       type(exc).__name__, exc)
        log_error(state.paths, "server", "error", f"{module.__name__}: shutdown failed: {type(exc).__name__}: {exc}",
                  trace=traceback.format_exc())


def create_app(paths: Paths, config: dict[str, Any], env: Mapping[str, str] | None = None, *,
               port: int | None = None, route_modules: list[str] | None = None,
               on_stop: Callable[[], None] | None = None) -> Any:
    """The server's app: the routes of every module in ``route_modules`` (default
    :data:`ROUTE_MODULES`), sharing one :class:`ServerState`. ``on_stop`` runs
    last at shutdown (uvicorn ends the process by re-raising SIGTERM afterwards,
    so cleanup after ``server.run`` would never run).

    The result is the Starlette app behind a :class:`~agent_hooks.server.fastpath.FastPath`
    (its ``state`` is the Starlette app's), whose front door (agent_hooks.server.access.front_door)
    every request passes before any route."""
    state = ServerState(paths, config, os.environ if env is None else env, port)
    modules = [importlib.import_module(name) for name in (route_modules or ROUTE_MODULES)]
    routes = [route for module in modules for route in module.routes(state)]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.loop = asyncio.get_running_loop()
        for module in modules:
            if hasattr(module, "startup"):
                await module.startup(state)
        try:
            yield
        finally:
            for module in reversed(modules):
                if hasattr(module, "shutdown"):
                    await _shut_down(module, state)
            await asyncio.to_thread(state.watch.stop)
            state.pool.shutdown(wait=True)
            if on_stop is not None:
                on_stop()

    async def store_unavailable(request: Request, exc: Exception) -> JSONResponse:
        # The watch said it once (recovery.py); a sender keeps what it sent and tries again.
        return JSONResponse({"error": str(exc)}, status_code=503, headers={"Retry-After": "1"})

    async def refused(request: Request, exc: Exception) -> JSONResponse:
        # A caller who may not do this (access.check): 401 or 403 with why, nothing done.
        assert isinstance(exc, access.Refused)
        return exc.response()

    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={StoreUnavailable: store_unavailable, access.Refused: refused})
    app.state.server = state

    def door(scope: fastpath.Scope) -> str | None:
        problem = access.front_door(state, scope)
        if problem is not None:
            state.stats.count("refused_at_door")
        return problem

    return fastpath.FastPath(app, state.fast_exact, state.fast_prefixes, door, access.refuse)
