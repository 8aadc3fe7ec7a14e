"""A host reports its own sessions to its command center, so a remote card shows what a local one does.

The ingest contract carries an event name and a short metadata string: a
remote card built from it alone shows its tmux name, "claude-code" and
"0 tool calls". The host's server knows more, as its own board shows it:
agent, role, task, our own state (live, awaiting, needs input, error, ended),
the current tool and its command, guard counts, and whether a reply can be
typed into its tmux pane. While subscribed to a command center, it sends the
cards that changed (at most ``REPORT_EVERY_S`` apart, within about 100 ms of
a change) to ``POST /api/fleet/report``:

    {"host": NAME, "full": bool, "cards": [{"session_id", "tmux_session", ...}]}

The command center keeps each as the card's ``details`` (JSON) and builds the
remote card from it (agent_hooks.center.cards). ``full`` is sent after every
(re)connect, after the host moved on to another of its command centers
(center/failover.py), and every ``REFRESH_S`` when nothing changed: the
command center may have restarted with a new store. The reporting host is the caller
(server/access.py): a paired host reports for itself only (a header or a body
naming another host is 403); the owner (its uid on loopback, or the shared
fleet token) names the host in the ``X-Agent-Hooks-Host`` header. ``fleet.report = false`` turns it off; ``fleet.report_commands =
false`` leaves commands out.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sqlite3
import time
from typing import Any

from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute

from agent_hooks import __version__, fleet
from agent_hooks.center import contract, failover, fleetdb, limits, numbers
from agent_hooks.center.control import upstream_of
from agent_hooks.center.hub import Hub, hub_of
from agent_hooks.forward import centers
from agent_hooks.server import access, fastpath
from agent_hooks.server.app import ServerState, stop_background
from agent_hooks.server.body import read

log = logging.getLogger("agent_hooks.center.report")
REPORT_EVERY_S = 0.05
# With nothing changing, a full report this often all the same.
REFRESH_S = 60.0
MAX_CARDS = 500
# A report is one of the API's bounded bodies (server/body.py): a host sends its cards in batches
# that fit, and its requests clipped to fit (relay.fit).
MAX_BODY_BYTES = contract.MAX_BODY_BYTES
BATCH_BYTES = MAX_BODY_BYTES - 8 * 1024
# What a report may say about a session, and how long each text may be (longer ones are clipped).
TEXT_FIELDS = {"session_id": 200, "tmux_session": 200, "label": 200, "agent": 80, "role": 80, "task_id": 200,
               "task": 200, "task_state": 20, "own_state": 20, "current_tool": 60, "current_command": 300,
               "waiting_on": 20, "waiting_detail": 200, "agent_type": 40}
# Numbers a report may carry, and their kinds (agent_hooks.center.numbers: the range of each).
NUMBER_FIELDS = numbers.CARD_FIELDS
BOOL_FIELDS = ("tool_running", "reply", "in_tmux")
# The session moments a host may say it tells its person itself (``notified_by_host``, agent_hooks.notify.rules).
NOTIFIED_KINDS = frozenset({"failed", "stalled", "budget", "finished"})


def clean(item: Any) -> dict[str, Any] | None:
    """A reported session with only the fields we know, of the right types, clipped; None if unusable."""
    if not isinstance(item, dict):
        return None
    out: dict[str, Any] = {}
    for key, limit in TEXT_FIELDS.items():
        value = item.get(key)
        if isinstance(value, str) and value:
            out[key] = value[:limit]
    for key, kind in NUMBER_FIELDS.items():
        value = numbers.clean(item.get(key), kind)  # out of range: left out (the route refused it already)
        if value is not None:
            out[key] = value
    for key in BOOL_FIELDS:
        if isinstance(item.get(key), bool):
            out[key] = item[key]
    told = item.get("notified_by_host")
    if isinstance(told, list):  # the session moments its host tells its person itself (agent_hooks.notify)
        out["notified_by_host"] = sorted({k for k in told if isinstance(k, str) and k in NOTIFIED_KINDS})
    if "session_id" not in out:
        return None
    return out


def check(items: list[Any], requests: list[Any] | None) -> None:
    """Every number of a report in its range (agent_hooks.center.numbers), or BodyError (400) naming
    the first that is not (``cards[3].last_activity``)."""
    for i, item in enumerate(items):
        if isinstance(item, dict):
            numbers.check_fields(item, NUMBER_FIELDS, f"cards[{i}]")
    if requests is not None:
        from agent_hooks.center import relay

        relay.check(requests, "approvals")


def from_card(card: dict[str, Any], with_command: bool) -> dict[str, Any]:
    """What a host says about one of its local cards (a number out of its range left out: never one
    the command center would refuse)."""
    b = card.get("badges") or {}
    out = {
        "session_id": card["id"], "tmux_session": card.get("tmux_session"), "label": card.get("label"),
        "agent": card.get("agent"), "role": card.get("role"), "task_id": card.get("task_id"),
        "task": card.get("task"), "task_state": card.get("task_state"), "own_state": card.get("own_state"),
        "current_tool": card.get("current_tool"), "tool_running": bool(card.get("tool_running")),
        "current_command": card.get("current_command") if with_command else None,
        "tool_calls": card.get("tool_calls"), "waiting_on": card.get("waiting_on"),
        "waiting_detail": card.get("waiting_detail"), "waiting_since": card.get("waiting_since"),
        "last_activity": card.get("last_activity"), "warned": b.get("warned"), "denied": b.get("denied"),
        "reply": bool(card.get("reply")), "in_tmux": bool(card.get("in_tmux")), "agent_type": card.get("agent_type"),
    }
    out = numbers.clean_fields(out, NUMBER_FIELDS)
    return {k: v for k, v in out.items() if v is not None}


# -- the command center's side ------------------------------------------------------------

def store_report(conn: sqlite3.Connection, host: str, items: list[dict[str, Any]], at: float,
                 requests: list[Any] | None = None, requests_full: bool = True,
                 caps: limits.Limits | None = None, offer: dict[str, Any] | None = None) -> fleetdb.Result:
    """Keep each reported session as its card's details (a session without a card gets one, running),
    and the host's approval requests (agent_hooks.center.relay) when the report has them. With ``caps``
    (agent_hooks.center.limits): a new host past ``max_hosts`` is refused (429, nothing stored); the
    host keeps its newest cards and requests, and what is left out is counted in ``left_out``; a new
    card or request past ``max_rows`` is refused (429, the rest stored)."""
    if caps is not None:
        why = limits.refuse_host(conn, host, caps, at)
        if why is not None:
            return fleetdb.Result(429, {"error": why})
    out = fleetdb.Result(200, {"ok": True, "cards": 0, "left_out": {"cards": 0}})
    refused = 0
    if offer is not None:  # what the host may launch (agent_hooks.center.launcher), for the board's form
        from agent_hooks.center import launcher

        launcher.keep_offer(conn, host, offer, at)
    if requests is not None:
        from agent_hooks.center import relay

        stored = relay.store_remote(conn, host, requests, at, requests_full, caps)
        out.body["approvals_changed"] = stored.changed
        # The route counts them across reports (Hub.note_left_out): a report that is not full adds.
        out.extra.update(approvals_left_out=stored.left_out, approvals_settled=stored.settled,
                         approvals_full=requests_full)
        refused += stored.refused
    new: list[dict[str, Any]] = []
    kept: list[tuple[str, dict[str, Any]]] = []
    found = fleetdb.Found(conn, host, [i["session_id"] for i in items], [i.get("tmux_session") for i in items])
    for item in items:
        card = found.session(item["session_id"])
        if card is not None and card["host"] != host:
            continue  # a session id of another host's card: never overwritten from here
        if card is None:
            card = found.tmux(item.get("tmux_session"))
        if card is None:
            new.append(item)
            continue
        kept.append((card["id"], item))
    _keep(conn, out, kept, at)
    if caps is not None and new:
        new.sort(key=lambda i: i.get("last_activity") or 0.0, reverse=True)  # the newest first
        out.body["left_out"]["cards"] = max(0, len(new) - caps.cards_per_host)
        new = new[:caps.cards_per_host]
        out.removed |= set(limits.make_room(conn, host, caps, len(new)))
        room = max(0, caps.rows - limits.rows_kept(conn))
        refused += max(0, len(new) - room)
        new = new[:room]
    for item in reversed(new):  # the newest made last: its card is the most recent
        card = fleetdb.create(conn, host=host, at=at, session_id=item["session_id"],
                              tmux=item.get("tmux_session"), agent_type=item.get("agent_type")
                              or contract.DEFAULT_AGENT_TYPE, state=contract.RUNNING)
        out.transitions.append({"id": card["id"], "event": "register", "from": None, "to": card["state"],
                                "ignored": False, "source": "report", "at": at})
        _keep(conn, out, [(card["id"], item)], at)
    from agent_hooks.center import ledger

    # A session's agent and task as its card now says: its spend in the ledger moves with them.
    if ledger.attribute(conn, host, [(i["session_id"], i.get("agent"), i.get("task_id")) for i in items]):
        out.extra["cost"] = True
    if refused and caps is not None:
        out.status = 429
        out.body["ok"] = False
        out.body["error"] = f"{refused} new card(s) and request(s) not stored: " + limits.rows_full(
            caps, limits.rows_kept(conn))
    return out


def _keep(conn: sqlite3.Connection, out: fleetdb.Result, kept: list[tuple[str, dict[str, Any]]], at: float) -> None:
    """Reported sessions as their cards' details (card id, item): one executemany, PostgreSQL's one pipeline."""
    if not kept:
        return
    conn.executemany("UPDATE fleet_sessions SET details = ?, details_at = ?, session_id = coalesce(session_id, ?)"
                     " WHERE id = ?", [(json.dumps(item, sort_keys=True), at, item["session_id"], card_id)
                                       for card_id, item in kept])
    out.changed.update(card_id for card_id, _item in kept)
    out.body["cards"] += len(kept)


async def report(state: ServerState, scope: fastpath.Scope, receive: fastpath.Receive, send: fastpath.Send) -> None:
    """POST /api/fleet/report. Raw ASGI (agent_hooks.server.fastpath): every host sends one every few seconds."""
    hub = hub_of(state)
    request = HTTPConnection(scope)
    try:
        caller = await access.check(state, request, access.HOSTS)
        host = caller.speaks_for(access.named_host(request))  # a paired host: its own name; another is 403
        try:
            doc = contract.parse_json(await read(scope, receive))
        except contract.BodyError as exc:  # over the limit (413), not a JSON object, lone surrogates (400)
            await fastpath.send_json(send, exc.status, {"error": str(exc)})
            return
        items = doc.get("cards")
        if not isinstance(items, list):
            await fastpath.send_json(send, 400, {"error": 'expected {"cards": [...], "approvals": [...]}'})
            return
        if doc.get("host") is not None:
            if not isinstance(doc["host"], str):
                await fastpath.send_json(send, 400, {"error": '"host" must be the reporting host\'s name (a string)'})
                return
            caller.speaks_for(doc["host"])  # a body naming another host than the credential's: 403
    except access.Refused as refused:
        await refused.response()(scope, receive, send)
        return
    host = fleet.clean_host(host)
    if not host:
        await fastpath.send_json(send, 400, {"error": f"the {fleet.HOST_HEADER} header names the reporting host"})
        return
    if host == hub.own_host:
        await fastpath.send_json(send, 409, {"error": "this host's own sessions come from its store, not from a report"})
        return
    requests = doc.get("approvals") if isinstance(doc.get("approvals"), list) else None
    try:
        check(items[:MAX_CARDS], requests)
    except contract.BodyError as exc:  # a number out of its range: nothing of the report is stored
        await fastpath.send_json(send, exc.status, {"error": str(exc)})
        return
    cleaned = [c for c in (clean(i) for i in items[:MAX_CARDS]) if c is not None]
    from agent_hooks.center import launcher

    out = await hub.write(store_report, host, cleaned, time.time(), requests, doc.get("approvals_full") is not False,
                          limits.Limits.of(state.config), launcher.clean_offer(doc.get("launch")))
    hub.note_left_out(host, out)
    if out.status == 429:
        state.stats.count("fleet_refused")
        await fastpath.send_json(send, 429, out.body, [(b"retry-after", b"60")])
        return
    await fastpath.send_json(send, out.status, out.body)


def routes(state: ServerState) -> list[BaseRoute]:
    return [state.fast_route("/api/fleet/report", functools.partial(report, state))]


# -- the reporting host's side ----------------------------------------------------------------

def batches(items: list[dict[str, Any]], requests: list[dict[str, Any]] | None, full: bool,
            offer: dict[str, Any] | None = None) -> list[bytes]:
    """The report as bodies within BATCH_BYTES each: cards in batches, the requests (clipped to fit)
    and what this host may launch (``offer``) with the last one. An empty report is one body (it still
    carries the requests)."""
    from agent_hooks.center import relay

    out: list[bytes] = []
    batch: list[dict[str, Any]] = []
    size = 0
    for item in items:
        n = len(json.dumps(item, default=str)) + 2
        if batch and size + n > BATCH_BYTES // 2:
            out.append(json.dumps({"full": full, "cards": batch}, default=str).encode())
            batch, size = [], 0
        batch.append(item)
        size += n
    last: dict[str, Any] = {"full": full, "cards": batch}
    if offer is not None:
        last["launch"] = offer
    if requests is not None:
        room = BATCH_BYTES - len(json.dumps(last, default=str))
        last["approvals"], last["approvals_full"] = relay.fit(requests, room)
    out.append(json.dumps(last, default=str).encode())
    return out


class Reporter:
    """Sends this host's changed local cards to the command center (full after each reconnect)."""

    def __init__(self, state: ServerState, hub: Hub, upstream: failover.Upstream) -> None:
        self.state = state
        self.hub = hub
        self.upstream = upstream
        self.dirty: set[str] = set()
        self.full = True
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.sent = 0
        self.last_error: str | None = None
        self.poked = False
        self.sent_requests = ""
        from agent_hooks.center.ledger import Sender

        self.cost = Sender(hub, upstream.base, upstream)  # this host's priced messages, for the center's ledger
        upstream.listeners.append(self._moved)

    @property
    def base(self) -> str:
        """The command center reported to now (the host's current one)."""
        return self.upstream.base

    def _moved(self, old: str, new: str) -> None:
        """The host moved on to another center: it learns everything, now."""
        self.full = True
        self.wake.set()

    def status(self) -> dict[str, Any]:
        """For /api/fleet/status and doctor: where it reports, and the last failure (None once it worked)."""
        return {"center": self.base, "ok": self.last_error is None and not self.full, "sent": self.sent,
                "last_error": self.last_error, "cost": self.cost.status()}

    def changed(self, card_id: str) -> None:
        """Called on the loop for every local card the hub publishes."""
        self.dirty.add(card_id)
        self.wake.set()

    def poke(self) -> None:
        """Called on the loop when anything committed to the store: approval requests may have changed."""
        self.poked = True
        self.wake.set()

    async def _requests(self) -> tuple[list[dict[str, Any]] | None, str]:
        """This host's approval requests to report (None on a store without them), and their JSON."""
        try:
            # With whether this host tells each itself, so that the center tells it once (agent_hooks.notify).
            from agent_hooks.notify.service import report_rows

            rows = await self.hub.submit(report_rows, time.time(), self.state.config, self.hub.own_host)
        except sqlite3.OperationalError:  # a store not migrated yet (the hooks migrate it)
            return None, ""
        return rows, json.dumps(rows, sort_keys=True, default=str)

    async def run(self) -> None:
        """Report until cancelled; an unexpected error is logged and the loop starts over (in full)."""
        while True:
            try:
                await self._run()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - reporting must outlive a bad card
                log.exception("report to %s failed", self.base)
                self.last_error, self.full = f"{type(exc).__name__}: {exc}", True
                await asyncio.sleep(float(self.state.config["fleet"]["subscribe_backoff_max_s"]))

    async def _run(self) -> None:
        import httpx  # here, not at import: only a server that has a command center to reach needs it (~25 ms)

        cap = max(0.25, float(self.state.config["fleet"]["subscribe_backoff_max_s"]))
        headers = {"User-Agent": f"agent-hooks/{__version__}", "Content-Type": "application/json"}
        delay = 0.25
        async with httpx.AsyncClient(timeout=httpx.Timeout(10.0, connect=2.0), trust_env=False,
                                     headers=headers) as client:
            while True:
                if not self.full and not self.dirty and not self.poked:
                    self.wake.clear()
                    try:
                        await asyncio.wait_for(self.wake.wait(), REFRESH_S)
                    except TimeoutError:
                        self.full = True  # a command center that restarted with a new store learns it all again
                await asyncio.sleep(REPORT_EVERY_S)  # a burst of changes goes in one report
                ids, full = (list(self.hub.cards) if self.full else sorted(self.dirty)), self.full
                self.dirty, self.poked = set(), False
                requests, text = await self._requests()
                base = self.base
                # The priced messages the center has not acknowledged yet, on every wake-up (a hook's
                # commit): a budget spent here reaches the other hosts within one report.
                await self.cost.send(client, fleet.client_headers(self.state.paths, self.state.config,
                                                                  self.state.env, url=base))
                if not ids and not full and text == self.sent_requests:
                    continue  # a commit that changed neither a card nor a request
                with_command = bool(self.state.config["fleet"]["report_commands"])
                # The sessions this host forwards: in tmux, or any when forward.forward_without_tmux says so.
                everyone = bool(self.state.config["forward"].get("forward_without_tmux"))
                items = [from_card(self.hub.cards[i], with_command) for i in ids
                         if i in self.hub.cards and self.hub.cards[i].get("local")
                         and (everyone or self.hub.cards[i].get("tmux_session"))]
                if items:
                    # What this host tells its person about each itself, so that the center does not again.
                    from agent_hooks.notify.service import told_here

                    told = await self.hub.submit(told_here, self.state.config, self.hub.own_host,
                                                 [(item.get("agent"), item.get("task_id")) for item in items])
                    for item, kinds in zip(items, told, strict=True):
                        item["notified_by_host"] = kinds
                ok, problem, status = True, None, None
                try:
                    # This host's credential for the center (or the fleet token), read for each report.
                    auth = fleet.client_headers(self.state.paths, self.state.config, self.state.env, url=base)
                    from agent_hooks.center import launch

                    for doc in batches(items[:MAX_CARDS], requests, full, launch.offer(self.state.config)):
                        r = await client.post(base + "/api/fleet/report", content=doc, headers=auth)
                        status = r.status_code
                        if r.status_code != 200:
                            ok, problem = False, f"HTTP {r.status_code}: {r.text[:200]}"
                            break
                except httpx.HTTPError as exc:
                    ok, problem, status = False, f"{type(exc).__name__}: {exc}", None
                if ok:
                    self.upstream.answered(centers.REPORT, base)
                    if self.base == base:  # else: the host moved on meanwhile, and this goes out again in full
                        self.full, self.last_error, delay, self.sent_requests = False, None, 0.25, text
                    self.sent += len(items)
                    continue
                if self.last_error is None:
                    log.warning("report to %s failed: %s", base, problem)
                self.last_error = problem
                self.full = True  # whatever the command center missed: all of it again once it answers
                if not centers.failure(status):
                    self.upstream.answered(centers.REPORT, base)  # a 4xx: an answer, never a move
                elif await self.upstream.failed(centers.REPORT, base, problem or "no answer"):
                    delay = 0.25
                    continue  # the next center, at once
                # A center without the route (404), or past its limits (429): not every few seconds.
                await asyncio.sleep(60.0 if any(f"HTTP {c}" in (problem or "") for c in (404, 429)) else delay)
                delay = min(cap, delay * 2)


async def startup(state: ServerState) -> None:
    if not state.config["fleet"].get("report"):
        return
    up = await upstream_of(state)
    if up is None:
        return
    hub = hub_of(state)
    rep = Reporter(state, hub, up)
    state.reporter = rep
    hub.local_listeners.append(rep.changed)
    # Any commit (a hook's request, an answer at the terminal or the CLI): requests may have changed.
    hub.change_listeners.append(rep.poke)
    rep.task = asyncio.create_task(rep.run())


async def shutdown(state: ServerState) -> None:
    rep = state.reporter
    if rep is not None:
        await stop_background(rep.task)
