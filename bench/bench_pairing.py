"""What a paired host's credential costs the command center per request, against the owner on loopback.

Starts `agent-hook server start` on a free loopback port with a throwaway AGENT_HOOKS_HOME, pairs a host
(`agent-hook fleet pair --host`, traded at POST /api/fleet/pair), then sends ``--events`` ingest POSTs on
``--connections`` kept-alive connections, in alternating rounds: as the owner (its uid on loopback, no
credential) and as the paired host (``Authorization: Bearer ah1...``, looked up in the store on a pool
thread for every request). Prints, for each, the rate and the server's CPU per event (median of the
rounds, with the range).

    .venv/bin/python bench/bench_pairing.py [--events 5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_command_center import BIN, cpu_seconds, free_port  # noqa: E402


async def _worker(port: int, bodies: list[bytes], extra: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    ok = 0
    for i, body in enumerate(bodies):
        head = (f"POST /api/hooks/ingest HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                f"{extra}Idempotency-Key: {os.getpid()}-{id(bodies)}-{i}-{time.monotonic_ns()}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
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


def run(port: int, events: int, connections: int, extra: str, tag: str) -> float:
    per_conn: list[list[bytes]] = [[] for _ in range(connections)]
    for i in range(events):
        body = {"tmux_session": f"agent-{tag}-{i % 50}", "event": "tool_use", "metadata": "Bash: ok"}
        per_conn[i % connections].append(json.dumps(body).encode())

    async def go() -> int:
        return sum(await asyncio.gather(*(_worker(port, b, extra) for b in per_conn)))

    t0 = time.perf_counter()
    ok = asyncio.run(go())
    dt = time.perf_counter() - t0
    assert ok == events, f"{events - ok} of {events} not answered 200"
    return events / dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=5000)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-pairing-"))
    port = free_port()
    env = {**os.environ, "AGENT_HOOKS_HOME": str(home), "AGENT_HOOKS__SERVE__PORT": str(port),
           "AGENT_HOOKS__FORWARD__ENABLED": "false", "HOME": str(home), "AGENT_HOOKS__FLEET__HOST": "center"}
    subprocess.run([str(BIN / "agent-hook"), "server", "start"], env=env, check=True, capture_output=True)
    try:
        import httpx

        code = json.loads(subprocess.run([str(BIN / "agent-hook"), "fleet", "pair", "--host", "bench-host", "--json"],
                                         env=env, check=True, capture_output=True, text=True).stdout)["code"]
        credential = httpx.post(f"http://127.0.0.1:{port}/api/fleet/pair", json={"code": code},
                                trust_env=False).json()["credential"]
        info = json.loads((home / "server.json").read_text())
        pid = int(info.get("worker_pid") or info["pid"])
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the rates share them)")
        ways = {"owner on loopback (uid)": "X-Agent-Hooks-Host: bench-host\r\n",
                "paired host (credential)": f"Authorization: Bearer {credential}\r\n"}
        for extra in ways.values():
            run(port, 1000, args.connections, extra, "warm")
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in ways}
        for r in range(args.rounds):
            for name, extra in ways.items():
                cpu0 = cpu_seconds(pid)
                rate = run(port, args.events, args.connections, extra, f"r{r}")
                got[name].append((rate, (cpu_seconds(pid) - cpu0) / args.events * 1000))
        for name, results in got.items():
            rates, cpus = [x[0] for x in results], [x[1] for x in results]
            print(f"{name:26} {statistics.median(rates):7.0f} events/s [{min(rates):.0f} to {max(rates):.0f}]"
                  f"   server CPU {statistics.median(cpus):.3f} ms/event [{min(cpus):.3f} to {max(cpus):.3f}]")
    finally:
        subprocess.run([str(BIN / "agent-hook"), "server", "stop"], env=env, capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
