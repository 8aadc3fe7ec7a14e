"""How fast can a do-nothing answer be, per server stack? (issue 14: choose the stack)

Starts one do-nothing server per stack on loopback, then POSTs a PreToolUse-sized
JSON body to each, interleaved, one new TCP connection per request (as Claude
Code's axios does for a hook call), and prints the median and p99 round trip.

Stacks:
  stdlib      http.server.ThreadingHTTPServer (the floor for a Python answer)
  starlette-h11       Starlette under uvicorn, loop=asyncio, http=h11 (pure Python)
  starlette-httptools Starlette under uvicorn, loop=uvloop, http=httptools (C parsers)

    .venv/bin/python bench/bench_server_stack.py [--requests 400]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time

BODY = json.dumps({
    "session_id": "bench", "hook_event_name": "PreToolUse", "tool_name": "Bash",
    "tool_input": {"command": "echo hi", "description": "x" * 200}, "cwd": "/tmp",
    "transcript_path": "/tmp/t.jsonl", "tool_use_id": "toolu_1", "permission_mode": "default",
}).encode()

SERVER = r'''
import sys
stack, port = sys.argv[1], int(sys.argv[2])
if stack == "stdlib":
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
        def log_message(self, *a): pass
    ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
else:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route
    async def hook(request):
        await request.body()
        return Response(b"", media_type="application/json")
    app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
    loop, http = ("uvloop", "httptools") if stack == "starlette-httptools" else ("asyncio", "h11")
    uvicorn.run(app, host="127.0.0.1", port=port, loop=loop, http=http, log_level="warning", access_log=False)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(port: int) -> None:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server on {port} did not start")


def one(port: int) -> float:
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("POST", "/hook", BODY, {"content-type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status == 200, resp.status
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    args = ap.parse_args()
    stacks = ["stdlib", "starlette-h11", "starlette-httptools"]
    procs, ports = [], {}
    try:
        for stack in stacks:
            ports[stack] = free_port()
            procs.append(subprocess.Popen([sys.executable, "-c", SERVER, stack, str(ports[stack])]))
        for stack in stacks:
            wait_up(ports[stack])
        times: dict[str, list[float]] = {s: [] for s in stacks}
        for _ in range(20):  # warm up
            for stack in stacks:
                one(ports[stack])
        for _ in range(args.requests):
            for stack in stacks:
                times[stack].append(one(ports[stack]))
        print(f"{'stack':22} {'median ms':>10} {'p99 ms':>8}  ({args.requests} requests each, interleaved,"
              f" new connection per request)")
        for stack in stacks:
            t = sorted(times[stack])
            print(f"{stack:22} {statistics.median(t) * 1000:10.3f} {t[int(len(t) * 0.99) - 1] * 1000:8.3f}")
    finally:
        for p in procs:
            p.terminate()
            p.wait()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    raise SystemExit(main())
