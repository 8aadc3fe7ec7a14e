"""The resident server's notifier: requests and session moments into the outbox, and the outbox sent.

Two halves (docs/notifications.md):

* **What to tell** runs on the command center's writer thread (agent_hooks.center.hub), where the
  pending requests and the cards are already read: :meth:`Notifier.requests` gives every pending
  request one outbox row per channel that wants it, and stops the rows of requests that are no
  longer pending (answered anywhere: the board, the terminal, the CLI, another host);
  :meth:`Notifier.cards` notices a card that turned failed, stalled, over budget or finished.
* **Sending** runs on a thread of its own (:meth:`Notifier.run`): due rows are sent through Apprise
  or Web Push (agent_hooks.notify.send), with backoff on failure and ``renotify_s`` while a request
  waits. Before each send the request is read again: nothing is sent once it was answered.

Where in a fleet: a request is told from the store it is in. A host tells its own requests when its
channels (or its subscribed devices) want them, and says so in its report; its command center then
leaves that request to it, and tells the others (a host without channels, an older host, OpenClaw
agents), so that one request is told once, from where the person's channels are configured.

Routes (Web Push, for the board's "Notify me"): ``GET /api/push/key``, ``POST`` and ``DELETE``
``/api/push/subscriptions``, for the owner on loopback or a paired device (server/access.py).
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import sqlite3
import threading
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_hooks.center import fleetstore
from agent_hooks.notify import outbox, push, rules, text
from agent_hooks.notify.text import Message

log = logging.getLogger("agent_hooks.notify")
SEND_THREADS = 4
IDLE_WAKE_S = 5.0


def backoff(attempt: int, initial: float, cap: float) -> float:
    """initial * 2^(attempt-1), capped (attempt counts from 1): the forwarder's rule (forward/drain.py)."""
    return min(cap, initial * (2 ** max(0, attempt - 1)))


def card_kinds(card: dict[str, Any]) -> frozenset[str]:
    """The moments a card is in that a person may be told about (failed, stalled, budget, finished)."""
    out = set()
    if card.get("state") == "failed" or card.get("waiting_on") == "error":
        out.add(rules.FAILED)
    if (card.get("badges") or {}).get("stalled"):
        out.add(rules.STALLED)
    pct = (card.get("cost") or {}).get("budget_pct")
    if isinstance(pct, (int, float)) and pct >= 100:
        out.add(rules.BUDGET)
    if card.get("own_state") == "ended" or (card.get("own_state") is None and card.get("state") == "completed"):
        out.add(rules.FINISHED)
    return frozenset(out)


def who(conn: sqlite3.Connection, host: str, session_id: str) -> tuple[str | None, str | None]:
    """(agent, task) of the session a request came from: this host's sessions table, else what its host reported."""
    if not host:
        row = conn.execute("SELECT agent, task_id FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        return (row[0], row[1]) if row else (None, None)
    row = conn.execute("SELECT details, task_id, agent_type FROM fleet_sessions WHERE host = ? AND session_id = ?"
                       " ORDER BY updated_at DESC LIMIT 1", (host, session_id)).fetchone()
    if row is None:
        return None, None
    try:
        details = json.loads(row[0]) if row[0] else {}
    except ValueError:
        details = {}
    details = details if isinstance(details, dict) else {}
    agent = details.get("agent") if isinstance(details.get("agent"), str) else row[2]
    task = details.get("task_id") if isinstance(details.get("task_id"), str) else row[1]
    return agent, task


_PENDING_SQL = ("SELECT id, host, session_id, kind, tool_name, tool_input, questions, gate, notified_by_host"
                " FROM approvals WHERE state = 'pending' AND (expires_at IS NULL OR expires_at > ?)")


def request_row(conn: sqlite3.Connection, approval_id: str, now: float) -> tuple[dict[str, Any] | None, bool]:
    """(the request's row, whether it still waits for an answer)."""
    row = conn.execute("SELECT state, expires_at FROM approvals WHERE id = ?", (approval_id,)).fetchone()
    if row is None:
        return None, False
    return {"state": row[0], "expires_at": row[1]}, row[0] == "pending" and (row[1] is None or row[1] > now)


def local_covers(conn: sqlite3.Connection, config: dict[str, Any], own_host: str, session_id: str) -> bool:
    """True when this host tells its person about a request of that session itself (its channels, or a
    subscribed device): what its report says, so that its command center does not tell it again."""
    agent, task = who(conn, "", session_id)
    if rules.covers(config, rules.REQUEST, own_host, agent, task):
        return True
    return rules.REQUEST in rules.push_kinds(config) and _subscribed(conn)


def _subscribed(conn: sqlite3.Connection) -> bool:
    """Whether any device subscribed to this host's Web Push."""
    try:
        return conn.execute("SELECT 1 FROM push_subscriptions LIMIT 1").fetchone() is not None
    except sqlite3.OperationalError:  # a store without the table
        return False


SESSION_KINDS = (rules.FAILED, rules.STALLED, rules.BUDGET, rules.FINISHED)


def told_here(conn: sqlite3.Connection, config: dict[str, Any], own_host: str,
              sessions: list[tuple[str | None, str | None]]) -> list[list[str]]:
    """For each (agent, task) of this host's reported cards, the session moments (failed, stalled, budget,
    finished) this host tells its person about itself: its card's report says so (``notified_by_host``), so
    that its command center does not tell them again."""
    pushed = [k for k in SESSION_KINDS if k in rules.push_kinds(config)]
    if pushed and not _subscribed(conn):
        pushed = []
    return [[k for k in SESSION_KINDS if k in pushed or rules.covers(config, k, own_host, agent, task)]
            for agent, task in sessions]


def report_rows(conn: sqlite3.Connection, now: float, config: dict[str, Any], own_host: str) -> list[dict[str, Any]]:
    """relay.host_rows with what the command center needs to tell each request once: whether this host
    tells it itself (``notified_by_host``), and how its delivery went (``notify_state``, JSON)."""
    from agent_hooks.center import relay

    rows = relay.host_rows(conn, now)
    if not rows:
        return rows
    delivery = outbox.for_subjects(conn, [r["id"] for r in rows])
    covered: dict[str, bool] = {}
    for row in rows:
        sid = row["session_id"]
        if sid not in covered:
            covered[sid] = local_covers(conn, config, own_host, sid)
        row["notified_by_host"] = 1 if covered[sid] else 0
        found = delivery.get(row["id"])
        row["notify_state"] = json.dumps([{k: d[k] for k in ("channel", "state", "at", "error", "sends")}
                                          for d in found]) if found else None
    return rows


class Notifier:
    """See the module docstring. Made at startup; the hub calls :meth:`requests` and :meth:`cards`."""

    def __init__(self, state: Any, own_host: str) -> None:
        self.state = state
        self.own_host = own_host
        self.wake = threading.Event()
        self.stopping = False
        self.thread: threading.Thread | None = None
        self._config_seen: Any = None
        self.channels: list[rules.Channel] = []
        self.by_key: dict[str, rules.Channel] = {}
        self.problems: list[str] = []
        self._done: set[tuple[str, str]] = set()  # (subject, channel) with a row
        self._who: dict[str, tuple[str | None, str | None]] = {}
        self._subs: list[dict[str, Any]] | None = None  # push subscriptions (reloaded when they change)
        self._card_kinds: dict[str, frozenset[str]] | None = None  # None until the first full build (baseline)
        self._vapid: Any = None
        self.last_error: str | None = None
        self.sent = 0
        self.failed = 0

    # -- configuration ---------------------------------------------------------------------

    @property
    def config(self) -> dict[str, Any]:
        config = self.state.config
        if config is not self._config_seen:  # the file changed: the channels again
            self._config_seen = config
            self.channels, self.problems = rules.channels(config)
            self.by_key = {c.key: c for c in self.channels}
        return config

    def subscriptions_changed(self) -> None:
        self._subs = None

    def _subscriptions(self, conn: sqlite3.Connection) -> list[dict[str, Any]]:
        if self._subs is None:
            self._subs = push.subscriptions(conn)
        return self._subs

    def _targets(self, conn: sqlite3.Connection, kind: str, host: str | None, agent: str | None,
                 task: str | None) -> list[tuple[str, str]]:
        config = self.config
        out = [(c.key, c.name) for c in self.channels if c.wants(kind, host, agent, task)]
        if kind in rules.push_kinds(config):
            out += [(s["channel"], push.channel_name(s)) for s in self._subscriptions(conn)]
        return out

    @property
    def idle(self) -> bool:
        """Nobody to tell: no channel and no subscribed device."""
        _ = self.config
        return not self.channels and not self._subs and self._subs is not None

    # -- what to tell (the hub's writer thread) ---------------------------------------------

    def requests(self, store: Any, now: float) -> None:
        """Every pending request its rows; the rows of requests answered anywhere, stopped."""
        conn = store.conn
        self._subscriptions(conn)
        board = rules.board_url(self.config)
        cur = conn.execute(_PENDING_SQL, (now,))
        cols = [d[0] for d in cur.description]
        pending = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
        ids = {r["id"] for r in pending}
        todo: list[tuple[str, str, str, Message]] = []
        for row in pending:
            if row["host"] and row["notified_by_host"]:
                continue  # its host tells its person itself (its report says so)
            if row["id"] not in self._who:
                self._who[row["id"]] = who(conn, row["host"], row["session_id"])
            agent, task = self._who[row["id"]]
            host = row["host"] or self.own_host
            for key, name in self._targets(conn, rules.REQUEST, host, agent, task):
                if (row["id"], key) in self._done:
                    continue
                from agent_hooks.features import approvals

                shown = {**row, "tool_input": approvals._loads(row["tool_input"]),
                         "questions": approvals._loads(row["questions"])}
                todo.append((row["id"], key, name, text.request(shown, host, agent, task, board)))
        self._who = {k: v for k, v in self._who.items() if k in ids}
        stale = conn.execute("SELECT count(*) FROM notify_outbox WHERE kind = 'request' AND next_at IS NOT NULL"
                             + (f" AND subject NOT IN ({','.join('?' * len(ids))})" if ids else ""),
                             list(ids)).fetchone()[0]
        if todo:
            have = outbox.known(conn, sorted({t[0] for t in todo}))
            self._done |= have
            todo = [t for t in todo if (t[0], t[1]) not in have]
        if not todo and not stale:
            self._done = {d for d in self._done if d[0] in ids}
            return
        with store.write() as wconn:
            for subject, key, name, msg in todo:
                outbox.enqueue(wconn, subject, rules.REQUEST, key, name, msg, now)
            if stale:
                outbox.stop_settled_requests(wconn, ids, now)
        self._done = {d for d in self._done if d[0] in ids} | {(t[0], t[1]) for t in todo}
        if todo:
            self.wake.set()

    def cost_alerts(self, store: Any, now: float) -> None:
        """The fleet's cost alerts the ledger recorded (center/ledger.py: a fleet-wide budget reached or
        near, a forecast past its limit) into the outbox as ``budget``; ``notified_at`` once queued."""
        conn = store.conn
        try:
            rows = conn.execute("SELECT id, kind, subject, message FROM fleet_cost_alerts WHERE notified_at IS NULL"
                                " ORDER BY id LIMIT 50").fetchall()
        except sqlite3.OperationalError:  # a store without the ledger's tables
            return
        todo = []
        for aid, kind, subject, message in rows:
            agent = subject[len("agent:"):] if subject.startswith("agent:") else None
            task = subject[len("task:"):] if subject.startswith("task:") else None
            targets = self._targets(conn, rules.BUDGET, None, agent, task)
            if targets:  # none yet: kept for a channel added later
                todo.append((aid, text.cost_alert(kind, str(message), rules.board_url(self.config)), targets))
        if not todo:
            return
        with store.write() as wconn:
            for aid, msg, targets in todo:
                for key, name in targets:
                    outbox.enqueue(wconn, f"cost:{aid}", rules.BUDGET, key, name, msg, now)
                wconn.execute("UPDATE fleet_cost_alerts SET notified_at = ? WHERE id = ?", (now, aid))
        self.wake.set()

    def cards(self, store: Any, built: dict[str, dict[str, Any]], partial: bool, now: float) -> None:
        """A card that turned failed, stalled, over budget or finished since the last look: its rows.
        The first full build after the server starts is where things stand (nothing is told of it)."""
        kinds = {cid: card_kinds(card) for cid, card in built.items()}
        if self._card_kinds is None:
            if not partial:
                self._card_kinds = kinds
            return
        todo: list[tuple[str, str, str, str, Message]] = []
        board = rules.board_url(self.config)
        for cid, now_kinds in kinds.items():
            card = built[cid]
            for kind in sorted(now_kinds - self._card_kinds.get(cid, frozenset())):
                told_there = card.get("notified_by_host")
                if not card.get("local") and isinstance(told_there, list) and kind in told_there:
                    continue
                targets = self._targets(store.conn, kind, card.get("host") or self.own_host, card.get("agent"),
                                        card.get("task_id"))
                # The moment is named by the card's data, not by when this process saw it: several command
                # centers on one PostgreSQL all see it, and the shared outbox keeps one row per name.
                moment = card.get("last_activity")
                subject = f"{kind}:{cid}:{moment if isinstance(moment, (int, float)) else now:.3f}"
                todo += [(subject, kind, key, name, text.session(kind, card, board)) for key, name in targets]
            self._card_kinds[cid] = now_kinds
        if not partial:
            self._card_kinds = {cid: k for cid, k in self._card_kinds.items() if cid in kinds}
        if todo:
            with store.write() as wconn:
                for subject, kind, key, name, msg in todo:
                    outbox.enqueue(wconn, subject, kind, key, name, msg, now)
            self.wake.set()

    # -- sending (its own thread) ---------------------------------------------------------------

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="agent-hooks-notify", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping = True
        self.wake.set()
        if self.thread is not None:
            self.thread.join(5)

    def run(self) -> None:
        store = None
        pool = concurrent.futures.ThreadPoolExecutor(SEND_THREADS, thread_name_prefix="agent-hooks-notify-send")
        warmed = False
        try:
            while not self.stopping:
                wait = IDLE_WAKE_S
                try:
                    watch = self.state.watch
                    if store is not None and not isinstance(store, fleetstore.PgStore) \
                            and (watch.down or store.generation != watch.generation or store.moved()):
                        # A connection opened while the store could not be written stays read-only in SQLite
                        # (and keeps its -shm so): let it go, as the hub does (center/hub.py, _follow_store).
                        store.close()
                        store = None
                    if watch.down and not fleetstore.postgres_of(self.state):
                        self.wake.wait(1.0)
                        self.wake.clear()
                        continue
                    if store is None:
                        store = fleetstore.open_store(self.state)
                    if not warmed and self.config and self.channels:
                        warmed = True
                        try:  # Apprise's first import (~0.3 s): here, not on the first request's send
                            import apprise  # noqa: F401
                        except ImportError:
                            pass
                    wait = self.drain(store, pool)
                    self.last_error = None
                except Exception as exc:  # noqa: BLE001 - the sender outlives a bad row or a store that is down
                    if isinstance(store, fleetstore.PgStore) and fleetstore.unreachable(exc):
                        store.close()  # PostgreSQL away: a new connection once it is back
                        store = None
                    if self.last_error != str(exc):
                        log.exception("notifications: sending failed (said once until it changes)")
                    self.last_error = str(exc)
                    wait = 1.0
                    if store is not None:
                        try:
                            store.close()
                        except Exception:  # noqa: BLE001
                            pass
                        store = None
                self.wake.wait(max(0.0, wait))
                self.wake.clear()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            if store is not None:
                store.close()

    def drain(self, store: Any, pool: concurrent.futures.Executor) -> float:
        """Send what is due now; how long until something is due again."""
        conn = store.conn
        config = self.config
        cfg = config["notify"]
        now = time.time()
        rows = outbox.due(conn, now)
        jobs: dict[concurrent.futures.Future[Any], dict[str, Any]] = {}
        for row in rows:
            if row["kind"] == rules.REQUEST and not request_row(conn, row["subject"], now)[1]:
                with store.write() as wconn:
                    outbox.stop(wconn, row["id"], now, "answered (or no longer waiting) before it was sent")
                continue
            job = self._job(conn, row, config)
            if isinstance(job, str):  # no such channel any more
                with store.write() as wconn:
                    outbox.given_up(wconn, row["id"], now, job, None)
                continue
            with store.write() as wconn:
                if not outbox.claim(wconn, row, now):
                    continue  # another command center sends it (a fleet in PostgreSQL)
            jobs[pool.submit(job)] = row
        for fut in concurrent.futures.as_completed(jobs):
            row = jobs[fut]
            try:
                sent = fut.result()
            except Exception as exc:  # noqa: BLE001 - a sender that raised: a failed send, said
                from agent_hooks.notify.send import Sent

                sent = Sent(False, f"{type(exc).__name__}: {exc}")
            self._record(store, row, sent, cfg)
        upcoming = outbox.next_due(conn)
        return IDLE_WAKE_S if upcoming is None else max(0.0, min(IDLE_WAKE_S, upcoming - time.time()))

    def _message(self, row: dict[str, Any]) -> Message:
        title = row["title"] or ""
        if row["sends"]:
            title = f"Reminder {row['sends']}: {title}"
        return Message(title, row["body"] or "", row["link"] or "", row["tag"] or "")

    def _job(self, conn: sqlite3.Connection, row: dict[str, Any], config: dict[str, Any]) -> Any:
        from agent_hooks.notify import send

        msg = self._message(row)
        timeout = float(config["notify"]["timeout_s"])
        if row["channel"].startswith(rules.PUSH + ":"):
            sub = push.get(conn, row["channel"])
            if sub is None:
                return "the device unsubscribed"
            if self._vapid is None:
                self._vapid = push.vapid(self.state.paths)
            key = self._vapid
            return lambda: send.push_send(sub, msg, key, push.contact(config), timeout)
        channel = self.by_key.get(row["channel"])
        if channel is None:
            return "this channel is no longer in [[notify.channels]]"
        return lambda: send.apprise_send(channel.url, msg, timeout)

    def _record(self, store: Any, row: dict[str, Any], sent: Any, cfg: dict[str, Any]) -> None:
        at = time.time()
        is_push = row["channel"].startswith(rules.PUSH + ":")
        with store.write() as conn:
            waiting = row["kind"] == rules.REQUEST and request_row(conn, row["subject"], at)[1]
            renotify = float(cfg["renotify_s"])
            again = at + renotify if waiting and renotify > 0 else None
            if sent.ok:
                self.sent += 1
                outbox.delivered(conn, row["id"], at, sent.answer, again)
                if is_push:
                    push.noted(conn, row["channel"], at, None)
                return
            self.failed += 1
            attempt = int(row["attempts"]) + 1
            if is_push and sent.gone:
                sub = push.get(conn, row["channel"])
                if sub is not None:
                    push.unsubscribe(conn, sub["endpoint"])
                outbox.given_up(conn, row["id"], at, f"the subscription is gone ({sent.answer})", None)
                self.subscriptions_changed()
                return
            if is_push:
                push.noted(conn, row["channel"], at, sent.answer)
            if attempt >= int(cfg["max_attempts"]) or (row["kind"] == rules.REQUEST and not waiting):
                outbox.given_up(conn, row["id"], at, sent.answer, again)
            else:
                delay = backoff(attempt, float(cfg["backoff_initial_s"]), float(cfg["backoff_max_s"]))
                outbox.failed(conn, row["id"], at, sent.answer, at + delay)
        log.warning("notification to %s failed (try %d): %s", row["channel_name"], attempt, sent.answer)

    def status(self) -> dict[str, Any]:
        _ = self.config
        return {"channels": [c.name for c in self.channels], "problems": self.problems, "sent": self.sent,
                "failed": self.failed, "last_error": self.last_error,
                "running": self.thread is not None and self.thread.is_alive()}


# -- routes: Web Push subscriptions ----------------------------------------------------------------

def notifier_of(state: Any) -> Notifier:
    found = getattr(state, "notifier", None)
    if found is None:
        raise RuntimeError("the notifier is not running: agent_hooks.notify.service is not a route module")
    return found


async def push_key(request: Request) -> Response:
    from agent_hooks.server import access
    from agent_hooks.server.app import state_of
    from agent_hooks.server.jsonout import JSONResponse

    state = state_of(request)
    await access.check(state, request, access.PEOPLE)
    key = await state.run_blocking(push.vapid, state.paths)
    return JSONResponse({"public_key": push.public_key(key)})


async def _body(request: Request) -> Any:
    from agent_hooks.center import contract
    from agent_hooks.server.body import read

    # The API's one body limit and parser (server/body.py): 413, or 400 saying why (too deep, not JSON).
    raw = await read(request.scope, request.receive, contract.MAX_BODY_BYTES)
    return contract.parse_json(raw, contract.MAX_BODY_BYTES) if raw.strip() else {}


async def subscriptions(request: Request) -> Response:
    from agent_hooks.center import contract
    from agent_hooks.center.hub import hub_of
    from agent_hooks.server import access
    from agent_hooks.server.app import state_of
    from agent_hooks.server.jsonout import JSONResponse

    state = state_of(request)
    caller = await access.check(state, request, access.PEOPLE)
    notifier = notifier_of(state)
    try:
        body = await _body(request)
    except contract.BodyError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    hub = hub_of(state)
    if request.method == "DELETE":
        endpoint = body.get("endpoint") if isinstance(body, dict) else None
        if not isinstance(endpoint, str) or not endpoint:
            return JSONResponse({"error": 'expected {"endpoint": URL}'}, status_code=400)
        gone = await hub.write(push.unsubscribe, endpoint)
        notifier.subscriptions_changed()
        if not gone:
            return JSONResponse({"error": "no such subscription"}, status_code=404)
        return JSONResponse({"ok": True, "removed": True})
    try:
        sub = push.check(body)
    except push.Invalid as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    channel, new = await hub.write(push.subscribe, sub, caller.label, time.time())
    notifier.subscriptions_changed()
    # The pending requests looked at now, on the writer thread: this device is told of them too.
    await hub.submit(lambda conn: notifier.requests(hub.store, time.time()))
    return JSONResponse({"ok": True, "channel": channel, "device": caller.label, "new": new},
                        status_code=201 if new else 200)


def routes(state: Any) -> list[BaseRoute]:
    return [
        Route("/api/push/key", push_key, methods=["GET"]),
        Route("/api/push/subscriptions", subscriptions, methods=["POST", "DELETE"]),
    ]


async def startup(state: Any) -> None:
    from agent_hooks.center.hub import hub_of

    hub = hub_of(state)
    notifier = Notifier(state, hub.own_host)
    state.notifier = notifier

    def baseline(conn: sqlite3.Connection) -> None:
        """Where the cards stand now, on the writer thread, before it tells the notifier of any change."""
        from agent_hooks.center import cards

        try:
            built = cards.build(conn, state.config, hub.own_host, time.time())
        except sqlite3.Error:  # a store the hub could not open yet: the first full build is the baseline
            built = None
        notifier._card_kinds = None if built is None else {cid: card_kinds(c) for cid, c in built.items()}
        hub.notifier = notifier

    try:
        await hub.submit(baseline)
    except Exception:  # noqa: BLE001 - a store that cannot be written now (recovery.py): the first full build is
        hub.notifier = notifier  # the baseline, once it can
    notifier.start()


async def shutdown(state: Any) -> None:
    notifier = getattr(state, "notifier", None)
    if notifier is not None:
        import asyncio

        await asyncio.get_running_loop().run_in_executor(None, notifier.stop)
