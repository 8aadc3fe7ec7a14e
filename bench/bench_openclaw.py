"""The OpenClaw gateway subscription under a flood: what it costs the hook routes.

    .venv/bin/python bench/bench_openclaw.py [--runs 5] [--frames 30000] [--probes 300]

Starts the resident server (`agent-hook server start`, a temporary AGENT_HOOKS_HOME) connected to the
test-side gateway of tests/support/openclaw.py on loopback. Each run, one thread sends PreToolUse hook
calls (a new connection each, as Claude Code does) one after the other while the gateway floods the
server with ``--frames`` assistant-text events of 2 KB; the same number of calls is also timed with the
gateway quiet. Prints, per condition, the median over runs of each run's p50 and p95, with the spread
(min-max over runs), and how many of the flood's frames the server read and dropped.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.center import Center  # noqa: E402
from support.openclaw import TOKEN, Gateway  # noqa: E402

CALL = {"hook_event_name": "PreToolUse", "session_id": "bench-oc", "tool_name": "Bash",
        "tool_input": {"command": "ls"}, "cwd": "/tmp", "transcript_path": "", "permission_mode": "default"}
NOISE = json.dumps({"type": "event", "event": "agent", "payload": {
    "runId": "r", "stream": "assistant", "data": {"text": "x" * 2000, "delta": "x"}, "sessionKey": "agent:main:main",
    "seq": 1}})


def probe(center: Center, n: int, stop: threading.Event | None = None) -> list[float]:
    times = []
    while len(times) < n and not (stop is not None and stop.is_set() and len(times) >= 20):
        t0 = time.perf_counter()
        status, _, _ = center.post(CALL)
        times.append((time.perf_counter() - t0) * 1000)
        assert status == 200
    return times


def pct(times: list[float], q: float) -> float:
    s = sorted(times)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--frames", type=int, default=30000)
    ap.add_argument("--probes", type=int, default=300)
    args = ap.parse_args()
    gw = Gateway().start()
    with tempfile.TemporaryDirectory() as tmp:
        center = Center(Path(tmp) / "home", env={"AGENT_HOOKS__OPENCLAW__URL": gw.url,
                                                  "AGENT_HOOKS_OPENCLAW_TOKEN": TOKEN}).start()
        try:
            gw.wait_clients()
            probe(center, 50)  # warm up: the store made, the routes' first calls paid
            rows: dict[str, list[tuple[float, float]]] = {"quiet": [], "flood": []}
            for _ in range(args.runs):
                quiet = probe(center, args.probes)
                rows["quiet"].append((pct(quiet, 0.5), pct(quiet, 0.95)))
                stop = threading.Event()
                got: list[float] = []
                t = threading.Thread(target=lambda got, stop: got.extend(probe(center, args.probes, stop)),
                                     args=(got, stop))  # this run's list and event, bound as it starts
                t.start()
                gw.flood(NOISE, args.frames)
                stop.set()
                t.join()
                rows["flood"].append((pct(got, 0.5), pct(got, 0.95)))
            st = center.http.get("/api/fleet/status").json()["openclaw"]
        finally:
            center.stop()
            gw.close()
    for name, runs in rows.items():
        p50s, p95s = [r[0] for r in runs], [r[1] for r in runs]
        print(f"{name:6s} p50 {statistics.median(p50s):6.2f} ms ({min(p50s):.2f}-{max(p50s):.2f}),"
              f"  p95 {statistics.median(p95s):6.2f} ms ({min(p95s):.2f}-{max(p95s):.2f})  over {len(runs)} runs")
    print(f"gateway frames: {args.frames * args.runs} sent, {st['events']} read, {st['dropped']} dropped unread,"
          f" {st['malformed']} malformed; the connection {st.get('state')} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
