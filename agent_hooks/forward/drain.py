"""The drainer: delivers the outbox to the ingest server (httpx + filelock).

One drainer per store (a filelock, held for its whole life). Rules:

* order per session: only the oldest queued event of a session is ever in
  flight; while it waits for a retry, that session's later events wait too,
  other sessions go on;
* an unreachable server (connection refused, timeout, any transport error) is
  not the event's fault: nothing is counted, the drainer backs off and tries
  again, so an outage of any length loses nothing. After
  ``give_up_after_s`` of outage it exits and leaves the events queued; the
  next hook call after the backoff starts a new drainer;
* a failing answer (5xx, 408, 429) counts one attempt and retries with
  backoff (``Retry-After`` honoured, capped); after ``max_attempts`` the event
  goes to the dead letter;
* any other non-2xx answer is permanent: dead letter at once;
* a dead letter does not block its session: the next event goes out (the
  server's state machine ignores a transition it cannot make, and holding a
  live session's events behind one the server refuses would freeze its board
  entry for good). ``agent-hook queue retry`` sends dead letters again;
* every request carries the event's stable id as ``Idempotency-Key``; a row is
  deleted only after a 2xx, so a crash (even SIGKILL) between answer and delete
  resends the same id: at-least-once delivery;
* several command centers (``forward.url`` a list, agent_hooks.forward.centers):
  events go to the host's current one. A pass that the current center did not
  answer (unreachable, or nothing but 5xx) counts one failed try; at
  ``forward.failover_after`` the host moves on to the next center, and every
  queued event is due there at once, with the same ``Idempotency-Key`` (a
  center that took it already answers it as a duplicate). An outage is over
  when any center answers; ``give_up_after_s`` counts until then. Once a
  host has moved, a session's first event in a drainer's life is preceded by
  its registration (``POST /api/hooks/sessions``, the contract's "returns the
  existing session"): a center with another store has never seen the
  session's start, and would refuse its later events (404, final);
* exit protocol: when the queue has been empty for ``idle_exit_s`` the drainer
  releases the lock, then looks once more inside a write transaction. A hook
  probes the lock inside its own write transaction, after its insert: if it
  probed before the release, the last look waits for its commit and sees the
  row; if after, the hook found the lock free and started a new drainer.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from filelock import FileLock, Timeout

from agent_hooks import __version__, fleet
from agent_hooks.config import load_lenient
from agent_hooks.forward import centers
from agent_hooks.forward.outbox import lock_path, resume_path, starting_path
from agent_hooks.forward.urls import url_problem
from agent_hooks.log import log_error
from agent_hooks.paths import Paths, ensure_dir
from agent_hooks.store import Store

OK, TRANSIENT, PERMANENT, UNREACHABLE = "ok", "transient", "permanent", "unreachable"
TRANSIENT_STATUSES = frozenset({408, 429})
BATCH = 200
PID_NAME = "drain.pid"
# `agent-hook queue drain` touches this file to wake a running drainer (a file, not a
# signal: a stale pid must never get a signal meant for us).
WAKE_NAME = "drain.wake"
# While backing off, the drainer looks this often for a wake-up or a server that is back.
NAP_SLICE_S = 0.1


class SendFailed(Exception):
    """A request could not even be made (neither an answer nor a transport error): no retry will help."""


def wake_path(paths: Paths) -> str:
    return os.path.join(paths.lock_dir, WAKE_NAME)


def wake(paths: Paths) -> None:
    """Ask a running drainer to retry everything now (it notices within NAP_SLICE_S)."""
    ensure_dir(paths.lock_dir)
    with open(wake_path(paths), "a", encoding="ascii"):
        pass
    os.utime(wake_path(paths))


def _wake_stamp(paths: Paths) -> int:
    try:
        return os.stat(wake_path(paths)).st_mtime_ns
    except OSError:
        return 0


def server_answers(url: str, timeout: float = 0.2) -> bool:
    """A cheap probe: does the server's port accept a TCP connection? (no request is sent)"""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def classify(status: int) -> str:
    if 200 <= status < 300:
        return OK
    if status >= 500 or status in TRANSIENT_STATUSES:
        return TRANSIENT
    return PERMANENT


def backoff(attempt: int, initial: float, cap: float) -> float:
    """initial * 2^(attempt-1), capped (attempt counts from 1)."""
    return min(cap, initial * (2 ** max(0, attempt - 1)))


def retry_after(response: httpx.Response, cap: float) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, min(cap, float(value)))
    except ValueError:
        return None


def make_client(config: dict[str, Any], transport: httpx.BaseTransport | None = None,
                headers: dict[str, str] | None = None) -> httpx.Client:
    timeout = float(config["forward"]["timeout_s"])
    if transport is None:
        # Small requests on a kept-alive connection: Nagle + delayed ACK would add 40 ms each.
        transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    return httpx.Client(
        timeout=httpx.Timeout(timeout, connect=min(timeout, 2.0)),
        # Proxy variables must not reroute a loopback delivery.
        trust_env=False,
        transport=transport,
        headers={"Content-Type": "application/json", "User-Agent": f"agent-hooks/{__version__}", **(headers or {})},
    )


def send(client: httpx.Client, url: str, event_id: str, body: str) -> tuple[str, int | None, str | None, float | None]:
    """POST one event: (kind, status, error text, retry-after seconds)."""
    try:
        response = client.post(url, content=body.encode("utf-8"), headers={"Idempotency-Key": event_id})
    except httpx.TransportError as exc:
        return UNREACHABLE, None, f"{type(exc).__name__}: {exc}", None
    kind = classify(response.status_code)
    error = None if kind == OK else f"HTTP {response.status_code}: {response.text[:300]}"
    return kind, response.status_code, error, retry_after(response, 3600.0)


class Drainer:
    """Delivers the store's outbox; see the module docstring for the rules."""

    def __init__(self, paths: Paths, config: dict[str, Any], client: httpx.Client | None = None,
                 sleep: Callable[[float], None] = time.sleep, idle_exit_s: float | None = None,
                 echo: Callable[[str], None] | None = None) -> None:
        self.paths = paths
        self.config = config
        self.fwd = config["forward"]
        self.client = client
        self.sleep = sleep
        self.idle_exit_s = float(self.fwd["idle_exit_s"] if idle_exit_s is None else idle_exit_s)
        self.echo = echo
        self.delivered = 0
        self.dead = 0
        self.store: Store | None = None
        self.lock: FileLock | None = None
        self._woken_at = _wake_stamp(paths)
        self._credential_stamp = fleet.credential_stamp(paths)
        self.urls: list[str] = []
        self.url = ""
        self.counter = centers.Counter(centers.settings(self.fwd)[0])
        # Answers of the last pass: any that is not a failure (2xx, 4xx) shows the center answers.
        self._answered_ok = 0
        self.switches = 0
        # Sessions known to the current center (registered, or an event taken) since this drainer came to
        # it, and whether the host ever moved (else every center had every session's start).
        self._known: set[str] = set()
        self._moved = False

    def _use(self, url: str) -> None:
        """Send to ``url`` from now on, with this host's headers for that center."""
        if url != self.url:
            self._known = set()
            if self.client is not None:
                self.client.headers.pop("Authorization", None)
                self.client.headers.update(fleet.client_headers(self.paths, self.config, url=url))
        self.url = url

    def _register(self, url: str, body: str) -> bool:
        """Make sure the center at ``url`` knows the session of an event (``POST /api/hooks/sessions``,
        which returns the existing session when it knows it): after a move, a center that never saw the
        session's start would refuse its later events. True when the center now knows it; a failure
        here is left to the event's own send."""
        base = fleet.center_base(url)
        try:
            doc = json.loads(body)
        except ValueError:
            return False
        if base is None or not isinstance(doc, dict) or doc.get("event") == "start":
            return False  # a start registers its session itself
        reg = {k: doc[k] for k in ("session_id", "tmux_session", "agent_type") if doc.get(k)}
        try:
            r = self.client.post(base + "/api/hooks/sessions", content=json.dumps(reg).encode())  # type: ignore[union-attr]
        except httpx.HTTPError:
            return False
        return r.status_code in (200, 201)

    def _current(self) -> str:
        """The host's current center (the store's row, shared with the server), after a failback that
        is due (forward.failback_after_s); a move made by another process is followed here."""
        choice = centers.read(self.conn, self.urls)
        self._moved = self._moved or choice.switches > 0
        if centers.failback_due(choice, centers.settings(self.fwd)[1], time.time()):
            with self.store.write() as conn:  # type: ignore[union-attr]
                choice = centers.move(conn, self.urls, choice.url, "back to the first command center"
                                      " (forward.failback_after_s)", time.time(), to=0)
        if self.url and choice.url != self.url:
            self._say(f"now sending to {choice.url} (the host moved on from {self.url})")
            self.counter.reset()
            self._due_now()
        self._use(choice.url)
        return choice.url

    def _failed_try(self, url: str, why: str) -> bool:
        """One pass the current center did not answer; True when the host moved on to the next one."""
        if len(self.urls) < 2 or not self.counter.failed(centers.DRAIN, url):
            return False
        with self.store.write() as conn:  # type: ignore[union-attr]
            choice = centers.move(conn, self.urls, url, f"events: {why}", time.time())
        self.counter.reset()
        if choice.url == url:
            return False
        self.switches += 1
        self._moved = True
        log_error(self.paths, "forward", "failover", f"{url} does not answer ({why}); moved on to {choice.url}")
        self._say(f"{url} does not answer ({why}); sending to {choice.url} from now on")
        self._due_now()  # everything queued goes to the new center at once, with its own Idempotency-Key
        self._use(choice.url)
        return True

    def _follow_credential(self, url: str) -> None:
        """A host paired (``agent-hook fleet join``) while this drainer runs sends its new credential from
        the next pass on, not from the next drainer (one stat per pass)."""
        stamp = fleet.credential_stamp(self.paths)
        if stamp == self._credential_stamp or self.client is None:
            return
        self._credential_stamp = stamp
        self.client.headers.pop("Authorization", None)
        self.client.headers.update(fleet.client_headers(self.paths, self.config, url=url))

    # -- store ---------------------------------------------------------------

    @property
    def conn(self) -> sqlite3.Connection:
        assert self.store is not None
        return self.store.conn

    def _meta(self, **values: Any) -> None:
        with self.store.write() as conn:  # type: ignore[union-attr]
            conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [(f"forward.{k}", None if v is None else str(v)) for k, v in values.items()],
            )

    def _due(self, now: float) -> list[tuple[int, str, str, str, int]]:
        return self.conn.execute(
            """
            SELECT id, event_id, session_key, body, attempts FROM outbox
            WHERE state = 'queued' AND session_key NOT IN
                (SELECT session_key FROM outbox WHERE state = 'queued' AND next_at > ?)
            ORDER BY id LIMIT ?
            """,
            (now, BATCH),
        ).fetchall()

    def _next_wake(self) -> float | None:
        """The earliest next_at of a queued event, or None when nothing is queued."""
        row = self.conn.execute("SELECT count(*), min(next_at) FROM outbox WHERE state = 'queued'").fetchone()
        return None if not row[0] else float(row[1] or 0)

    def _last_look(self) -> float | None:
        """:meth:`_next_wake` in a write transaction: it waits for a hook that is
        between its enqueue and its commit (it probed our lock while we held it)."""
        with self.store.write():  # type: ignore[union-attr]
            return self._next_wake()

    # -- lock ----------------------------------------------------------------

    def _acquire(self) -> bool:
        ensure_dir(self.paths.lock_dir)
        if self.lock is None:
            try:
                self.lock = FileLock(lock_path(self.paths), timeout=0, preserve_lock_file=True)
            except TypeError:  # filelock < 3.17 has no such argument and never unlinks
                self.lock = FileLock(lock_path(self.paths), timeout=0)
        try:
            self.lock.acquire(timeout=0)
        except Timeout:
            self._started()  # the holder is alive: no drainer is "starting" any more
            return False
        self._started()
        try:
            with open(os.path.join(self.paths.lock_dir, PID_NAME), "w", encoding="ascii") as f:
                f.write(str(os.getpid()))
        except OSError:
            pass
        return True

    def _started(self) -> None:
        try:
            os.unlink(starting_path(self.paths))
        except OSError:
            pass

    def _release(self) -> None:
        if self.lock is not None and self.lock.is_locked:
            self.lock.release(force=True)

    def _pause_hooks(self, seconds: float) -> None:
        """Ask hooks not to start a drainer for a while (we gave up for now)."""
        try:
            tmp = resume_path(self.paths) + f".{os.getpid()}"
            with open(tmp, "w", encoding="ascii") as f:
                f.write(f"{time.time() + seconds:.3f}")
            os.replace(tmp, resume_path(self.paths))
        except OSError:
            pass

    def _clear_pause(self) -> None:
        try:
            os.unlink(resume_path(self.paths))
        except OSError:
            pass

    # -- delivery ------------------------------------------------------------

    def _say(self, text: str) -> None:
        if self.echo is not None:
            self.echo(text)

    def _problem(self, message: str) -> None:
        log_error(self.paths, "forward", "forward", message)
        self._say(message)
        try:
            self._meta(problem=message, problem_at=time.time())
        except sqlite3.Error:
            pass

    def _settle(self, row: tuple[int, str, str, str, int], kind: str, status: int | None,
                error: str | None, hint: float | None, now: float) -> bool:
        """Record one answer; True when the session may go on in this pass."""
        rid, event_id, key, _body, attempts = row
        fwd = self.fwd
        # By id and event id: a row purged meanwhile (queue purge) may have its id reused by a new event.
        with self.store.write() as conn:  # type: ignore[union-attr]
            if kind == OK:
                conn.execute("DELETE FROM outbox WHERE id = ? AND event_id = ?", (rid, event_id))
                self.delivered += 1
                return True
            if kind == PERMANENT or attempts + 1 >= int(fwd["max_attempts"]):
                conn.execute(
                    "UPDATE outbox SET state = 'dead', attempts = attempts + 1, last_status = ?, last_error = ?,"
                    " last_try_at = ?, dead_at = ? WHERE id = ? AND event_id = ?",
                    (status, error, now, now, rid, event_id),
                )
                self.dead += 1
                log_error(self.paths, "forward", "dead_letter", f"event {event_id} of {key}: {error}")
                self._say(f"dead letter {event_id} ({key}): {error}")
                return True
            delay = backoff(attempts + 1, float(fwd["backoff_initial_s"]), float(fwd["backoff_max_s"]))
            if hint is not None:
                delay = min(max(delay, hint), float(fwd["backoff_max_s"]))
            conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_at = ?, last_status = ?, last_error = ?,"
                " last_try_at = ? WHERE id = ? AND event_id = ?",
                (now + delay, status, error, now, rid, event_id),
            )
            return False

    def _pass(self, url: str) -> tuple[int, str | None]:
        """One pass over the due events: (events answered, transport error if the server is unreachable).

        Sessions go out side by side (``forward.concurrency`` threads, HTTP only);
        within a session one event at a time, in order. Answers are recorded here,
        in this thread, as they arrive.
        """
        groups: dict[str, list[tuple[int, str, str, str, int]]] = {}
        for row in self._due(time.time()):
            groups.setdefault(row[2], []).append(row)
        if not groups:
            return 0, None
        max_attempts = int(self.fwd["max_attempts"])
        results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        stop = threading.Event()

        def session_worker(rows: list[tuple[int, str, str, str, int]]) -> None:
            try:
                if self._moved and rows and rows[0][2] not in self._known:
                    self._register(url, rows[0][3])
                for row in rows:
                    if stop.is_set():
                        break
                    answer = send(self.client, url, row[1], row[3])  # type: ignore[arg-type]
                    if answer[1] == 404 and row[2] not in self._known and self._register(url, row[3]):
                        # The center never saw this session's start (not forwarded: a session outside tmux
                        # whose start came before forwarding was on, or a start that went to another
                        # center): registered now, the event goes again rather than dying on a 404.
                        answer = send(self.client, url, row[1], row[3])  # type: ignore[arg-type]
                    results.put((row, answer))
                    kind = answer[0]
                    if kind == OK:
                        self._known.add(row[2])
                    if kind == UNREACHABLE:
                        stop.set()
                        break
                    if kind == TRANSIENT and row[4] + 1 < max_attempts:
                        break  # this session waits for its retry; later events stay behind it
            except Exception as exc:  # noqa: BLE001 - a pool swallows it: the drainer would retry for ever
                stop.set()
                results.put(SendFailed(f"{type(exc).__name__}: {exc}"))
            finally:
                results.put(None)

        workers = max(1, min(int(self.fwd["concurrency"]), len(groups)))
        answered = 0
        outage: str | None = None
        failure: SendFailed | None = None
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for rows in groups.values():
                pool.submit(session_worker, rows)
            pending = len(groups)
            while pending:
                item = results.get()
                if item is None:
                    pending -= 1
                    continue
                if isinstance(item, SendFailed):
                    failure = failure or item
                    continue
                row, (kind, status, error, hint) = item
                if kind == UNREACHABLE:
                    outage = outage or error
                    continue
                answered += 1
                if not centers.failure(status):
                    self._answered_ok += 1
                self._settle(row, kind, status, error, hint, time.time())
        if failure is not None:
            raise failure
        return answered, outage

    def _replay_spool(self) -> bool:
        """Apply calls hooks spooled when they had to answer first (agent_hooks.spool)."""
        from agent_hooks import spool

        if not spool.has_work(self.paths):
            return False
        try:
            done = spool.replay(self.paths, self.config)
        except Exception as exc:  # noqa: BLE001 - the spool stays for the next replayer
            log_error(self.paths, "spool", "error", f"replay from the drainer: {type(exc).__name__}: {exc}")
            return False
        if done and done["replayed"]:
            self._say(f"replayed {done['replayed']} spooled calls")
        return bool(done and done["taken"])

    def _nap(self, seconds: float, probe_url: str | None = None) -> str | None:
        """Sleep up to ``seconds``; return early with "woken" (`queue drain` asked) or "back"
        (the server accepts connections again while we back off from an outage)."""
        if self.sleep is not time.sleep:  # tests drive time themselves
            self.sleep(seconds)
            return None
        end = time.monotonic() + seconds
        every = float(self.fwd.get("probe_interval_s", 0.5))
        if every <= 0:
            probe_url = None
        next_probe = time.monotonic() + every
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(NAP_SLICE_S, left))
            stamp = _wake_stamp(self.paths)
            if stamp != self._woken_at:
                self._woken_at = stamp
                self._due_now()
                return "woken"
            if probe_url is not None and time.monotonic() >= next_probe:
                next_probe = time.monotonic() + every
                if server_answers(probe_url):
                    return "back"

    def _due_now(self) -> None:
        """Asked to deliver now: events waiting for a retry are due at once."""
        try:
            with self.store.write() as conn:  # type: ignore[union-attr]
                conn.execute("UPDATE outbox SET next_at = 0 WHERE state = 'queued' AND next_at > 0")
        except sqlite3.Error:
            pass

    def _prune_sessions(self) -> None:
        ttl = float(self.fwd["session_ttl_s"])
        with self.store.write() as conn:  # type: ignore[union-attr]
            conn.execute("DELETE FROM forward_sessions WHERE last_at < ?", (time.time() - ttl,))

    def run(self) -> int:
        """Drain until the queue stays empty; returns 0 (also when another drainer is alive)."""
        if not self.run_if_free():
            self._say("another drainer is running")
        return 0

    def run_if_free(self) -> bool:
        """:meth:`run` when no other drainer holds the lock; False (nothing done) when one does."""
        if not self._acquire():
            return False
        try:
            self._run()
            return True
        finally:
            self._release()
            if self.store is not None:
                self.store.close()
            if self.client is not None:
                self.client.close()

    def _run(self) -> int:
        fwd = self.fwd
        if not os.path.exists(self.paths.store):
            return 0
        self.store = Store(self.paths.store, int(self.config["runtime"]["busy_timeout_ms"]))
        self._replay_spool()
        self.urls = centers.ingest_urls(fwd)
        if not fwd["enabled"]:
            self._say("forwarding is disabled (forward.enabled = false); events stay queued")
            return 0
        if not self.urls:
            self._say("no command center is named (forward.url is empty); events stay queued")
            return 0
        for listed in self.urls:
            problem = url_problem(listed, bool(fwd["allow_remote"]))
            if problem:
                self._problem(problem)
                self._pause_hooks(float(fwd["give_up_after_s"]))
                return 0
        url = self._current()
        if self.client is None:
            # This host's credential for that command center, else the fleet token (agent_hooks.fleet):
            # the center keeps each session with the host the credential names.
            self.client = make_client(self.config, headers=fleet.client_headers(self.paths, self.config, url=url))
            self._credential_stamp = fleet.credential_stamp(self.paths)
        self._clear_pause()
        self._prune_sessions()
        poll = max(0.005, float(fwd["poll_interval_s"]))
        outage_since: float | None = None
        outage_tries = 0
        moves = 0  # moves to another center since one last answered
        idle_since: float | None = None
        while True:
            if not os.path.exists(self.paths.store):
                return 0  # the store went away (a test's temp dir): nothing left to deliver
            delivered = self.delivered
            url = self._current()
            self._follow_credential(url)
            self._answered_ok = 0
            try:
                answered, outage = self._pass(url)
            except SendFailed as exc:
                # Not the server's answer and not an outage: every send fails the same way (a URL
                # httpx refuses, a header it cannot encode). Say so and stop; the events stay queued.
                self._problem(f"cannot send to {url}: {exc}; events stay queued")
                self._pause_hooks(float(fwd["give_up_after_s"]))
                return 0
            now = time.time()
            if answered and self._answered_ok:
                self.counter.answered(centers.DRAIN, url)
                moves = 0
            elif outage is not None or answered:  # no answer, or nothing but 5xx: one failed try
                if self._failed_try(url, outage or "HTTP 5xx"):
                    moves += 1
                    if moves < len(self.urls):
                        outage_tries = 0
                        continue  # the next center now, without a backoff
                    # Round the whole list without an answer: back off as from one center, and give up
                    # after give_up_after_s as ever (never a tight loop over centers that are all down).
            if outage is not None:
                give_up = float(fwd["give_up_after_s"])
                if outage_since is None:
                    outage_since = now
                    log_error(self.paths, "forward", "unreachable", f"{url}: {outage}")
                    self._meta(last_error=outage, last_error_at=now)
                    self._say(f"server unreachable: {outage}")
                    self._say(f"waiting for the ingest server at {url} to answer: retrying for up to "
                              f"{give_up:g} s (forward.give_up_after_s); Ctrl-C stops, events stay queued")
                outage_tries += 1
                delay = backoff(outage_tries, float(fwd["backoff_initial_s"]), float(fwd["backoff_max_s"]))
                if now - outage_since + delay > give_up:
                    self._say("server still unreachable; giving up for now, events stay queued")
                    self._pause_hooks(delay)
                    return 0
                if outage_tries > 1:
                    self._say(f"still unreachable after {now - outage_since:.0f} s; next try in {delay:g} s "
                              f"(giving up in {give_up - (now - outage_since):.0f} s)")
                if self._nap(delay, probe_url=url) is not None:
                    outage_tries = 0  # woken, or the server is back: retry now, backoff from the start
                continue
            if answered:
                if outage_since is not None:
                    outage_since, outage_tries = None, 0
                if self.delivered > delivered:
                    self._meta(last_ok_at=now)
                idle_since = None
                continue
            wake = self._next_wake()
            if wake is not None:
                idle_since = None
                self._nap(min(poll, max(0.0, wake - now)) or poll)
                continue
            if idle_since is None:
                idle_since = now
                if self._replay_spool():
                    continue  # replayed calls may have queued events
            if now - idle_since >= self.idle_exit_s:
                # Exit protocol (module docstring): release, then look once more.
                self._release()
                if self._last_look() is None or not self._acquire():
                    return 0
                idle_since = None
                continue
            self.sleep(poll)


def main(argv: list[str] | None = None) -> int:
    """``python -m agent_hooks.forward.drain``: what a hook starts, detached."""
    os.umask(0o077)
    paths = Paths(os.environ)
    # What the hooks that queued the events run on: a bad value costs that value (its default is
    # used; the hooks say so and doctor lists it), never the delivery of everything queued.
    config, _problems = load_lenient(paths, os.environ)
    try:
        return Drainer(paths, config).run()
    except Exception as exc:  # noqa: BLE001 - a detached process has nobody to tell but the log
        import traceback

        log_error(paths, "forward", "error", f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
        return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
