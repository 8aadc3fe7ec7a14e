"""A test-side OpenClaw gateway: a real WebSocket server on loopback that speaks protocol 4's handshake and
replays frames (captured from the real gateway, tests/fixtures/openclaw/) to the operators connected to it.

It runs its own asyncio loop on a thread. The tests drive it from their thread: ``send`` pushes one event
frame to every connected operator, ``flood`` many, ``stop`` / ``start`` take it down and back up on the
same port. It answers requests as the real gateway does (``handlers``, by method), and keeps every request
it received (``requests``) and every connect's params (``connects``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection, serve

from support.ports import free_port
from support.repo import FIXTURES_ROOT

FIXTURES = FIXTURES_ROOT / "openclaw"
TOKEN = "test-gateway-token"
METHODS = ["health", "status", "sessions.subscribe", "chat.abort", "chat.send", "exec.approval.resolve",
           "exec.approval.request", "exec.approval.list"]


def fixture_frames(name: str) -> list[dict[str, Any]]:
    """The gateway's frames in a capture (tests/fixtures/openclaw/NAME.jsonl): what it sent, in order."""
    out = []
    for line in (FIXTURES / name).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if row.get("dir", "in") == "in":
                out.append(row["frame"])
    return out


class Gateway:
    """See the module docstring. ``methods``: what hello-ok says the gateway offers."""

    def __init__(self, token: str = TOKEN, methods: list[str] | None = None) -> None:
        self.port = free_port()
        self.token = token
        self.methods = list(METHODS if methods is None else methods)
        self.requests: list[dict[str, Any]] = []
        # What exec.approval.list answers: the payloads of pending requests ({id, request, createdAtMs, expiresAtMs}).
        self.pending: list[dict[str, Any]] = []
        self.connects: list[dict[str, Any]] = []
        self.clients: set[ServerConnection] = set()
        self.handlers: dict[str, Callable[[dict[str, Any]], tuple[bool, Any]]] = {
            "sessions.subscribe": lambda p: (True, {"subscribed": True}),
            "exec.approval.resolve": self._resolve,
            "exec.approval.list": lambda p: (True, list(self.pending)),
            "chat.abort": lambda p: (True, {"ok": True, "aborted": True, "runIds": [p.get("runId")]}),
        }
        self.on_connect: Callable[[ServerConnection], Any] | None = None
        # An error object to refuse every connect with (as a recorded refusal of the real gateway).
        self.refusal: dict[str, Any] | None = None
        self.seq = 0
        self.boot_id = "boot-1"  # what hello-ok says: a new one after stop/start is the gateway restarted
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: Any = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _run(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    # -- up and down --------------------------------------------------------------------------

    def start(self) -> Gateway:
        async def up() -> None:
            self.server = await serve(self._handle, "127.0.0.1", self.port, max_size=None, compression=None)
        self._run(up())
        return self

    def stop(self) -> None:
        async def down() -> None:
            if self.server is not None:
                self.server.close()
                await self.server.wait_closed()
                self.server = None
            self.clients.clear()
        self._run(down())

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def wait_clients(self, n: int = 1, timeout: float = 15.0) -> None:
        end = time.time() + timeout
        while len(self.clients) < n:
            if time.time() > end:
                raise AssertionError(f"no operator connected to the test gateway within {timeout} s"
                                     f" (connects: {self.connects})")
            time.sleep(0.05)

    # -- the protocol -------------------------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        await ws.send(json.dumps({"type": "event", "event": "connect.challenge",
                                  "payload": {"nonce": "n-1", "ts": int(time.time() * 1000)}}))
        try:
            req = json.loads(await ws.recv())
        except Exception:  # noqa: BLE001 - a client that went away
            return
        params = req.get("params") or {}
        self.connects.append(params)
        problem = None
        if req.get("method") != "connect":
            problem = "first request must be connect"
        elif not (params.get("minProtocol", 0) <= 4 <= params.get("maxProtocol", 0)):
            problem = "protocol mismatch"
        elif (params.get("client") or {}).get("id") != "gateway-client" or \
                (params.get("client") or {}).get("mode") != "backend":
            problem = "invalid client"
        elif (params.get("auth") or {}).get("token") != self.token:
            problem = "unauthorized: gateway token mismatch"
        if problem or self.refusal:
            await ws.send(json.dumps({"type": "res", "id": req.get("id"), "ok": False,
                                      "error": self.refusal or {"code": "INVALID_REQUEST", "message": problem}}))
            await ws.close()
            return
        await ws.send(json.dumps({"type": "res", "id": req.get("id"), "ok": True, "payload": {
            "type": "hello-ok", "protocol": 4, "server": {"version": "test", "bootId": self.boot_id},
            "features": {"methods": self.methods, "events": ["agent", "exec.approval.requested"]},
            "auth": {"method": "token", "role": "operator", "scopes": params.get("scopes")}}}))
        self.clients.add(ws)
        if self.on_connect is not None:
            await self.on_connect(ws)
        try:
            async for raw in ws:
                doc = json.loads(raw)
                self.requests.append(doc)
                handler = self.handlers.get(doc.get("method"))
                if handler is None:
                    answer = {"type": "res", "id": doc.get("id"), "ok": False,
                              "error": {"code": "INVALID_REQUEST", "message": f"unknown method {doc.get('method')}"}}
                else:
                    ok, payload = handler(doc.get("params") or {})
                    answer = {"type": "res", "id": doc.get("id"), "ok": ok}
                    # A refusal: a message (INVALID_REQUEST, as for an unknown approval id), or the whole error.
                    answer["payload" if ok else "error"] = payload if ok else (
                        payload if isinstance(payload, dict) else {"code": "INVALID_REQUEST", "message": payload})
                await ws.send(json.dumps(answer))
        except Exception:  # noqa: BLE001 - the operator went away
            pass
        finally:
            self.clients.discard(ws)

    def _resolve(self, params: dict[str, Any]) -> tuple[bool, Any]:
        self._settle(params.get("id"))
        return True, {"ok": True}

    def _settle(self, gid: Any) -> None:
        self.pending = [p for p in self.pending if p.get("id") != gid]

    def _track(self, frame: dict[str, Any] | str) -> None:
        """Keep ``pending`` as the real gateway does: a request it announces is listed until it is answered."""
        if isinstance(frame, str):
            if "exec.approval." not in frame:  # most raw frames are the malformed or huge ones tests send
                return
            try:
                frame = json.loads(frame)
            except (ValueError, RecursionError):
                return
        if not isinstance(frame, dict) or frame.get("type") != "event":
            return
        payload = frame.get("payload") if isinstance(frame.get("payload"), dict) else {}
        if frame.get("event") == "exec.approval.requested":
            self._settle(payload.get("id"))
            self.pending.append(payload)
        elif frame.get("event") == "exec.approval.resolved":
            self._settle(payload.get("id"))

    # -- pushing frames -------------------------------------------------------------------------

    def send(self, frame: dict[str, Any] | str) -> None:
        """One frame (a dict is sent as JSON with a rising broadcast seq) to every connected operator.
        As the real gateway, it lists a request it announces (exec.approval.list) until it is answered:
        an operator that connected a moment before hears the request, then the answer to its list call."""
        async def push() -> None:
            self._track(frame)
            if isinstance(frame, dict):
                self.seq += 1
                text = json.dumps({**frame, "seq": self.seq})
            else:
                text = frame
            for ws in list(self.clients):
                try:
                    await ws.send(text)
                except Exception:  # noqa: BLE001
                    pass
        self._run(push())

    def flood(self, text: str, count: int) -> None:
        """``count`` copies of one raw frame to every operator, as fast as the socket takes them."""
        async def push() -> None:
            for ws in list(self.clients):
                for _ in range(count):
                    try:
                        await ws.send(text)
                    except Exception:  # noqa: BLE001
                        return
        self._run(push(), timeout=120.0)

    def requests_for(self, method: str, where: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The requests for ``method`` received so far; with ``where``, only those whose params hold those
        items (a gateway shared by several tests: one test's own request, by its approval id or session)."""
        return [r for r in list(self.requests) if r.get("method") == method
                and all((r.get("params") or {}).get(k) == v for k, v in (where or {}).items())]

    def wait_request(self, method: str, timeout: float = 10.0, where: dict[str, Any] | None = None) -> dict[str, Any]:
        end = time.time() + timeout
        while time.time() < end:
            got = self.requests_for(method, where)
            if got:
                return got[-1]
            time.sleep(0.05)
        raise AssertionError(f"the test gateway got no {method} with {where or {}}: {self.requests}")


# -- frames shaped as the real gateway sends them (tests/fixtures/openclaw/README.md says where from) --------

def lifecycle(run: str, seq: int, phase: str, key: str = "agent:main:main", **data: Any) -> dict[str, Any]:
    return {"type": "event", "event": "agent", "payload": {
        "runId": run, "stream": "lifecycle", "data": {"phase": phase, **data}, "sessionKey": key, "agentId": "main",
        "sessionId": "sess-1", "seq": seq, "ts": int(time.time() * 1000)}}


def tool(run: str, seq: int, call: str, name: str, args: dict[str, Any], phase: str = "start",
         key: str = "agent:main:main") -> dict[str, Any]:
    data: dict[str, Any] = {"phase": phase, "name": name, "toolCallId": call}
    if phase == "start":
        data["args"] = args
    else:
        data.update(isError=False, result={"content": [{"type": "text", "text": "ok"}]})
    return {"type": "event", "event": "session.tool", "payload": {
        "runId": run, "stream": "tool", "data": data, "sessionKey": key, "agentId": "main", "seq": seq,
        "ts": int(time.time() * 1000), "session": {"key": key}}}


def approval(gid: str, command: str, key: str = "agent:main:main", wait_s: float = 120.0) -> dict[str, Any]:
    now = int(time.time() * 1000)
    return {"type": "event", "event": "exec.approval.requested", "payload": {
        "id": gid, "request": {"command": command, "cwd": "/tmp/work", "host": "gateway", "agentId": "main",
                               "sessionKey": key},
        "createdAtMs": now, "expiresAtMs": now + int(wait_s * 1000)}}


def resolved(gid: str, decision: str, by: str = "openclaw-cli") -> dict[str, Any]:
    return {"type": "event", "event": "exec.approval.resolved", "payload": {
        "id": gid, "decision": decision, "resolvedBy": by, "ts": int(time.time() * 1000)}}
