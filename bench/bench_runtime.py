"""Hook latency against the floor of starting Python with json and sqlite3.

Runs the installed PreToolUse and PostToolUse executables on the captured
fixture payloads (each call with its own tool_use_id and input, as a real
session has), alternating with ``python -c "import json, sqlite3"`` from the
same interpreter, and prints each median wall time, the ratio to the floor and
the peak RSS of a hook call. Then the same with 1,000,000 tool-call rows in
the store.

    .venv/bin/python bench/bench_runtime.py [--runs 60] [--rows 1000000]
    .venv/bin/python bench/bench_runtime.py --guards [--runs 60]
    .venv/bin/python bench/bench_runtime.py --against OTHER/.venv/bin [--runs 200]

Targets (issue 2): hook median <= 1.25x floor; <= 1.1x that with 1M rows;
peak RSS <= 25 MiB.

``--guards`` (issue 4) measures PreToolUse with every guard doing its full
work: a session whose loop window is full (40 calls, polls among them), each
measured call a poll (`gh run view N`: the polling rule's two reads run too),
against the floor and against PreToolUse in a fresh session. Same target.

``--against BIN`` (a before/after check of a change on the hook path) runs
this checkout's PreToolUse and PostToolUse and those of another checkout's
venv (its ``bin`` directory: a clone of main, say), interleaved call by call,
each on its own store, and prints wall and CPU time (user + system) with the
spread (median, quartiles) and the median of the paired differences. A shared
machine is noisy: use many runs, and read the CPU rows, which load moves less.
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

import procs  # bench/procs.py: one timed process

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "claude-code-2.1.197"  # the pinned client (agent_hooks.claude_code.PINNED)
BIN = Path(sys.executable).parent


def run_once(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one process."""
    wall, usage = procs.run(argv, stdin, env)
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


def guard_payloads(session_id: str, i: int, run: int, output: str) -> tuple[bytes, bytes]:
    pre, post = (json.loads(x) for x in payloads(session_id, i))
    for p in (pre, post):
        p["tool_input"] = {"command": f"gh run view {run} --json status", "description": "check CI"}
    post["tool_response"]["stdout"] = output
    return json.dumps(pre).encode(), json.dumps(post).encode()


def measure_guards(env: dict[str, str], runs: int) -> dict[str, float]:
    """PreToolUse with a full loop window and a matching polling rule, vs floor and a fresh session."""
    # The rate limit would deny after 10 polls; the bench wants the allow path's full work.
    env = {**env, "AGENT_HOOKS__POLLING__MAX_CALLS": "1000000"}
    floor_argv = [sys.executable, "-c", "import json, sqlite3"]
    pre_argv = [str(BIN / "agent-hook-pre-tool-use")]
    post_argv = [str(BIN / "agent-hook-post-tool-use")]
    session_id = str(uuid.uuid4())
    window = 40
    for i in range(window):  # fill the window: 20 polls, each twice, same output (streak 2 < warn 3)
        a, b = guard_payloads(session_id, 20_000_000 + i, i % 20, "in_progress")
        run_once(pre_argv, a, env)
        run_once(post_argv, b, env)
    floor, full, fresh = [], [], []
    for i in range(runs):
        a, _ = guard_payloads(session_id, 30_000_000 + i, 1000 + i, "")
        floor.append(run_once(floor_argv, b"", env)[0])
        full.append(run_once(pre_argv, a, env)[0])
        a, _ = payloads(str(uuid.uuid4()), i)
        fresh.append(run_once(pre_argv, a, env)[0])
    conn = sqlite3.connect(os.path.join(env["AGENT_HOOKS_HOME"], "store.db"))
    decisions = conn.execute(
        "SELECT decision, count(*) FROM tool_calls WHERE session_id = ? GROUP BY decision", (session_id,)
    ).fetchall()
    conn.close()
    f, g, n = (statistics.median(x) * 1000 for x in (floor, full, fresh))
    print(f"\n[guards] {runs} runs each, alternating; window {window} full, every call a poll")
    print(f"  floor  python -c 'import json, sqlite3'  median {f:7.2f} ms")
    print(f"  PreToolUse, fresh session            median {n:7.2f} ms   ratio {n / f:5.3f}")
    print(f"  PreToolUse, full window + poll rule  median {g:7.2f} ms   ratio {g / f:5.3f} (target <= 1.25)"
          f"   {g / n:5.3f}x fresh")
    print(f"  decisions in the measured session: {dict(decisions)}")
    return {"floor": f, "full": g, "fresh": n}


def spread(xs: list[float]) -> str:
    """median [p25-p75] in ms."""
    q = statistics.quantiles(xs, n=4)
    return f"{statistics.median(xs) * 1000:7.2f} ms [{q[0] * 1000:6.2f} to {q[2] * 1000:6.2f}]"


def run_cpu(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one process."""
    wall, usage = procs.run(argv, stdin, env)
    return wall, procs.cpu_s(usage)


def measure_against(env: dict[str, str], other_env: dict[str, str], other_bin: Path, runs: int) -> None:
    """This checkout's PreToolUse/PostToolUse against another's, interleaved call by call: wall time,
    and CPU time (user + system), which a loaded machine moves far less than wall time."""
    trees = {"this": (BIN, env), "other": (other_bin, other_env)}
    times: dict[tuple[str, str, str], list[float]] = {
        (t, h, k): [] for t in trees for h in ("pre", "post") for k in ("wall", "cpu")}
    sessions = {t: str(uuid.uuid4()) for t in trees}
    for i in range(-3, runs):  # three warm-up calls each: store creation, page cache
        order = list(trees) if i % 2 else list(trees)[::-1]  # neither tree always goes first
        for tree in order:
            bin_dir, tree_env = trees[tree]
            a, b = payloads(sessions[tree], 10_000_000 + i)
            for hook, argv, data in (("pre", "agent-hook-pre-tool-use", a), ("post", "agent-hook-post-tool-use", b)):
                wall, cpu = run_cpu([str(bin_dir / argv)], data, tree_env)
                if i >= 0:
                    times[(tree, hook, "wall")].append(wall)
                    times[(tree, hook, "cpu")].append(cpu)
    print(f"\n[against] {runs} calls each, interleaved; this = {BIN}, other = {other_bin};"
          f" load average {os.getloadavg()[0]:.1f}")
    for hook in ("pre", "post"):
        for kind in ("wall", "cpu"):
            this, other = times[("this", hook, kind)], times[("other", hook, kind)]
            diffs = [(x - y) * 1000 for x, y in zip(this, other, strict=True)]  # one of each per call
            q = statistics.quantiles(diffs, n=4)
            print(f"  {hook:4} {kind:4}  this {spread(this)}   other {spread(other)}   "
                  f"this - other: median {statistics.median(diffs):+6.2f} ms [{q[0]:+6.2f} to {q[2]:+6.2f}]")


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
    ap.add_argument("--guards", action="store_true", help="Only the guards mode (PreToolUse, full window).")
    ap.add_argument("--against", type=Path, metavar="BIN",
                    help="Only a before/after: another checkout's venv bin directory, interleaved with this one.")
    args = ap.parse_args()
    # A regular install ships .pyc files; an editable one under PYTHONDONTWRITEBYTECODE
    # would recompile every module on every call, which is not what users run.
    import agent_hooks

    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(agent_hooks.__file__)], check=True)
    with tempfile.TemporaryDirectory(prefix="agent-hooks-bench-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
        env["AGENT_HOOKS_HOME"] = home
        subprocess.run([str(BIN / "agent-hook"), "init"], env=env, check=True, stdout=subprocess.DEVNULL)
        if args.guards:
            measure_guards(env, args.runs)
            return
        if args.against:
            other_bin = args.against.resolve()
            # Its own bytecode too (run from / so that `-c` does not find this checkout's package),
            # and its own store (its schema may differ).
            other_dir = subprocess.run([str(other_bin / "python"), "-c",
                                        "import agent_hooks, os; print(os.path.dirname(agent_hooks.__file__))"],
                                       check=True, capture_output=True, text=True, cwd="/").stdout.strip()
            subprocess.run([str(other_bin / "python"), "-m", "compileall", "-q", other_dir], check=True)
            other_env = {**env, "AGENT_HOOKS_HOME": os.path.join(home, "other")}
            subprocess.run([str(other_bin / "agent-hook"), "init"], env=other_env, check=True,
                           stdout=subprocess.DEVNULL)
            measure_against(env, other_env, other_bin, args.runs)
            return
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
