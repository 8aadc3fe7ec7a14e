"""The load test (no call whose payload was read is lost under load), shared by tests/hooks/test_load.py and bench/bench_load.py.

200 PostToolUse processes are started together on one session; their payloads
are written only once all have started (as when the client is itself
starved), while busy loops keep the cores full. A process that read its payload
must have its call recorded, at once or through the spool.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from support.scripts import BIN

UNREAD = b"before the payload was read"
LATE = b"past the deadline"


def _payload(session: str, cwd: str, n: int) -> bytes:
    return json.dumps({
        "session_id": session, "transcript_path": f"{cwd}/t.jsonl", "cwd": cwd, "permission_mode": "default",
        "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": f"echo {n}", "description": "load"},
        "tool_response": {"stdout": str(n), "stderr": "", "interrupted": False},
        "tool_use_id": f"toolu_load_{n:05d}", "duration_ms": 3,
    }).encode()


def _count(store: Path, sql: str, params: tuple[Any, ...] = ()) -> int:
    conn = sqlite3.connect(store, timeout=30)
    try:
        return int(conn.execute(sql, params).fetchone()[0])
    finally:
        conn.close()


def run_load(home: Path, processes: int = 200, busy_loops: int = 4, deadline_ms: int = 4000,
             settle_s: float = 120.0) -> dict[str, Any]:
    """One run against the store under ``home``; returns the counts and timings."""
    env = dict(os.environ, AGENT_HOOKS_HOME=str(home), AGENT_HOOKS_DEADLINE_MS=str(deadline_ms),
               AGENT_HOOKS__FORWARD__ENABLED="false")
    session = f"load-{time.time_ns()}"
    cwd = str(home)
    start = json.dumps({"session_id": session, "hook_event_name": "SessionStart", "cwd": cwd, "source": "startup"})
    subprocess.run([str(BIN / "agent-hook-session-start")], input=start.encode(), env=env, check=True,
                   capture_output=True, timeout=60)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy_loops)]
    procs: list[subprocess.Popen[bytes]] = []
    results: dict[int, tuple[bytes, bytes, int, float]] = {}
    try:
        for _ in range(processes):
            procs.append(subprocess.Popen([str(BIN / "agent-hook-post-tool-use")], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env))
        written = time.monotonic()
        for n, proc in enumerate(procs):
            assert proc.stdin is not None
            try:
                proc.stdin.write(_payload(session, cwd, n))  # a few hundred bytes: never blocks on the pipe
                proc.stdin.close()
            except BrokenPipeError:
                pass  # it gave up before its payload came (its deadline passed): counted as unread

        def wait(n: int, proc: subprocess.Popen[bytes]) -> None:
            assert proc.stdout is not None and proc.stderr is not None
            out = proc.stdout.read()
            err = proc.stderr.read()
            code = proc.wait()
            results[n] = (out, err, code, time.monotonic() - written)

        threads = [threading.Thread(target=wait, args=(n, p)) for n, p in enumerate(procs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    # Real life: the next hook call after the burst finds the spool and starts the replayer.
    nxt = json.dumps({"session_id": session, "hook_event_name": "Notification", "cwd": cwd,
                      "message": "load test over", "notification_type": "idle_prompt"})
    subprocess.run([str(BIN / "agent-hook-notification")], input=nxt.encode(), env=env, capture_output=True,
                   timeout=60)
    store = home / "store.db"
    spool_dir = home / "spool"
    read = [n for n, r in results.items() if UNREAD not in r[1]]
    end = time.monotonic() + settle_s

    def recorded_ids() -> set[str]:
        conn = sqlite3.connect(store, timeout=30)
        try:
            return {r[0] for r in conn.execute("SELECT tool_use_id FROM tool_calls WHERE session_id = ?", (session,))}
        finally:
            conn.close()

    while time.monotonic() < end:
        pending = any(p.stat().st_size for p in spool_dir.glob("*.jsonl")) if spool_dir.exists() else False
        if not pending and {f"toolu_load_{n:05d}" for n in read} <= recorded_ids():
            break
        time.sleep(0.25)
    ids = recorded_ids()
    rows = _count(store, "SELECT count(*) FROM tool_calls WHERE session_id = ?", (session,))
    spooled = sum(b"spooled" in r[1] for r in results.values())
    return {
        "processes": processes,
        "exited": len(results),
        "nonzero_exits": sum(r[2] != 0 for r in results.values()),
        "stdout": sum(bool(r[0]) for r in results.values()),
        "read": len(read),
        "recorded": sum(f"toolu_load_{n:05d}" in ids for n in read),
        "rows": rows,  # more rows than calls would mean a call recorded twice
        "unread": processes - len(read),
        "spooled": spooled,
        "late_answers": sum(LATE in r[1] for r in results.values()),
        "max_exit_after_write_s": round(max((r[3] for r in results.values()), default=0.0), 2),
        "internal_errors": sum(b"internal error" in r[1] for r in results.values()),
        "missing": {n: results[n][1].decode(errors="replace")[:300] for n in read if f"toolu_load_{n:05d}" not in ids},
    }
