"""Record what a real OpenClaw gateway sends an operator, frame by frame.

A small protocol-4 operator client (:class:`Recorder`): it answers the gateway's
``connect.challenge`` with ``connect`` as a trusted local backend
(``client.id = "gateway-client"``, ``mode = "backend"``, token auth, no device
signature: the gateway allows that on loopback), keeps every frame it sends or
receives, and can call methods (``exec.approval.resolve``, ``sessions.abort`` ...).
Run as a script it either listens to a running gateway for a while::

    python tests/e2e/capture_openclaw.py --url ws://127.0.0.1:P --token-env OC_TOKEN \\
        --seconds 30 --out frames.jsonl

or, with ``--scenarios DIR``, starts its own gateway (installed by ``openclaw_client.py``) and
the scripted model in a temporary HOME, plays every scenario of :data:`SCENARIOS` (each with its
own operator connection and scopes) and writes ``DIR/<scenario>.jsonl``: how
``tests/fixtures/openclaw/`` is made::

    python tests/e2e/capture_openclaw.py --scenarios tests/fixtures/openclaw

Secrets never reach a file: :func:`redact` replaces the token, nonces and other
credential-shaped values before anything is written.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import websockets

PROTOCOL = 4
CLIENT = {"id": "gateway-client", "version": "0.0.0-e2e", "platform": "linux", "mode": "backend"}
DEFAULT_SCOPES = ("operator.read", "operator.approvals")
# Keys whose values are credentials or one-time values (replaced in captures).
SECRET_KEYS = frozenset({"token", "nonce", "deviceToken", "recoveryScope", "signature", "publicKey",
                         "password", "apiKey", "secret"})
REDACTED = "<redacted>"


def redact(value: Any, secrets: Iterable[str] = (), paths: dict[str, str] | None = None) -> Any:
    """A copy of a frame with credential-shaped values and the given secret strings replaced, and
    each of ``paths``' keys (a temporary directory) rewritten as its value."""
    secrets = [s for s in secrets if s]
    paths = paths or {}

    def walk(v: Any, key: str | None = None) -> Any:
        if key in SECRET_KEYS and isinstance(v, str):
            return REDACTED
        if isinstance(v, dict):
            return {k: walk(item, k) for k, item in v.items()}
        if isinstance(v, list):
            return [walk(item) for item in v]
        if isinstance(v, str):
            for s in secrets:
                v = v.replace(s, REDACTED)
            for real, shown in paths.items():
                v = v.replace(real, shown)
        return v

    return walk(value)


class GatewayError(Exception):
    """The gateway answered a request with ``ok: false``; :attr:`error` is its error object."""

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        super().__init__(f"{method}: {error.get('code')}: {error.get('message')}")
        self.method = method
        self.error = error


class Recorder:
    """One operator connection that keeps every frame (direction, monotonic time, frame)."""

    def __init__(self, url: str, token: str, scopes: Iterable[str] = DEFAULT_SCOPES,
                 client: dict[str, Any] | None = None, protocol: int = PROTOCOL,
                 caps: Iterable[str] = ("tool-events", "exec-approvals")) -> None:
        self.url = url
        self.token = token
        self.scopes = list(scopes)
        self.client = dict(client or CLIENT)
        self.protocol = protocol
        self.caps = list(caps)
        self.frames: list[dict[str, Any]] = []  # {"dir": "in"|"out", "t": float, "frame": {...}}
        self.hello: dict[str, Any] | None = None
        self.closed: tuple[int | None, str] | None = None
        self._ws: Any = None
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    # -- connection ------------------------------------------------------------------
    async def connect(self) -> dict[str, Any]:
        """Open the socket, answer the challenge; the ``res`` frame of ``connect`` (ok or not)."""
        self._ws = await websockets.connect(self.url, max_size=None, open_timeout=10)
        challenge = json.loads(await asyncio.wait_for(self._ws.recv(), 10))
        self._keep("in", challenge)
        params = {"minProtocol": self.protocol, "maxProtocol": self.protocol, "client": self.client,
                  "role": "operator", "scopes": self.scopes, "caps": self.caps, "auth": {"token": self.token}}
        req = {"type": "req", "id": f"c{next(self._ids)}", "method": "connect", "params": params}
        self._keep("out", req)
        await self._ws.send(json.dumps(req))
        res = json.loads(await asyncio.wait_for(self._ws.recv(), 15))
        self._keep("in", res)
        if res.get("ok"):
            self.hello = res.get("payload")
            self._reader = asyncio.create_task(self._read())
        return res

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, 5)
            except (TimeoutError, Exception):  # noqa: BLE001 - closing anyway
                self._reader.cancel()

    async def __aenter__(self) -> Recorder:
        res = await self.connect()
        if not res.get("ok"):
            raise GatewayError("connect", res.get("error") or {})
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def _keep(self, direction: str, frame: dict[str, Any]) -> None:
        self.frames.append({"dir": direction, "t": time.monotonic(), "frame": frame})
        self._changed.set()

    async def _read(self) -> None:
        try:
            async for raw in self._ws:
                frame = json.loads(raw)
                self._keep("in", frame)
                if frame.get("type") == "res":
                    fut = self._pending.pop(str(frame.get("id")), None)
                    if fut is not None and not fut.done():
                        fut.set_result(frame)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.closed = (self._ws.close_code, self._ws.close_reason or "")
            self._changed.set()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("gateway closed the connection"))

    # -- requests and events ---------------------------------------------------------------
    async def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> dict[str, Any]:
        """Send one request; its whole ``res`` frame (check ``ok`` yourself)."""
        rid = f"r{next(self._ids)}"
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        req = {"type": "req", "id": rid, "method": method, "params": params or {}}
        self._keep("out", req)
        await self._ws.send(json.dumps(req))
        return await asyncio.wait_for(fut, timeout)

    async def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> Any:
        """A request's payload; :class:`GatewayError` when the gateway refuses it."""
        res = await self.request(method, params, timeout)
        if not res.get("ok"):
            raise GatewayError(method, res.get("error") or {})
        return res.get("payload")

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """Received event frames, optionally only those named ``name``."""
        return [f["frame"] for f in self.frames
                if f["dir"] == "in" and f["frame"].get("type") == "event"
                and (name is None or f["frame"].get("event") == name)]

    async def wait_for(self, predicate: Any, timeout: float = 30) -> dict[str, Any]:
        """The first received event frame ``predicate(frame)`` accepts, waiting up to ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            for frame in self.events():
                if predicate(frame):
                    return frame
            if self.closed is not None:
                raise ConnectionError(f"gateway closed the connection {self.closed}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no matching event within {timeout} s; got "
                                   f"{sorted({str(f.get('event')) for f in self.events()})}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                pass

    def dump(self, path: Path, secrets: Iterable[str] = (), paths: dict[str, str] | None = None) -> None:
        """Write the frames, redacted, one JSON object a line (time relative to the first frame)."""
        secrets = [self.token, *secrets]
        t0 = self.frames[0]["t"] if self.frames else 0.0
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as out:
            for f in self.frames:
                out.write(json.dumps({"dir": f["dir"], "t": round(f["t"] - t0, 3),
                                      "frame": redact(f["frame"], secrets, paths)}) + "\n")


# -- scenarios -----------------------------------------------------------------------------------
READ = ("operator.read", "operator.approvals")
ADMIN = ("operator.read", "operator.approvals", "operator.admin")
WRITE = ("operator.read", "operator.approvals", "operator.write")
SHOWN_HOME = "/home/dev"  # the temporary HOME as the fixtures show it


class Scene:
    """What a scenario has at hand: the gateway, the model, the recorder (already connected)."""

    def __init__(self, gateway: Any, model: Any, rec: Recorder) -> None:
        self.gateway, self.model, self.rec = gateway, model, rec

    async def turn(self, session_key: str, message: str = "Go on.", timeout: float = 120) -> tuple[int, str]:
        from openclaw_gateway import finish

        proc = self.gateway.agent(message, session_key)
        rc, out, err = await asyncio.to_thread(finish, proc, timeout)
        return rc, out + err

    def script(self, *turns: Any) -> None:
        self.model.set_script(list(turns))


def _exec(command: str) -> list[dict[str, Any]]:
    from model_server import tool_use

    return [tool_use("exec", {"command": command})]


def _say(words: str) -> list[dict[str, Any]]:
    from model_server import text

    return [text(words)]


async def _turn_unsubscribed(sc: Scene) -> None:
    sc.script(_exec("echo hello-from-tool"), _say("All done."))
    await sc.turn("agent:main:main")
    await asyncio.sleep(1)


async def _turn_subscribed(sc: Scene) -> None:
    await sc.rec.call("sessions.subscribe", {})
    sc.script(_exec("echo hello-two"), _say("All done two."))
    await sc.turn("agent:main:main")
    await asyncio.sleep(1)


async def _approval_without_admin(sc: Scene) -> None:
    await sc.rec.call("sessions.subscribe", {})
    sc.script(_exec("echo approved-run"), _say("Approved done."))
    await sc.turn("agent:gated:capture-approval")  # denied at once: no operator may see the request
    await asyncio.sleep(1)


async def _approval_allow(sc: Scene) -> None:
    await sc.rec.call("sessions.subscribe", {})
    sc.script(_exec("echo approved-run"), _say("Approved done."))
    proc = sc.gateway.agent("Go on.", "agent:gated:capture-approval")
    ev = await sc.rec.wait_for(lambda f: f.get("event") == "exec.approval.requested", 90)
    await sc.rec.request("exec.approval.resolve", {"id": ev["payload"]["id"], "decision": "allow-once"})
    await sc.rec.request("exec.approval.resolve", {"id": ev["payload"]["id"], "decision": "deny"})
    from openclaw_gateway import finish

    await asyncio.to_thread(finish, proc)
    await asyncio.sleep(1)


async def _approval_deny(sc: Scene) -> None:
    await sc.rec.call("sessions.subscribe", {})
    sc.script(_exec("echo main-free"), _say("ok main"))
    await sc.turn("agent:main:capture-free")
    sc.script(_exec("echo gated-run"), _say("ok gated"))
    proc = sc.gateway.agent("Go on.", "agent:gated:capture-deny")
    ev = await sc.rec.wait_for(lambda f: f.get("event") == "exec.approval.requested", 90)
    await sc.rec.request("exec.approval.resolve", {"id": ev["payload"]["id"], "decision": "deny"})
    from openclaw_gateway import finish

    await asyncio.to_thread(finish, proc)
    await asyncio.sleep(1)


def _held(gate: Any, then: list[dict[str, Any]]) -> Any:
    def turn(body: dict[str, Any]) -> list[dict[str, Any]]:
        gate.wait(60)
        return then
    return turn


async def _abort(sc: Scene, session_key: str) -> None:
    import threading

    from openclaw_gateway import finish

    await sc.rec.call("sessions.subscribe", {})
    gate = threading.Event()
    sc.script(_exec("echo started; sleep 30; echo finished"), _held(gate, _say("Slept.")))
    proc = sc.gateway.agent("Go on.", session_key)
    try:
        if session_key.startswith("agent:gated:"):  # the command waits for this operator's answer first
            ev = await sc.rec.wait_for(lambda f: f.get("event") == "exec.approval.requested", 90)
            await sc.rec.request("exec.approval.resolve", {"id": ev["payload"]["id"], "decision": "allow-once"})
        await sc.rec.wait_for(lambda f: f.get("event") == "session.tool" and f["payload"]["data"].get("phase") == "update", 90)
        await asyncio.sleep(0.5)
        start = await sc.rec.wait_for(lambda f: f.get("event") == "agent" and f["payload"].get("sessionKey") == session_key, 5)
        params = {"sessionKey": session_key, "runId": start["payload"]["runId"]}
        await sc.rec.request("chat.abort", params)
        if "operator.admin" in sc.rec.scopes:
            await sc.rec.wait_for(lambda f: f.get("event") == "agent" and f["payload"].get("stream") == "lifecycle"
                                  and f["payload"]["data"].get("phase") == "error", 40)
            await sc.rec.request("chat.abort", params)
    finally:
        gate.set()
        await asyncio.to_thread(finish, proc)
    await asyncio.sleep(1)


async def _abort_admin(sc: Scene) -> None:
    await _abort(sc, "agent:gated:capture-abort")


async def _abort_write_only(sc: Scene) -> None:
    await _abort(sc, "agent:main:capture-abort-write")


async def _scopes(sc: Scene) -> None:
    for method, params in [("chat.abort", {"sessionKey": "agent:main:main"}), ("sessions.abort", {"key": "agent:main:main"}),
                           ("exec.approval.resolve", {"id": "nope", "decision": "deny"}), ("exec.approval.list", {})]:
        await sc.rec.request(method, params)


async def _shutdown(sc: Scene) -> None:
    await asyncio.to_thread(sc.gateway.stop)
    for _ in range(100):
        if sc.rec.closed is not None:
            break
        await asyncio.sleep(0.1)


# name -> (scopes, caps, what it does); the last one stops the gateway.
SCENARIOS: dict[str, tuple[tuple[str, ...], tuple[str, ...], Any]] = {
    "turn-tool-unsubscribed": (READ, ("tool-events",), _turn_unsubscribed),
    "turn-tool-subscribed": (READ, ("tool-events",), _turn_subscribed),
    "approval-without-admin-denied": (READ, ("tool-events", "exec-approvals"), _approval_without_admin),
    "approval-allow-then-second-resolve": (ADMIN, ("tool-events", "exec-approvals"), _approval_allow),
    "approval-deny-per-agent": (ADMIN, ("tool-events", "exec-approvals"), _approval_deny),
    "abort-running-exec": (ADMIN, ("tool-events", "exec-approvals"), _abort_admin),
    "abort-unauthorized-with-write": (WRITE, ("tool-events",), _abort_write_only),
    "scopes-read-approvals": (READ, ("tool-events",), _scopes),
    "scopes-admin": (ADMIN, ("tool-events",), _scopes),
    "shutdown": (READ, ("tool-events",), _shutdown),
}
# Handshakes the gateway refuses: (client, protocol).
REFUSED = {
    "connect-refused-protocol-3": (CLIENT, 3),
    "connect-refused-unknown-client-id": ({**CLIENT, "id": "agent-hooks"}, PROTOCOL),
    "connect-refused-unknown-mode": ({**CLIENT, "mode": "operator"}, PROTOCOL),
}
GATED_AGENTS = {"main": {}, "gated": {"tools": {"exec": {"mode": "ask"}}}}


async def _scenarios(out_dir: Path, only: list[str] | None) -> int:
    import tempfile

    import openclaw_client
    from model_server import ModelServer
    from openclaw_gateway import OpenClawGateway

    installed = openclaw_client.ensure_gateway()
    with tempfile.TemporaryDirectory(prefix="openclaw-capture-") as tmp:
        model = ModelServer().start()
        gateway = OpenClawGateway(installed, Path(tmp), model.url, agents=GATED_AGENTS)
        paths = {str(gateway.home): SHOWN_HOME}
        try:
            await asyncio.to_thread(gateway.start)
            for name, (client, protocol) in REFUSED.items():
                if only and name not in only:
                    continue
                rec = Recorder(gateway.url, gateway.token, client=client, protocol=protocol)
                try:
                    await rec.connect()
                finally:
                    await rec.close()
                rec.dump(out_dir / f"{name}.jsonl", paths=paths)
                print(f"{name}: {len(rec.frames)} frames")
            for name, (scopes, caps, play) in SCENARIOS.items():
                if only and name not in only:
                    continue
                rec = Recorder(gateway.url, gateway.token, scopes=scopes, caps=caps)
                try:
                    async with rec:
                        await play(Scene(gateway, model, rec))
                finally:
                    rec.dump(out_dir / f"{name}.jsonl", paths=paths)
                print(f"{name}: {len(rec.frames)} frames")
        finally:
            await asyncio.to_thread(gateway.stop)
            model.stop()
    return 0


async def _capture(args: argparse.Namespace) -> int:
    token = os.environ.get(args.token_env, "")
    if not token:
        print(f"${args.token_env} is empty", file=sys.stderr)
        return 2
    rec = Recorder(args.url, token, scopes=args.scope or DEFAULT_SCOPES)
    res = await rec.connect()
    if not res.get("ok"):
        rec.dump(Path(args.out))
        print(f"connect refused: {res.get('error')}", file=sys.stderr)
        return 1
    try:
        await asyncio.sleep(args.seconds)
    finally:
        await rec.close()
        rec.dump(Path(args.out))
    print(f"{len(rec.frames)} frames -> {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", metavar="DIR", help="start a gateway, play the scenarios, write DIR/*.jsonl")
    parser.add_argument("--only", action="append", help="with --scenarios: only this one (repeatable)")
    parser.add_argument("--url", help="ws://127.0.0.1:PORT")
    parser.add_argument("--token-env", default="OPENCLAW_GATEWAY_TOKEN", help="env var holding the token")
    parser.add_argument("--scope", action="append", help="operator scope (repeatable)")
    parser.add_argument("--seconds", type=float, default=30, help="how long to listen")
    parser.add_argument("--out", help="JSON-lines file to write")
    args = parser.parse_args(argv)
    if args.scenarios:
        here = Path(__file__).resolve().parent
        sys.path[:0] = [str(here), str(here.parent)]  # model_server, openclaw_gateway; tests/support
        return asyncio.run(_scenarios(Path(args.scenarios), args.only))
    if not args.url or not args.out:
        parser.error("--url and --out (or --scenarios DIR)")
    return asyncio.run(_capture(args))


if __name__ == "__main__":
    raise SystemExit(main())
