"""Approval requests across two hosts on one machine: how fast a request reaches the command center,
and how fast an answer there reaches the host's store.

Two throwaway AGENT_HOOKS_HOMEs, two `agent-hook server start` on free loopback ports: A is the command
center, B forwards to it (and so subscribes and reports). Per request:

1. B's PermissionRequest executable (the installed console script) starts holding a request; its row's
   ``created_at`` in B's store is the start. The end: the first GET /api/approvals on A that lists it
   (A is polled every 5 ms).
2. POST /api/approvals/<id> {"decision": "allow"} on A; the start is just before the POST. The end is
   the row's ``answered_at`` in B's store (written by B's subscription, in the transaction that moves
   its cursor). The hook then answers the client (not timed here: it polls its row every 100 ms).

``--requests`` requests (20) per run, ``--runs`` runs (3): p50 and p95 per run, then the median and the
spread (min-max) of the p95 over the runs. Target: p95 <= 1 s for both.

    .venv/bin/python bench/bench_approvals_fleet.py [--requests 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


class Host:
    def __init__(self, root: Path, name: str, env: dict[str, str]) -> None:
        self.home = root / name
        self.port = free_port()
        user = root / f"{name}-user"
        user.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "AGENT_HOOKS_HOME": str(self.home), "HOME": str(user), "TMUX": "", "TMUX_PANE": "",
                    "AGENT_HOOKS__SERVE__PORT": str(self.port), "AGENT_HOOKS__FLEET__HOST": name,
                    "AGENT_HOOKS__FORWARD__ENABLED": "false", **env}
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10, trust_env=False)

    def server(self, *args: str) -> None:
        subprocess.run([str(BIN / "agent-hook"), "server", *args], env=self.env, check=args[0] != "stop",
                       capture_output=True, timeout=60)

    def row(self, approval_id: str | None = None) -> tuple[str, float, float | None] | None:
        conn = sqlite3.connect(self.home / "store.db", timeout=10)
        try:
            if approval_id is None:
                return conn.execute("SELECT id, created_at, answered_at FROM approvals WHERE state = 'pending'"
                                    " ORDER BY created_at DESC LIMIT 1").fetchone()
            return conn.execute("SELECT id, created_at, answered_at FROM approvals WHERE id = ?",
                                (approval_id,)).fetchone()
        except sqlite3.OperationalError:
            return None
        finally:
            conn.close()


def wait(fn, timeout: float = 15.0, step: float = 0.005):  # type: ignore[no-untyped-def]
    end = time.time() + timeout
    while time.time() < end:
        got = fn()
        if got:
            return got
        time.sleep(step)
    raise SystemExit("timed out")


def one_run(a: Host, b: Host, n: int, payload: dict[str, object]) -> tuple[list[float], list[float]]:
    up, down = [], []
    for i in range(n):
        body = json.dumps({**payload, "session_id": f"bench-{time.time_ns()}-{i}"}).encode()
        proc = subprocess.Popen([str(BIN / "agent-hook-permission-request")], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**b.env, "AGENT_HOOKS__APPROVALS__WAIT_S": "30"})
        assert proc.stdin is not None
        proc.stdin.write(body)
        proc.stdin.close()
        proc.stdin = None  # communicate() must not flush it again
        aid, created, _ = wait(lambda: b.row())
        # B023 is a false positive here: wait() calls these lambdas at once, in this iteration.
        wait(lambda: any(x["id"] == aid for x in a.http.get("/api/approvals").json()["approvals"]))  # noqa: B023
        up.append(time.time() - created)
        t0 = time.time()
        r = a.http.post(f"/api/approvals/{aid}", json={"decision": "allow"})
        assert r.status_code in (200, 202), r.text
        answered = wait(lambda: (b.row(aid) or (None, None, None))[2])  # noqa: B023
        down.append(answered - t0)
        proc.communicate(timeout=30)
    return up, down


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    fixture = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "claude-code-2.1.330"
    payload = json.loads((fixture / "permission_request_bash.json").read_text())
    with tempfile.TemporaryDirectory(prefix="bench-approvals-") as tmp:
        root = Path(tmp)
        a = Host(root, "host-a", {})
        a.server("start")
        b = Host(root, "host-b", {"AGENT_HOOKS__FORWARD__ENABLED": "true",
                                  "AGENT_HOOKS_INGEST_URL": f"http://127.0.0.1:{a.port}/api/hooks/ingest"})
        b.server("start")
        try:
            wait(lambda: (b.http.get("/api/fleet/status").json()["subscription"] or {}).get("connected"))
            p95_up, p95_down = [], []
            for run in range(args.runs):
                up, down = one_run(a, b, args.requests, payload)
                p95_up.append(pct(up, 0.95))
                p95_down.append(pct(down, 0.95))
                print(f"run {run + 1}: request on B -> listed on A  p50 {statistics.median(up) * 1000:6.1f} ms"
                      f"  p95 {p95_up[-1] * 1000:6.1f} ms | answer on A -> B's store"
                      f"  p50 {statistics.median(down) * 1000:6.1f} ms  p95 {p95_down[-1] * 1000:6.1f} ms")
            for what, values in (("request on B -> listed on A", p95_up), ("answer on A -> decision in B's store",
                                                                           p95_down)):
                print(f"{what}: p95 over {args.requests} requests, median of {args.runs} runs"
                      f" {statistics.median(values) * 1000:.1f} ms (spread {min(values) * 1000:.1f}"
                      f"-{max(values) * 1000:.1f} ms); target <= 1000 ms")
        finally:
            b.server("stop")
            a.server("stop")


if __name__ == "__main__":
    main()
