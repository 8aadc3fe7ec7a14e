"""The server as an operator client of an OpenClaw gateway (protocol 4), over one WebSocket.

Imported only when ``[openclaw] url`` is set (agent_hooks.openclaw.service starts it).

    gateway -> event connect.challenge
    us      -> req connect {minProtocol 4, maxProtocol 4, client {id "gateway-client", mode "backend"},
                            role "operator", scopes, caps, auth {token}}
    gateway -> res hello-ok                      (then events: agent, exec.approval.requested/resolved, ...)
    us      -> req sessions.subscribe {}                   tool calls with their input (session.tool)
    us      -> req exec.approval.resolve {id, decision}   an answer from our API or board
    us      -> req chat.abort {sessionKey, runId}         a cancel from our API, board or CLI

It runs on the server's event loop and never holds it: every frame is bounded
(``max_frame_bytes``, enforced by the WebSocket itself), events past
``max_events_per_s`` are counted and dropped unread (a run's lifecycle and
approval frames keep a budget of their own), the loop is yielded after every
frame, and store writes go to the command center's writer thread in batches
(one in flight at a time). A gateway that is down, slow or hostile costs the
hook routes nothing but the CPU those bounds allow. It reconnects with
exponential backoff (``backoff_max_s`` at most); :meth:`Gateway.status` says
connected / connecting / down, since when, and the last error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sys
import time
import uuid
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from agent_hooks import __version__
from agent_hooks.center.hub import Hub
from agent_hooks.openclaw import frames, records, settings
from agent_hooks.output import one_line
from agent_hooks.server.app import ServerState, stop_background

log = logging.getLogger("agent_hooks.openclaw.service")
PROTOCOL = 4
CLIENT_ID = "gateway-client"
CLIENT_MODE = "backend"
HELLO_TIMEOUT_S = 10.0
CALL_TIMEOUT_S = 5.0
HELLO_FRAMES = 64  # frames read at most while waiting for connect.challenge and the answer to connect
BACKOFF_MIN_S = 0.5
# Actions waiting for the writer thread at most; past this (a store that cannot keep up) they are dropped.
MAX_PENDING_ACTIONS = 10_000
# Actions per write: one write holds the process's write lock, which the hook calls' writes wait for.
BATCH_ACTIONS = 200
# A frame costs one event of the budget per this many bytes begun: parsing is what the loop pays, so a
# gateway sending frames near max_frame_bytes gets fewer of them per second, not max_events_per_s MB/s.
EVENT_BYTES = 64 * 1024
# Frames worth reading even past the events budget: a run's start or end, an approval, an answer to a call.
_PRIORITY_MARKS = ("lifecycle", "exec.approval", '"res"')

CONNECTED, CONNECTING, DOWN = "connected", "connecting", "down"


class GatewayError(Exception):
    """The gateway refused a call (``reached``, with its error ``code`` and message), or could not be
    reached for it (not connected, the connection ended, no answer in time)."""

    def __init__(self, message: str, code: str | None = None, reached: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.reached = reached


class Bucket:
    """A token bucket: ``rate`` takes per second, ``rate`` at most at once."""

    def __init__(self, rate: float) -> None:
        self.rate = max(1.0, rate)
        self.tokens = self.rate
        self.at = time.monotonic()

    def take(self, n: float = 1.0) -> bool:
        now = time.monotonic()
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False


class Gateway:
    """One gateway connection, kept open (see the module docstring)."""

    def __init__(self, state: ServerState, hub: Hub) -> None:
        self.state = state
        self.hub = hub
        cfg = settings.section(state.config)
        self.url = str(cfg.get("url") or "").strip()
        self.shown_url = settings.shown_url(self.url)  # what status and the log say: never a credential
        self.host = settings.gateway_host(state.config, hub.own_host)
        self.scopes = settings.scopes(state.config)
        self.caps = settings.caps(state.config)
        self.max_frame = int(cfg["max_frame_bytes"])
        self.rate = float(cfg["max_events_per_s"])
        self.backoff_max = max(BACKOFF_MIN_S, float(cfg["backoff_max_s"]))
        self.task: asyncio.Task[None] | None = None
        self.ws: Any = None
        self.mapper = frames.Mapper(approvals="operator.approvals" in self.scopes)
        self.calls: dict[str, asyncio.Future[Any]] = {}
        self.methods: set[str] | None = None  # what hello-ok said the gateway offers (None: it did not say)
        self.granted: list[str] | None = None
        self.state_name = CONNECTING
        self.since = time.time()
        self.connected_at: float | None = None
        self.last_error: str | None = None
        self.last_write_error: str | None = None  # why the store refused the last batch (doctor shows it)
        self.counts = {"events": 0, "dropped": 0, "malformed": 0, "connects": 0, "write_errors": 0}
        self.pending: list[dict[str, Any]] = []
        self.stopping_reason: str | None = None  # the gateway's own word before it closes (event "shutdown")
        self.writer: asyncio.Task[None] | None = None
        self._token: str | None = None  # the token in use: never in what status, the log or an error says
        self.boot: str | None = None  # the gateway's bootId from its hello: a new one means it restarted

    # -- what status, doctor and the board show ------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {"url": self.shown_url, "host": self.host, "state": self.state_name, "since": self.since,
                "last_error": self.last_error, "connected_at": self.connected_at, "scopes": self.scopes,
                "cancel": "operator.write" in self.scopes, "approvals": "operator.approvals" in self.scopes,
                "last_write_error": self.last_write_error, **self.counts}

    def _set(self, name: str, error: str | None = None) -> None:
        if name != self.state_name:
            self.since = time.time()
            if name == CONNECTED:
                log.info("OpenClaw gateway %s: connected", self.shown_url)
        if name == DOWN and error != self.last_error:
            log.warning("OpenClaw gateway %s: down: %s (said once until it changes)", self.shown_url, error)
        changed = name != self.state_name or (error is not None and error != self.last_error)
        self.state_name = name
        if error is not None:
            self.last_error = error
        if changed:
            self.hub.announce({"type": "openclaw", "openclaw": self.status()})  # the board's header

    # -- the connection loop ---------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, read until the connection ends, wait (backoff), again; until cancelled."""
        delay = BACKOFF_MIN_S
        while True:
            if self.state_name != DOWN:
                self._set(CONNECTING)  # down stays down, since its first failure, until a connect succeeds
            connects = self.counts["connects"]
            try:
                token = self._token = settings.token(self.state.config, self.state.env)
                bad = settings.url_problem(self.url)
                if bad:
                    raise settings.SettingError(bad)
                self.stopping_reason = None
                await self._session(token)
                error = "the gateway closed the connection"
                if self.stopping_reason:
                    error = f"the gateway stopped ({self.stopping_reason})"
            except asyncio.CancelledError:
                raise
            except settings.SettingError as exc:
                error = str(exc)
            except GatewayError as exc:
                error = f"refused: {exc}"
            except (TimeoutError, OSError, WebSocketException, ValueError) as exc:
                error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            except Exception as exc:  # noqa: BLE001 - the subscription must outlive a bad frame or a bug
                log.exception("OpenClaw gateway %s: unexpected error", self.shown_url)
                error = f"{type(exc).__name__}: {exc}"
            finally:
                self._drop_connection()
            # This attempt's connection, if it got one, was a good one (it outlived the longest pause): the
            # gateway went away after working, so try again soon. Only this attempt's: an old connection's
            # time must not keep a gateway that is now down from backing off at all.
            if self.counts["connects"] > connects and self.connected_at is not None \
                    and time.time() - self.connected_at >= self.backoff_max:
                delay = BACKOFF_MIN_S
            # Whatever said it (the gateway's words, its close frame's reason, a library's message): one clean line.
            self._set(DOWN, self._shown(error, 300))
            await asyncio.sleep(delay * (0.75 + random.random() / 2))
            delay = min(self.backoff_max, delay * 2)

    def _drop_connection(self) -> None:
        self.ws = None
        for fut in self.calls.values():
            if not fut.done():
                fut.set_exception(GatewayError("the connection to the gateway ended"))
        self.calls.clear()

    async def _session(self, token: str) -> None:
        async with connect(self.url, max_size=self.max_frame, compression=None, proxy=None,
                           open_timeout=HELLO_TIMEOUT_S, close_timeout=2, ping_interval=20, ping_timeout=20,
                           max_queue=64, user_agent_header=f"agent-hooks/{__version__}") as ws:
            await self._hello(ws, token)
            self.ws = ws
            self.connected_at = time.time()
            self.counts["connects"] += 1
            self._set(CONNECTED)
            self.last_error = None
            self._queue(self.mapper.connected(self.boot))  # runs of an earlier boot end (records._rebooted)
            subscribe = asyncio.create_task(self._subscribe())
            try:
                await self._read(ws)
            finally:
                await stop_background(subscribe)

    async def _hello(self, ws: Any, token: str) -> None:
        """Wait for connect.challenge, send connect, wait for its answer (hello-ok)."""
        deadline = time.monotonic() + HELLO_TIMEOUT_S
        seen = 0

        async def frame() -> dict[str, Any]:
            # The events budget starts after the hello: until then a gateway gets HELLO_FRAMES frames at
            # most, and the loop is yielded after each, so one that floods before it holds nothing.
            nonlocal seen
            seen += 1
            if seen > HELLO_FRAMES:
                raise GatewayError(f"{HELLO_FRAMES} frames before its hello: not an OpenClaw gateway's handshake")
            await asyncio.sleep(0)
            raw = await asyncio.wait_for(ws.recv(), max(0.01, deadline - time.monotonic()))
            doc = json.loads(raw)
            if not isinstance(doc, dict):
                raise ValueError("a frame that is not a JSON object")
            return doc

        while True:
            doc = await frame()
            if doc.get("type") == "event" and doc.get("event") == "connect.challenge":
                break
        req_id = str(uuid.uuid4())
        await ws.send(json.dumps({"type": "req", "id": req_id, "method": "connect", "params": {
            "minProtocol": PROTOCOL, "maxProtocol": PROTOCOL,
            "client": {"id": CLIENT_ID, "displayName": "agent-hooks command center", "version": __version__,
                       "platform": sys.platform, "mode": CLIENT_MODE},
            "role": "operator", "scopes": self.scopes, "caps": self.caps, "auth": {"token": token},
            "userAgent": f"agent-hooks/{__version__}"}}))
        while True:
            doc = await frame()
            if doc.get("type") == "res" and doc.get("id") == req_id:
                break
        if not doc.get("ok"):
            raise GatewayError(self._shown(_error_text(doc.get("error")), 300))
        hello = frames.obj(doc.get("payload"))
        features = frames.obj(hello.get("features"))
        methods = features.get("methods")
        self.methods = {m for m in methods if isinstance(m, str)} if isinstance(methods, list) else None
        auth = frames.obj(hello.get("auth"))
        scopes = auth.get("scopes")
        self.granted = [s for s in scopes if isinstance(s, str)] if isinstance(scopes, list) else None
        server = frames.obj(hello.get("server"))
        boot = server.get("bootId")
        self.boot = boot[:100] if isinstance(boot, str) and boot else None

    async def _subscribe(self) -> None:
        """Ask for the sessions' events too: tool calls then come with their input (session.tool).
        Without it (an older gateway, a refusal) tool calls show by their title only. With approvals on,
        catch up with the requests made (or answered) while the connection was down."""
        self.mapper.subscribed = False
        if self.mapper.approvals and self.offers("exec.approval.list"):
            try:
                self._queue(self.mapper.pending_list(await self.call("exec.approval.list", {})))
            except GatewayError as exc:
                log.info("OpenClaw gateway %s: exec.approval.list refused (%s)", self.shown_url, exc)
        if not self.offers("sessions.subscribe"):
            return
        try:
            result = await self.call("sessions.subscribe", {})
        except GatewayError as exc:
            log.info("OpenClaw gateway %s: sessions.subscribe refused (%s); tool calls show without input",
                     self.shown_url, exc)
            return
        self.mapper.subscribed = not (isinstance(result, dict) and result.get("subscribed") is False)

    async def _read(self, ws: Any) -> None:
        events, priority = Bucket(self.rate), Bucket(self.rate)
        async for raw in ws:
            await asyncio.sleep(0)  # a flood of buffered frames must not hold the hook routes
            if not isinstance(raw, str):
                self.counts["malformed"] += 1
                continue
            cost = 1 + len(raw) // EVENT_BYTES
            if not events.take(cost):
                if not any(mark in raw for mark in _PRIORITY_MARKS) or not priority.take(cost):
                    self.counts["dropped"] += 1
                    continue
            try:
                doc = json.loads(raw)
            except (ValueError, RecursionError):
                self.counts["malformed"] += 1
                continue
            if not isinstance(doc, dict):
                self.counts["malformed"] += 1
                continue
            kind = doc.get("type")
            if kind == "res":
                fut = self.calls.pop(str(doc.get("id")), None)
                if fut is not None and not fut.done():
                    fut.set_result(doc)
                continue
            if kind != "event" or not isinstance(doc.get("event"), str):
                continue
            self.counts["events"] += 1
            if doc["event"] == "shutdown":
                payload = frames.obj(doc.get("payload"))
                self.stopping_reason = self._shown(str(payload.get("reason") or "shutdown"), 200)
                continue
            try:
                acts = self.mapper.actions(doc["event"], doc.get("payload"))
            except Exception:  # noqa: BLE001 - one odd frame is dropped, not the connection
                self.counts["malformed"] += 1
                log.exception("OpenClaw gateway %s: could not read a %s event", self.shown_url,
                              self._shown(doc["event"], 100))
                continue
            if acts:
                self._queue(acts)

    # -- store writes: batched, one in flight ---------------------------------------------------

    def _queue(self, acts: list[dict[str, Any]]) -> None:
        room = MAX_PENDING_ACTIONS - len(self.pending)
        if room < len(acts):
            self.counts["dropped"] += len(acts) - max(0, room)
            acts = acts[: max(0, room)]
        self.pending.extend(acts)
        if self.writer is None or self.writer.done():
            self.writer = asyncio.create_task(self._write())

    async def _write(self) -> None:
        while self.pending:
            batch, self.pending = self.pending[:BATCH_ACTIONS], self.pending[BATCH_ACTIONS:]
            try:
                out = await self.hub.write(records.apply, batch, self.host, time.time())
                self.counts["dropped"] += int(out.body.get("refused") or 0)
            except Exception as exc:  # noqa: BLE001 - the store cannot be written: counted, said once
                self.last_write_error = f"{type(exc).__name__}: {exc}"[:300]
                if not self.counts["write_errors"]:
                    log.warning("OpenClaw gateway %s: could not record %d event(s): %s", self.shown_url, len(batch),
                                exc)
                self.counts["write_errors"] += len(batch)

    # -- calls: resolve an approval, abort a run ------------------------------------------------

    def _redact(self, text: str) -> str:
        """``text`` (a gateway's error may quote what it was sent) without the token in it, or any part of
        it of MASK_SHORTEST characters or more (settings.mask)."""
        return settings.mask(text, self._token)

    def _shown(self, text: str, limit: int) -> str:
        """The gateway's words as status, doctor, an error and the log show them: the token masked first,
        in the whole text, then one clean line of at most ``limit`` characters (a cut before the mask
        would leave the token's head, which no longer matches it), then masked again (cleaning cannot
        put a token back together: it only replaces characters)."""
        return self._redact(one_line(frames.clean_text(self._redact(text), max(1000, limit * 4)) or "", limit))

    def offers(self, method: str) -> bool:
        """Whether the gateway offers ``method`` (when its hello said what it offers)."""
        return self.methods is None or method in self.methods

    async def call(self, method: str, params: dict[str, Any], timeout: float = CALL_TIMEOUT_S) -> Any:
        """Send one request and wait for its answer: the payload, or GatewayError with the gateway's message."""
        ws = self.ws
        if ws is None or self.state_name != CONNECTED:
            raise GatewayError(f"not connected to the OpenClaw gateway ({self.last_error or self.state_name})")
        req_id = str(uuid.uuid4())
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.calls[req_id] = fut
        try:
            await ws.send(json.dumps({"type": "req", "id": req_id, "method": method, "params": params}))
            doc = await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise GatewayError(f"the gateway did not answer {method} within {timeout:g} s") from None
        except WebSocketException as exc:
            raise GatewayError(f"the connection to the gateway ended: {exc}") from None
        finally:
            self.calls.pop(req_id, None)
        if not doc.get("ok"):
            error = doc.get("error")
            code = error.get("code") if isinstance(error, dict) and isinstance(error.get("code"), str) else None
            raise GatewayError(self._shown(_error_text(error), 300), code=code, reached=True)
        return doc.get("payload")

    async def stop(self) -> None:
        """At the server's shutdown: end the connection at once. The closing handshake would wait up to
        close_timeout for a gateway that is slow or hung; the server's stop must not wait on it."""
        ws = self.ws
        if ws is not None and ws.transport is not None:
            ws.transport.abort()
        await stop_background(self.task)
        await stop_background(self.writer)


def _error_text(error: Any) -> str:
    """The gateway's words for a refusal, whole: the caller masks the token in them, then makes them one
    clean line (Gateway._shown) for status, doctor, the board and the log, where a newline or a terminal
    escape from the gateway must not forge lines of our own."""
    if isinstance(error, dict):
        text = error.get("message") or error.get("code")
        return str(text) if text else json.dumps(error)
    return str(error) if error else "no reason given"
