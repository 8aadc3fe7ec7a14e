"""A store the server cannot write: spool the hook calls, retry the store, replay, and say so once.

The executables open the store on every call; the server keeps its connections
open (app.py). A connection SQLite opened on a store it could not write (a
0444 file, a read-only mount, an immutable file) stays read-only after the
file is writable again, and such a connection leaves the store's ``-wal`` and
``-shm`` files with the store's read-only mode, which then keeps every writer
out. So when a write fails because the store cannot be written
(:func:`agent_hooks.spool.unwritable`), the server:

* says it once: one line in the server log and in the error log (doctor reads it);
* answers each hook call with no decision and spools it as the executables spool
  a busy call (agent_hooks.spool), without touching the store again;
* tries the store every :data:`RETRY_S` on a new connection (giving the ``-wal``
  and ``-shm`` files it left read-only the store's mode once the store itself
  is writable);
* lets no connection opened meanwhile outlive its job: SQLite maps the ``-shm``
  once per process for all its connections, read-only if the first could not
  write it, so one read's connection left open on an idle thread (the board's
  session panel) kept every retry read-only for good. The hook calls close
  theirs (server/hooks.py), every other job of the pool its own as it ends
  (app.ServerState.settle_store), and a request that cannot even open the
  store is answered 503 (app.ServerState.store);
* once a write commits: every connection is reopened (the generation moves),
  the spool is replayed, and one line says so, with the count.

The command center's writer thread (hub.py) pauses while the store is down and
its requests are answered 503 (:class:`StoreUnavailable`), so a sending host keeps
its events queued and tries again.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from typing import TYPE_CHECKING, Any

from agent_hooks import spool
from agent_hooks.dispatch import Call, count_error, fail_closed_answer, log_error

if TYPE_CHECKING:
    from agent_hooks.server.app import ServerState

log = logging.getLogger("agent_hooks.server.store")

# How often a store that could not be written is tried again (one open and one small write).
RETRY_S = 1.0
# Tries at replaying the spool once the store is writable, while another replayer holds it.
REPLAY_TRIES = 5


class StoreUnavailable(Exception):
    """The store cannot be written now; the server is retrying it (the caller may try again later)."""

    http_status = 503  # the answer of a request that needed the store (fastpath, app.create_app)


def describe(exc: BaseException) -> str:
    """One line for the log: what SQLite (or the file system) said."""
    name = getattr(exc, "sqlite_errorname", None)
    return f"{type(exc).__name__}: {exc}" + (f" ({name})" if name else "")


def _writable(path: str) -> bool:
    """True when this process may write ``path`` (its modes, capabilities, an immutable flag, a
    read-only mount). Asked, not tried: opening and closing a file SQLite has open would drop
    every POSIX lock this process holds on it (the store's connections would go on unlocked)."""
    return os.access(path, os.W_OK, effective_ids=os.access in os.supports_effective_ids)


def repair_sidecars(path: str) -> list[str]:
    """Give the store's -wal and -shm files the store's own mode when the store is writable and they
    are not (SQLite made them while the store was read-only, with its read-only mode); only files of
    this user. Returns the names repaired."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    if not _writable(path):
        return []
    repaired = []
    for suffix in ("-wal", "-shm"):
        side = path + suffix
        try:
            side_st = os.lstat(side)
        except OSError:
            continue
        if not stat.S_ISREG(side_st.st_mode) or side_st.st_uid != os.geteuid() or _writable(side):
            continue
        try:
            os.chmod(side, (stat.S_IMODE(st.st_mode) & 0o666) | 0o600)
            repaired.append(os.path.basename(side))
        except OSError:
            pass  # immutable, or not ours after all: the next retry finds the store still unwritable
    return repaired


class StoreWatch:
    """Whether the server can write its store, and what it does while it cannot (module docstring)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.lock = threading.Lock()
        self.reason: str | None = None  # why the store cannot be written; None while it can
        self.since = 0.0
        self.since_at: float | None = None  # when it began (wall clock, for /status and doctor); None while it can
        # Moves at each change of state: a connection opened under another generation is reopened
        # (app.ServerState.store), since SQLite keeps a connection read-only once it opened it so.
        self.generation = 0
        self.spooled = 0  # calls spooled in this outage
        self.lost = 0  # calls the spool refused in this outage
        self.spool_problem: str | None = None
        self.replayed_total = 0
        self.outages = 0
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()
        self.stopping = False

    @property
    def down(self) -> bool:
        return self.reason is not None

    def snapshot(self) -> dict[str, Any]:
        """What /status shows of it."""
        with self.lock:
            return {"writable": self.reason is None, "problem": self.reason, "since": self.since_at,
                    "outages": self.outages, "spooled": self.spooled, "lost": self.lost,
                    "replayed": self.replayed_total}

    def unavailable(self) -> StoreUnavailable:
        return StoreUnavailable(f"the store cannot be written ({self.reason}); the server retries it"
                                f" every {RETRY_S:g} s")

    def failed(self, exc: BaseException, where: str) -> StoreUnavailable:
        """A write (or an open) of ``where`` failed because the store cannot be written: the first
        one of an outage is said, and the retries start. Returns the exception to hand on."""
        with self.lock:
            if self.reason is None and not self.stopping:
                self.reason = describe(exc)
                self.since = time.monotonic()
                self.since_at = time.time()
                self.generation += 1
                self.spooled = self.lost = 0
                self.spool_problem = None
                self.outages += 1
                self._say(logging.WARNING, "store",
                          f"store not writable ({where}): {self.reason}; spooling hook calls, and trying the"
                          f" store every {RETRY_S:g} s")
                self.wake.clear()
                self.thread = threading.Thread(target=self._retry, name="agent-hooks-store", daemon=True)
                self.thread.start()
        return self.unavailable()

    def keep(self, call: Call, env: Any, config: dict[str, Any], exc: BaseException | None = None) -> bool:
        """Keep a hook call the store could not take: spooled for replay (the answer says so). When
        the spool refuses it too, the call is answered without a record: said once per outage,
        counted, and named in the answer. Always True: the call is answered with no decision (a deny under strict guards)."""
        if exc is not None:
            self.failed(exc, "a hook call")
        # Strict guards (guards.fail_closed): a PreToolUse kept this way is answered deny, and replayed as such.
        closed = fail_closed_answer(config, call.event, "the store is not writable; the call is kept for later")
        problem = spool.save(self.state.paths, config, call.event, call.data or b"", call.started, env,
                             call_id=call.call_id, answered="deny" if closed else None)
        with self.lock:
            reason = self.reason or (describe(exc) if exc is not None else "unknown")
            if problem is None:
                self.spooled += 1
                self.state.stats.count("spooled")
                call.problem = f"store not writable ({reason}); the call is spooled and replayed once it is"
            else:
                self.lost += 1
                self.state.stats.count("lost")
                call.problem = f"store not writable ({reason}) and the spool refused the call: {problem}"
                if self.spool_problem is None:
                    self.spool_problem = problem
                    self._say(logging.ERROR, "error", f"the spool refuses hook calls too ({problem}): calls are"
                              " answered without a record until the store is writable")
        call.text = closed
        call.done = True
        return True

    def check(self, where: str) -> None:
        """Try one small write now (server start); a store that cannot be written starts an outage.
        Other errors are raised for the caller to report."""
        if self.down:
            return
        try:
            self._probe()
        except Exception as exc:
            if not spool.unwritable(exc):
                raise
            self.failed(exc, where)

    def replay_left(self) -> None:
        """At a worker's start, with the store writable: replay what an earlier worker spooled and did
        not replay (it died during an outage, or in the middle of a replay). Only a replay after an
        outage empties the spool here, and with http hooks alone no executable starts a replayer."""
        if self.down or not spool.has_work(self.state.paths):
            return

        def run() -> None:
            try:
                done = spool.replay(self.state.paths, self.state.config)
            except Exception as exc:  # noqa: BLE001 - what is left stays for the next replayer
                self._say(logging.WARNING, "store", f"replaying the spool at start failed ({describe(exc)})")
                return
            if done and done["taken"]:
                with self.lock:
                    self.replayed_total += done["replayed"]
                failed = f", {done['failed']} could not be" if done["failed"] else ""
                log.info("replayed %d call(s) an earlier worker spooled%s", done["replayed"], failed)

        threading.Thread(target=run, name="agent-hooks-replay", daemon=True).start()

    def stop(self) -> None:
        """At shutdown: end the retries (what is spooled stays for the next replayer)."""
        with self.lock:
            self.stopping = True
            thread = self.thread
        self.wake.set()
        if thread is not None:
            thread.join(5)

    # -- the retry thread ---------------------------------------------------------

    def _retry(self) -> None:
        while not self.wake.wait(RETRY_S):
            try:
                self._probe()
            except Exception:  # noqa: BLE001 - still down: said once already, quiet until it changes
                continue
            break
        with self.lock:
            if self.stopping:
                return
            down_s = time.monotonic() - self.since
            spooled, lost = self.spooled, self.lost
            self.reason = None
            self.since_at = None
            self.generation += 1  # every connection opened during the outage is opened again
        done = None
        trouble = ""
        for _attempt in range(REPLAY_TRIES):
            try:
                done = spool.replay(self.state.paths, self.state.config)
            except Exception as exc:  # noqa: BLE001 - what is left in the spool is replayed by the next replayer
                trouble = f"; replaying the spool failed ({describe(exc)}): the next hook call starts a replayer"
                break
            # None: another replayer holds the spool (a hook's, started while the store could not be
            # written, may be failing right now): try again shortly rather than leave it to chance.
            if done is not None or self.wake.wait(RETRY_S):
                break
        if done is None and not trouble:
            trouble = "; another process is replaying the spool"
        replayed = done["replayed"] if done else 0
        with self.lock:
            self.replayed_total += replayed
        failed = f", {done['failed']} could not be" if done and done["failed"] else ""
        if done and done["retried"]:
            # The store was busy for them: spooled again, for the next replayer (a hook call starts one).
            failed += f", {done['retried']} spooled again (store busy)"
        unrecorded = f", {lost} answered without a record (spool full)" if lost else ""
        message = (f"store writable again after {down_s:.1f} s: {spooled} call(s) spooled{unrecorded};"
                   f" replayed {replayed}{failed}{trouble}")
        self._say(logging.WARNING if trouble or failed or lost else logging.INFO, "store", message)
        # Counted where doctor and status look, now that the store takes it.
        count_error(self.state.paths, self.state.config, "server", "store", message, None)

    def _probe(self) -> None:
        """One try on a new connection: a small write that commits. Raises while the store cannot be written."""
        repair_sidecars(self.state.paths.store)
        store = self.state.open_store()
        try:
            with store.write() as conn:
                conn.execute("INSERT INTO meta (key, value) VALUES ('server.store_written_at', ?)"
                             " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(time.time()),))
        finally:
            # Closed here rather than by app.close_quietly: app.py imports this module.
            try:
                store.close()
            except Exception:  # noqa: BLE001 - a connection to a file that is gone
                pass

    def _say(self, level: int, kind: str, message: str) -> None:
        log.log(level, "%s", message)
        log_error(self.state.paths, "server", kind, message, config=self.state.config)
