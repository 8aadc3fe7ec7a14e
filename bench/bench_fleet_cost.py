"""Budgets that hold fleet-wide: how fast spend on one host reaches another's budget guard, and what the
guard costs with fleet-wide budgets.

1. **Travel.** A command center C and hosts A and B (three throwaway AGENT_HOOKS_HOMEs, three `agent-hook
   server start` on loopback; A and B forward to C, so they subscribe and report). Per round: a task with
   a budget is created at C (CLI); once B holds it, A's PostToolUse executable prices a transcript line
   of that task past the budget. Timed: from that process's exit to the moment B's ``fleet_budgets`` row
   says the rest of the fleet spent it (A's report -> C's ledger -> C recounts -> B's long poll answers
   -> B's store). B's next PreToolUse reads that row.
2. **The guard.** ``budget.guard`` in process on a session of a task with a fleet-wide budget, against
   the same session with none (``--calls`` calls each, alternating).

``--rounds`` rounds (10) per run, ``--runs`` runs (3): p50 and p95 per run, then the median and the spread
(min-max) of each over the runs.

    .venv/bin/python bench/bench_fleet_cost.py [--rounds 10] [--runs 3] [--calls 300]
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
from datetime import UTC, datetime
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
        self.user = root / f"{name}-user"
        self.user.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "AGENT_HOOKS_HOME": str(self.home), "HOME": str(self.user), "TMUX": "",
                    "TMUX_PANE": "", "AGENT_HOOKS__SERVE__PORT": str(self.port), "AGENT_HOOKS__FLEET__HOST": name,
                    "AGENT_HOOKS__FORWARD__ENABLED": "false", **env}
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10, trust_env=False)

    def server(self, *args: str) -> None:
        subprocess.run([str(BIN / "agent-hook"), "server", *args], env=self.env, check=args[0] != "stop",
                       capture_output=True, timeout=60)

    def cli(self, *args: str) -> None:
        subprocess.run([str(BIN / "agent-hook"), *args], env=self.env, check=True, capture_output=True, timeout=60)

    def query(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        conn = sqlite3.connect(self.home / "store.db", timeout=10)
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            conn.close()

    def spend(self, sid: str, task: str, n: int) -> None:
        path = self.user / ".claude" / "projects" / "-work" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        line = {"type": "assistant", "requestId": f"r{n}", "timestamp": at, "uuid": f"u{n}", "sessionId": sid,
                "message": {"id": f"m{n}", "model": "claude-sonnet-4-5", "role": "assistant", "content": [],
                            "usage": {"input_tokens": 5000, "output_tokens": 1000}}}
        with path.open("a") as fh:
            fh.write(json.dumps(line) + "\n")
        body = {"session_id": sid, "hook_event_name": "PostToolUse", "cwd": "/work", "transcript_path": str(path),
                "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": f"t{n}", "tool_response": {}}
        subprocess.run([str(BIN / "agent-hook-post-tool-use")], input=json.dumps(body).encode(),
                       env={**self.env, "AGENT_HOOKS_TASK_ID": task}, check=True, capture_output=True, timeout=30)


def wait(fn, timeout: float = 20.0, step: float = 0.005):  # type: ignore[no-untyped-def]
    end = time.time() + timeout
    while time.time() < end:
        got = fn()
        if got:
            return got
        time.sleep(step)
    raise SystemExit("timed out")


def travel(c: Host, a: Host, b: Host, rounds: int, run: int) -> list[float]:
    out = []
    for i in range(rounds):
        task = f"T-{run}-{i}"
        c.cli("task", "create", task, "--budget-usd", "0.001")
        wait(lambda: b.query("SELECT 1 FROM fleet_budgets WHERE kind = 'task' AND key = ?", task))  # noqa: B023
        a.spend(f"a-{run}-{i}", task, run * 1000 + i)
        done = time.time()
        spent = "SELECT 1 FROM fleet_budgets WHERE key = ? AND elsewhere_usd >= limit_usd"
        wait(lambda: b.query(spent, task))  # noqa: B023
        out.append(time.time() - done)
    return out


def guard_times(calls: int) -> tuple[list[float], list[float]]:
    """budget.guard on a session of a task with a fleet-wide budget, and on one without, in process."""
    from agent_hooks import config as config_mod
    from agent_hooks import schema
    from agent_hooks.features import budget
    from agent_hooks.paths import Paths

    with tempfile.TemporaryDirectory(prefix="bench-guard-") as tmp:
        path = os.path.join(tmp, "store.db")
        schema.migrate(path)
        conn = sqlite3.connect(path, isolation_level=None)
        now = time.time()
        for sid, task in (("with", "T-fleet"), ("without", "T-none")):
            conn.execute("INSERT INTO sessions (session_id, state, first_seen_at, last_seen_at, task_id, cost_usd)"
                         " VALUES (?, 'live', ?, ?, ?, 0.5)", (sid, now, now, task))
        conn.execute("INSERT INTO fleet_budgets (kind, key, name, limit_usd, elsewhere_usd, day, center, updated_at)"
                     " VALUES ('task', 'T-fleet', 'task T-fleet''s fleet-wide budget', 100, 2, NULL, 'c', ?)", (now,))
        conn.execute("INSERT INTO meta (key, value) VALUES ('fleet.budgets.sync', ?)",
                     (json.dumps({"center": "c", "ok_at": now, "failed_at": None}),))
        env = {"AGENT_HOOKS_HOME": tmp}
        cfg = config_mod.load(Paths(env), env)
        with_fleet, without = [], []
        for _ in range(calls):
            for sid, bucket in (("with", with_fleet), ("without", without)):
                t0 = time.perf_counter()
                budget.guard(conn, sid, cfg, time.time())
                bucket.append(time.perf_counter() - t0)
        conn.close()
    return with_fleet, without


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    with_fleet, without = guard_times(args.calls)
    for name, values in (("budget.guard, a fleet-wide task budget", with_fleet), ("budget.guard, none", without)):
        print(f"{name}: median {statistics.median(values) * 1e3:.3f} ms, p95 {pct(values, 0.95) * 1e3:.3f} ms"
              f" ({args.calls} calls)")
    with tempfile.TemporaryDirectory(prefix="bench-fleet-cost-") as tmp:
        root = Path(tmp)
        c = Host(root, "center", {})
        c.server("start")
        joined = {"AGENT_HOOKS__FORWARD__ENABLED": "true",
                  "AGENT_HOOKS_INGEST_URL": f"http://127.0.0.1:{c.port}/api/hooks/ingest"}
        a, b = Host(root, "host-a", joined), Host(root, "host-b", joined)
        a.server("start")
        b.server("start")
        try:
            for h in (a, b):
                wait(lambda: (h.http.get("/api/fleet/status").json()["subscription"] or {}).get("connected"))  # noqa: B023
            p50s, p95s = [], []
            for run in range(args.runs):
                times = travel(c, a, b, args.rounds, run)
                p50s.append(statistics.median(times))
                p95s.append(pct(times, 0.95))
                print(f"run {run + 1}: A's spend -> B's budget row  p50 {p50s[-1] * 1000:6.1f} ms"
                      f"  p95 {p95s[-1] * 1000:6.1f} ms")
            print(f"A's spend -> B's budget row: p50 median {statistics.median(p50s) * 1000:.1f} ms (spread"
                  f" {min(p50s) * 1000:.1f}-{max(p50s) * 1000:.1f}), p95 median {statistics.median(p95s) * 1000:.1f} ms"
                  f" (spread {min(p95s) * 1000:.1f}-{max(p95s) * 1000:.1f}) over {args.runs} runs of {args.rounds}")
        finally:
            for h in (b, a, c):
                h.server("stop")


if __name__ == "__main__":
    main()
