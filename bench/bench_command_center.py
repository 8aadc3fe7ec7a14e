"""The command center: ingest throughput, and the time from a hook call to the board's update.

Starts `agent-hook server start` on a free loopback port with a throwaway AGENT_HOOKS_HOME.

1. Ingest throughput: ``--events`` POSTs of /api/hooks/ingest (contract bodies, each with its own
   Idempotency-Key, spread over ``--sessions`` agent- tmux names) on ``--connections`` kept-alive
   connections, from a minimal asyncio HTTP/1.1 client (so the client is not what is measured);
   once with no board open and once with a board (a WebSocket client) receiving every broadcast.
   Target: >= 2,000 events/s.
2. Hook call -> board update: ``--hooks`` runs of the installed PreToolUse executable for a local
   session while a WebSocket client listens; the time from starting the hook to the board's ``card``
   message for it (p50, p90), and from the hook's exit. Target: p50 <= 300 ms.
3. Ingest -> board: the same for a POST to /api/hooks/ingest (another host's event).

    .venv/bin/python bench/bench_command_center.py [--events 20000] [--hooks 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from websockets.sync.client import connect

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def _worker(port: int, bodies: list[bytes]) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ok = 0
    for i, body in enumerate(bodies):
        head = (f"POST /api/hooks/ingest HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                f"Idempotency-Key: {os.getpid()}-{id(bodies)}-{i}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        writer.write(head + body)
        status_line = await reader.readline()
        length = 0
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await reader.readexactly(length)
        ok += status_line.split()[1] == b"200"
    writer.close()
    return ok


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (its threads included)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(port: int, events: int, sessions: int, connections: int, tag: str) -> float:
    names = ["start", "tool_use", "to_review", "tool_use", "prompt_ready", "running"]
    per_conn: list[list[bytes]] = [[] for _ in range(connections)]
    for i in range(events):
        s = i % sessions
        body = {"tmux_session": f"agent-{tag}-{s}", "event": names[(i // sessions) % len(names)],
                "metadata": "Bash: ok in 3 ms"}
        per_conn[s % connections].append(json.dumps(body).encode())

    async def run() -> int:
        return sum(await asyncio.gather(*(_worker(port, b) for b in per_conn)))

    t0 = time.perf_counter()
    ok = asyncio.run(run())
    dt = time.perf_counter() - t0
    assert ok == events, f"{events - ok} events not answered 200"
    return events / dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--hooks", type=int, default=40)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-cc-"))
    port = free_port()
    env = {**os.environ, "AGENT_HOOKS_HOME": str(home), "AGENT_HOOKS__SERVE__PORT": str(port),
           "AGENT_HOOKS__FORWARD__ENABLED": "false", "HOME": str(home)}
    subprocess.run([str(BIN / "agent-hook"), "server", "start"], env=env, check=True, capture_output=True)
    try:
        print(f"server on 127.0.0.1:{port}, store {home / 'store.db'}")
        info = json.loads((home / "server.json").read_text())
        pid = int(info.get("worker_pid") or info["pid"])  # the process that serves (the supervisor only waits)
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the wall-clock rates share them)")
        throughput(port, 2000, args.sessions, args.connections, "warm")  # warm-up
        cpu0 = cpu_seconds(pid)
        rate = throughput(port, args.events, args.sessions, args.connections, "cold")
        cpu = cpu_seconds(pid) - cpu0
        print(f"ingest throughput, no board open:  {rate:8.0f} events/s  ({args.events} events,"
              f" {args.sessions} sessions, {args.connections} connections)  target >= 2000")
        print(f"  server CPU per event {cpu / args.events * 1000:.3f} ms: {args.events / cpu:.0f} events/s"
              " per CPU-second of the server (its capacity on one free core)")
        stop = threading.Event()
        received = [0]

        def board() -> None:
            with connect(f"ws://127.0.0.1:{port}/api/live", max_size=None) as ws:
                while not stop.is_set():
                    try:
                        ws.recv(timeout=0.2)
                        received[0] += 1
                    except TimeoutError:
                        pass

        viewer = threading.Thread(target=board, daemon=True)
        viewer.start()
        time.sleep(0.5)
        cpu0 = cpu_seconds(pid)
        rate = throughput(port, args.events, args.sessions, args.connections, "board")
        cpu = cpu_seconds(pid) - cpu0
        time.sleep(0.5)
        stop.set()
        viewer.join(5)
        print(f"ingest throughput, a board open:   {rate:8.0f} events/s  (it received {received[0]} messages);"
              f" {args.events / cpu:.0f} events per server CPU-second")

        hook_lat, exit_lat = [], []
        sid = "bench-local-session"
        hook_env = {**env, "AGENT_HOOKS_TMUX_SESSION": "agent-bench-local"}
        with connect(f"ws://127.0.0.1:{port}/api/live", max_size=None) as ws:
            ws.recv(timeout=10)
            for i in range(args.hooks):
                payload = {"session_id": sid, "transcript_path": str(home / "t.jsonl"), "cwd": str(home),
                           "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": f"toolu_{i}",
                           "tool_input": {"command": f"echo {i}", "description": "bench"}}
                t0 = time.perf_counter()
                proc = subprocess.Popen([str(BIN / "agent-hook-pre-tool-use")], stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, env=hook_env)
                proc.communicate(json.dumps(payload).encode())
                t_exit = time.perf_counter()
                while True:
                    msg = json.loads(ws.recv(timeout=10))
                    if msg["type"] == "card" and msg["card"]["id"] == sid and msg["card"]["tool_calls"] == i + 1:
                        break
                t1 = time.perf_counter()
                hook_lat.append((t1 - t0) * 1000)
                exit_lat.append((t1 - t_exit) * 1000)
                time.sleep(0.05)
            print(f"hook call -> board update:  p50 {pct(hook_lat, .5):6.1f} ms  p90 {pct(hook_lat, .9):6.1f} ms"
                  f"  (from the hook's exit: p50 {pct(exit_lat, .5):.1f} ms; {args.hooks} PreToolUse runs)"
                  "  target p50 <= 300 ms")
            import http.client

            ingest_lat = []
            conn = http.client.HTTPConnection("127.0.0.1", port)
            for i in range(args.hooks):
                body = json.dumps({"tmux_session": "agent-bench-remote", "event": "tool_use" if i % 2 else "to_review"})
                t0 = time.perf_counter()
                conn.request("POST", "/api/hooks/ingest", body, {"Content-Type": "application/json",
                                                                 "X-Agent-Hooks-Host": "other-host"})
                conn.getresponse().read()
                while True:
                    msg = json.loads(ws.recv(timeout=10))
                    if msg["type"] == "card" and msg["card"]["tmux_session"] == "agent-bench-remote":
                        break
                ingest_lat.append((time.perf_counter() - t0) * 1000)
            print(f"ingest -> board update:     p50 {pct(ingest_lat, .5):6.1f} ms  p90 {pct(ingest_lat, .9):6.1f} ms")
        print(f"(mean hook run incl. process start: {statistics.mean(hook_lat) - statistics.mean(exit_lat):.1f} ms)")
    finally:
        subprocess.run([str(BIN / "agent-hook"), "server", "stop"], env=env, capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
