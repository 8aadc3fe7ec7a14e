"""What the front door (agent_hooks.server.access.front_door) costs each request of the server.

Every http and WebSocket request passes the door before its route. On the path Claude Code's
hook calls take (no Origin, a loopback Host) it is one pass over the headers and one set
lookup. This times, in one process, with the spread over runs:

* ``door``: ``front_door(state, scope)`` alone, on the headers a hook call carries
  (Host, Content-Type, User-Agent, Accept, Content-Length and the seven session headers);
* ``app, door on`` / ``app, door off``: the whole ASGI app (FastPath, then the route) answering
  ``GET /health``, which does no store work, so the door's share is not lost in a write;
  interleaved run by run so the machine's drift hits both alike;
* ``refused``: a cross-site request turned away (what a web page's POST costs the server), and a
  request whose Host is a rebound name (``127.0.0.1.evil.example``) turned away.

The server answers a hook call in about a millisecond (bench/bench_client.py --no-client);
the door must not add a measurable part of that.

    .venv/bin/python bench/bench_front_door.py [--runs 9] [--calls 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from agent_hooks import config as config_mod
from agent_hooks.paths import Paths
from agent_hooks.server import access, fastpath, local, peer
from agent_hooks.server.app import create_app


def hook_scope(port: int, origin: bytes | None = None, host: str = "127.0.0.1") -> dict[str, Any]:
    headers = [(b"host", f"{host}:{port}".encode()), (b"content-type", b"application/json"),
               (b"user-agent", b"axios/1.8.4"), (b"accept", b"application/json, text/plain, */*"),
               (b"content-length", b"1234")]
    headers += [(local.header_for(v).lower().encode(), b"") for v in local.SESSION_ENV]
    if origin is not None:
        headers.append((b"origin", origin))
    return {"type": "http", "method": "GET", "path": "/health", "raw_path": b"/health", "query_string": b"",
            "root_path": "", "scheme": "http", "http_version": "1.1", "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", port), "headers": headers, peer.SCOPE_KEY: os.geteuid()}


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):7.3f} us  (min {min(values):.3f}, max {max(values):.3f})"


async def time_app(app: Any, scope: dict[str, Any], calls: int) -> float:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        return None

    began = time.perf_counter()
    for _ in range(calls):
        await app(dict(scope), receive, send)
    return (time.perf_counter() - began) / calls * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="agent-hooks-bench-door-")
    env = {"AGENT_HOOKS_HOME": root, "HOME": root, "AGENT_HOOKS__FORWARD__ENABLED": "false"}
    paths = Paths(env)
    config, _ = config_mod.load_lenient(paths, env)
    port = 47821
    app = create_app(paths, config, env, port=port)
    state = app.state.server
    bare = fastpath.FastPath(app.app, state.fast_exact, state.fast_prefixes)  # the same app, no door
    scope = hook_scope(port)
    evil = hook_scope(port, b"http://evil.example")
    rebound = hook_scope(port, host="127.0.0.1.evil.example")
    assert access.front_door(state, scope) is None and access.front_door(state, evil) is not None
    assert access.front_door(state, rebound) is not None
    door: list[float] = []
    refused: list[float] = []
    rebinding: list[float] = []
    with_door: list[float] = []
    without: list[float] = []
    for run in range(args.runs):
        began = time.perf_counter()
        for _ in range(args.calls):
            access.front_door(state, scope)
        door.append((time.perf_counter() - began) / args.calls * 1e6)
        began = time.perf_counter()
        for _ in range(args.calls):
            access.front_door(state, evil)
        refused.append((time.perf_counter() - began) / args.calls * 1e6)
        began = time.perf_counter()
        for _ in range(args.calls):
            access.front_door(state, rebound)
        rebinding.append((time.perf_counter() - began) / args.calls * 1e6)
        pair = [(app, with_door), (bare, without)]
        for target, out in (pair if run % 2 == 0 else pair[::-1]):
            out.append(asyncio.run(time_app(target, scope, args.calls // 4)))
    state.pool.shutdown(wait=False)
    print(f"{args.runs} runs, {args.calls} calls each (Python {sys.version.split()[0]})")
    print(f"door, a hook call's headers  {spread(door)}")
    print(f"door, a cross-site Origin    {spread(refused)}")
    print(f"door, a rebound Host         {spread(rebinding)}")
    print(f"app, door on  (GET /health)  {spread(with_door)}")
    print(f"app, door off (GET /health)  {spread(without)}")
    diffs = [a - b for a, b in zip(with_door, without, strict=True)]  # one of each per run
    print(f"door's share of a request    {spread(diffs)}  (a hook call: ~1,000 us)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
