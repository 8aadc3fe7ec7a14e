"""Record what a real OpenClaw gateway sends an operator, frame by frame.

A small protocol-4 operator client (:class:`Recorder`): it answers the gateway's
``connect.challenge`` with ``connect`` as a trusted local backend
(``client.id = "gateway-client"``, ``mode = "backend"``, token auth, no device
signature: the gateway allows that on loopback), keeps every frame it sends or
receives, and can call methods (``exec.approval.resolve``, ``sessions.abort`` ...).
The e2e tier uses it as the gateway's second operator; run as a script it writes
the frames of one session to a JSON-lines file for ``tests/fixtures/openclaw/``::

    python tests/e2e/capture_openclaw.py --url ws://127.0.0.1:P --token-env OC_TOKEN \\
        --seconds 30 --out frames.jsonl

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


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a frame with credential-shaped values and the given secret strings replaced."""
    secrets = [s for s in secrets if s]

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
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - closing anyway
                self._reader.cancel()

    async def __aenter__(self) -> "Recorder":
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
            rcvd = self._ws.close_rcvd
            self.closed = (rcvd.code if rcvd else None, rcvd.reason if rcvd else "")
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
            except asyncio.TimeoutError:
                pass

    def dump(self, path: Path, secrets: Iterable[str] = ()) -> None:
        """Write the frames, redacted, one JSON object a line (time relative to the first frame)."""
        secrets = [self.token, *secrets]
        t0 = self.frames[0]["t"] if self.frames else 0.0
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as out:
            for f in self.frames:
                out.write(json.dumps({"dir": f["dir"], "t": round(f["t"] - t0, 3),
                                      "frame": redact(f["frame"], secrets)}) + "\n")


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
    parser.add_argument("--url", required=True, help="ws://127.0.0.1:PORT")
    parser.add_argument("--token-env", default="OPENCLAW_GATEWAY_TOKEN", help="env var holding the token")
    parser.add_argument("--scope", action="append", help="operator scope (repeatable)")
    parser.add_argument("--seconds", type=float, default=30, help="how long to listen")
    parser.add_argument("--out", required=True, help="JSON-lines file to write")
    return asyncio.run(_capture(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
