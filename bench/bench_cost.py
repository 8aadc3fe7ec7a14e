"""What counting cost adds to PostToolUse, and what the budget guard adds to PreToolUse.

Runs the installed executables as Claude Code does, alternating, each call
after the transcript grew by one assistant line (with usage) and one tool
result line, as a real session's transcript grows:

* PostToolUse with cost counted vs the same with ``[cost] enabled = false``;
* PostToolUse when the transcript is 50 MB and already read up to its end
  (steady state), and the catch-up calls of a 50 MB transcript never read
  (each reads at most ``cost.max_read_bytes``);
* PreToolUse of a session whose task has a budget vs one with no budget.

Prints medians with the interquartile range and min..max over the runs.
On a loaded machine the process timings drown small differences, so the
same work is also timed in process (``--inproc``): the budget check alone,
one PostToolUse's read + record, and the imports the cost path adds, each
in a fresh interpreter.

    .venv/bin/python bench/bench_cost.py [--runs 40] [--mb 50]
    .venv/bin/python bench/bench_cost.py --inproc [--runs 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "claude-code-2.1.197"
BIN = Path(sys.executable).parent
POST = str(BIN / "agent-hook-post-tool-use")
PRE = str(BIN / "agent-hook-pre-tool-use")


def run_once(argv: list[str], stdin: bytes, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {proc.returncode}")
    return wall * 1000


def spread(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=4)
    return f"median {statistics.median(xs):7.2f} ms  IQR {q[0]:6.2f}..{q[2]:6.2f}  min..max {min(xs):6.2f}..{max(xs):6.2f}"


def assistant_line(i: int) -> bytes:
    return json.dumps({
        "type": "assistant", "requestId": f"req_{i}", "timestamp": "2026-11-25T10:00:00.000Z", "uuid": str(uuid.uuid4()),
        "message": {"id": f"msg_{i}", "model": "claude-sonnet-4-5", "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": "ls"}}],
                    "usage": {"input_tokens": 12, "output_tokens": 300, "cache_creation_input_tokens": 2000,
                              "cache_read_input_tokens": 40000,
                              "cache_creation": {"ephemeral_5m_input_tokens": 2000, "ephemeral_1h_input_tokens": 0}}},
    }).encode() + b"\n"


def result_line(i: int, size: int) -> bytes:
    return json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "x" * size}]}}).encode() + b"\n"


def post_payload(sid: str, transcript: Path, i: int) -> bytes:
    p = json.loads((FIXTURES / "PostToolUse-Bash.json").read_text())
    p.update(session_id=sid, transcript_path=str(transcript), tool_use_id=f"toolu_b_{i}",
             tool_input={"command": f"echo {i}"})
    return json.dumps(p).encode()


def pre_payload(sid: str, transcript: Path, i: int) -> bytes:
    p = json.loads((FIXTURES / "PreToolUse-Bash.json").read_text())
    p.update(session_id=sid, transcript_path=str(transcript), tool_use_id=f"toolu_b_{i}",
             tool_input={"command": f"echo {i}"})
    return json.dumps(p).encode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--inproc", action="store_true", help="Time the added work in process only.")
    args = ap.parse_args()
    if args.inproc:
        return inproc(args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        projects = home / ".claude" / "projects" / "-bench"
        projects.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
        env.update(HOME=str(home), AGENT_HOOKS_HOME=str(Path(tmp) / "state"), AGENT_HOOKS__FORWARD__ENABLED="false")
        off = {**env, "AGENT_HOOKS__COST__ENABLED": "false"}
        on_t, off_t = projects / "on.jsonl", projects / "off.jsonl"
        for t in (on_t, off_t):
            t.write_bytes(b"")
        for i in range(3):  # warm-up: store creation, page cache
            run_once(POST, post_payload("on", on_t, i), env)
            run_once(POST, post_payload("off", off_t, i), off)
        with_cost, without = [], []
        for i in range(args.runs):
            for t in (on_t, off_t):
                with t.open("ab") as fh:
                    fh.write(assistant_line(i) + result_line(i, 4000))
            with_cost.append(run_once(POST, post_payload("on", on_t, 100 + i), env))
            without.append(run_once(POST, post_payload("off", off_t, 100 + i), off))
        print(f"PostToolUse, transcript +2 lines per call, {args.runs} runs alternating")
        print(f"  cost off            {spread(without)}")
        print(f"  cost on             {spread(with_cost)}   (+{statistics.median(with_cost) - statistics.median(without):.2f} ms)")

        # A big transcript: tool results make up the bytes, as in real sessions.
        big = projects / "big.jsonl"
        target = args.mb * 1024 * 1024
        n = 0
        with big.open("wb") as fh:
            while fh.tell() < target:
                fh.write(assistant_line(10_000 + n) + result_line(10_000 + n, 60_000))
                n += 1
        catch_up = []
        while True:
            before = _offset(env, big)
            catch_up.append(run_once(POST, post_payload("big", big, 900_000 + len(catch_up)), env))
            if _offset(env, big) == big.stat().st_size or len(catch_up) > 50:
                break
        print(f"\n{args.mb} MB transcript ({n} messages) never read: {len(catch_up)} PostToolUse calls to catch up")
        print(f"  per call            {' '.join(f'{x:.1f}' for x in catch_up)} ms")
        steady = []
        for i in range(args.runs):
            with big.open("ab") as fh:
                fh.write(assistant_line(500_000 + i) + result_line(500_000 + i, 4000))
            steady.append(run_once(POST, post_payload("big", big, 950_000 + i), env))
        print(f"  steady state        {spread(steady)}")
        del before

        # PreToolUse: a session whose task has a budget vs a session with no budget.
        subprocess.run([str(BIN / "agent-hook"), "task", "create", "BUDGETED", "--budget-usd", "1000"], env=env,
                       check=True, capture_output=True)
        benv = {**env, "AGENT_HOOKS_TASK_ID": "BUDGETED"}
        for i in range(3):
            run_once(PRE, pre_payload("budgeted", on_t, i), benv)
            run_once(PRE, pre_payload("plain", on_t, i), env)
        budgeted, plain = [], []
        for i in range(args.runs):
            budgeted.append(run_once(PRE, pre_payload("budgeted", on_t, 100 + i), benv))
            plain.append(run_once(PRE, pre_payload("plain", on_t, 100 + i), env))
        print(f"\nPreToolUse, {args.runs} runs alternating")
        print(f"  no budget           {spread(plain)}")
        print(f"  task budget         {spread(budgeted)}   (+{statistics.median(budgeted) - statistics.median(plain):.2f} ms)")
    return 0


def inproc(runs: int) -> int:
    """The budget check, one incremental read + record, and the added imports, timed in process."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        projects = home / ".claude" / "projects" / "-bench"
        projects.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
        env.update(HOME=str(home), AGENT_HOOKS_HOME=str(Path(tmp) / "state"), AGENT_HOOKS__FORWARD__ENABLED="false")
        transcript = projects / "s.jsonl"
        transcript.write_bytes(b"")
        subprocess.run([str(BIN / "agent-hook"), "task", "create", "T", "--budget-usd", "1000"], env=env, check=True,
                       capture_output=True)
        run_once(POST, post_payload("s", transcript, 0), {**env, "AGENT_HOOKS_TASK_ID": "T"})
        # In a child interpreter with the bench's environment (paths, config) and nothing else imported.
        code = f"""
import json, os, statistics, sys, time
sys.path.insert(0, {str(Path(__file__).parent)!r})
from bench_cost import assistant_line, result_line
from agent_hooks import config as config_mod
from agent_hooks.paths import Paths
from agent_hooks.store import Store
cfg = config_mod.load(Paths(os.environ), os.environ)
store = Store(Paths(os.environ).store, 2500)
from agent_hooks.features import budget, cost
guard, read, record = [], [], []
for i in range({runs} * 10):
    t = time.perf_counter(); budget.guard(store.conn, "s", cfg, time.time()); guard.append((time.perf_counter() - t) * 1e3)
for i in range({runs}):
    with open({str(transcript)!r}, "ab") as fh:
        fh.write(assistant_line(1000 + i) + result_line(1000 + i, 4000))
    t = time.perf_counter(); b = cost.read_new(store.conn, {str(transcript)!r}, "s", None, os.environ, cfg, time.time())
    read.append((time.perf_counter() - t) * 1e3)
    t = time.perf_counter()
    with store.write() as conn:
        cost.record(conn, b, time.time())
    record.append((time.perf_counter() - t) * 1e3)
print(json.dumps({{"guard": guard, "read": read, "record": record}}))
"""
        out = json.loads(subprocess.run([sys.executable, "-c", code], env={**env, "AGENT_HOOKS_TASK_ID": "T"},
                                        check=True, capture_output=True, text=True).stdout)
        print(f"in process, {runs * 10} budget checks, {runs} reads and records (first read includes the price file)")
        print(f"  budget.guard (task budget set)       {spread(out['guard'])}")
        print(f"  cost.read_new (+2 lines, 1 priced)   {spread(out['read'])}")
        print(f"  cost.record (one write transaction)  {spread(out['record'])}")
        # What the cost path adds to PostToolUse's own imports: the transcript reader (path checks),
        # the pricing module and the price file; and what the budget guard adds to PreToolUse's.
        post = "import agent_hooks.events.post_tool_use"
        pre = "import agent_hooks.events.pre_tool_use"
        imports = {"PostToolUse's imports": post,
                   "+ transcript, pricing, price file": post + "; import agent_hooks.features.transcript,"
                   " agent_hooks.pricing; agent_hooks.pricing.data()",
                   "PreToolUse's imports": pre,
                   "+ persist (task budget's text)": pre + "; import agent_hooks.features.persist"}
        times: dict[str, list[float]] = {k: [] for k in imports}
        for _ in range(runs):
            for name, stmt in imports.items():
                times[name].append(run_once([sys.executable, "-c", stmt], b"", env))
        print(f"  fresh interpreter, {runs} runs alternating:")
        for name in imports:
            print(f"    {name:34} {spread(times[name])}")
    return 0


def _offset(env: dict[str, str], path: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(os.path.join(env["AGENT_HOOKS_HOME"], "store.db"))
    try:
        row = conn.execute("SELECT offset FROM cost_offsets WHERE path = ?", (str(path.resolve()),)).fetchone()
        return row[0] if row else 0
    finally:
        conn.close()


if __name__ == "__main__":
    raise SystemExit(main())
