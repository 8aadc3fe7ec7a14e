"""Hook latency against the floor of starting Python with json and sqlite3.

Runs the installed PreToolUse and PostToolUse executables on the captured
fixture payloads (each call with its own tool_use_id and input, as a real
session has), alternating with ``python -c "import json, sqlite3"`` from the
same interpreter, and prints each median wall time, the ratio to the floor and
the peak RSS of a hook call. Then the same with 1,000,000 tool-call rows in
the store.

    .venv/bin/python bench/bench_runtime.py [--runs 60] [--rows 1000000]

Targets (issue 2): hook median <= 1.25x floor; <= 1.1x that with 1M rows;
peak RSS <= 25 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "fixtures" / "claude-code-2.1.197"
BIN = Path(sys.executable).parent


def run_once(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    proc.stdin.write(stdin)
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {proc.returncode}")
    return wall, usage.ru_maxrss


def payloads(session_id: str, i: int) -> tuple[bytes, bytes]:
    pre = json.loads((FIXTURES / "PreToolUse-Bash.json").read_text())
    post = json.loads((FIXTURES / "PostToolUse-Bash.json").read_text())
    tool_use_id = f"toolu_bench_{i:06d}"
    command = f"echo step {i}"
    for p in (pre, post):
        p["session_id"] = session_id
        p["tool_use_id"] = tool_use_id
        p["tool_input"] = {"command": command, "description": f"step {i}"}
    post["tool_response"]["stdout"] = f"step {i}"
    return json.dumps(pre).encode(), json.dumps(post).encode()


def measure(env: dict[str, str], runs: int, label: str) -> dict[str, float]:
    floor_argv = [sys.executable, "-c", "import json, sqlite3"]
    pre_argv = [str(BIN / "agent-hook-pre-tool-use")]
    post_argv = [str(BIN / "agent-hook-post-tool-use")]
    session_id = str(uuid.uuid4())
    floor, pre, post, rss = [], [], [], []
    # Warm-up: the first call may create or migrate the store; page cache.
    for i in range(3):
        a, b = payloads(session_id, 10_000_000 + i)
        run_once(pre_argv, a, env)
        run_once(post_argv, b, env)
        run_once(floor_argv, b"", env)
    for i in range(runs):
        a, b = payloads(session_id, i)
        floor.append(run_once(floor_argv, b"", env)[0])
        w, r = run_once(pre_argv, a, env)
        pre.append(w)
        rss.append(r)
        w, r = run_once(post_argv, b, env)
        post.append(w)
        rss.append(r)
    f, p, q = (statistics.median(x) * 1000 for x in (floor, pre, post))
    print(f"\n[{label}] {runs} runs each, alternating")
    print(f"  floor  python -c 'import json, sqlite3'  median {f:7.2f} ms")
    print(f"  PreToolUse                           median {p:7.2f} ms   ratio {p / f:5.3f}")
    print(f"  PostToolUse                          median {q:7.2f} ms   ratio {q / f:5.3f}")
    print(f"  peak RSS of a hook call              {max(rss) / 1024:7.1f} MiB")
    return {"floor": f, "pre": p, "post": q, "rss_mib": max(rss) / 1024}


def seed(store: str, rows: int, sessions: int = 200) -> None:
    """Fill the store with ``rows`` finished tool calls spread over ``sessions`` sessions."""
    conn = sqlite3.connect(store)
    now = time.time()
    per = rows // sessions
    with conn:
        for s in range(sessions):
            sid = f"seed-{s:04d}"
            conn.execute(
                "INSERT OR IGNORE INTO sessions (session_id, state, first_seen_at, last_seen_at, tool_calls)"
                " VALUES (?, 'ended', ?, ?, ?)", (sid, now - 86400, now - 3600, per))
            conn.executemany(
                "INSERT INTO tool_calls (session_id, tool_use_id, tool_name, input_hash, output_hash, outcome,"
                " duration_ms, started_at, ended_at) VALUES (?, ?, 'Bash', ?, ?, 'success', 12, ?, ?)",
                ((sid, f"toolu_{s}_{i}", f"{(s * per + i):064x}", f"{i:064x}", now - 3600 + i, now - 3600 + i)
                 for i in range(per)),
            )
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    # A regular install ships .pyc files; an editable one under PYTHONDONTWRITEBYTECODE
    # would recompile every module on every call, which is not what users run.
    import agent_hooks

    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(agent_hooks.__file__)], check=True)
    with tempfile.TemporaryDirectory(prefix="agent-hooks-bench-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
        env["AGENT_HOOKS_HOME"] = home
        subprocess.run([str(BIN / "agent-hook"), "init"], env=env, check=True, stdout=subprocess.DEVNULL)
        empty = measure(env, args.runs, "empty store")
        t = time.perf_counter()
        seed(os.path.join(home, "store.db"), args.rows)
        print(f"\nseeded {args.rows:,} tool-call rows in {time.perf_counter() - t:.1f} s")
        full = measure(env, args.runs, f"{args.rows:,} tool-call rows")
    print("\nsummary")
    for name in ("pre", "post"):
        print(f"  {name:4}  empty {empty[name] / empty['floor']:.3f}x floor (target <= 1.25)   "
              f"full {full[name] / full['floor']:.3f}x floor, {full[name] / empty[name]:.3f}x empty (target <= 1.1)")
    print(f"  peak RSS {max(empty['rss_mib'], full['rss_mib']):.1f} MiB (target <= 25)")


if __name__ == "__main__":
    main()
