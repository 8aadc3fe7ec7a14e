"""Approvals: how fast a held request is listed and answered, and what the sessions that never ask pay.

    .venv/bin/python bench/bench_approvals.py latency [--runs 20]
    .venv/bin/python bench/bench_approvals.py hotpath [--runs 60] [--baseline-bin DIR | --baseline-src TREE]
    .venv/bin/python bench/bench_approvals.py sql [--runs 2000]

``latency``: for each transport (the executable, and the resident server), N
PermissionRequests one after the other: from the hook being started (or the
http request sent) to the request being listed in the store, and from an
answer committed to the store (what `agent-hook approve` does) to the hook's
answer reaching the client. Target: p95 <= 1 s for both.

``hotpath``: PreToolUse + PostToolUse executables per tool call, this tree's
against ``--baseline-bin`` (another checkout's venv bin, e.g. main's), run
alternately on the same payloads, each with a store of its own; no gate configured.
Prints both medians with their interquartile range and the difference.

``sql``: the statement the tool events run to withdraw dialogs answered at the
terminal (features/sessions.withdraw_dialogs) when nothing is pending, on a store
holding 10,000 answered requests: its median cost in microseconds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURES = ROOT / "tests" / "fixtures"
BIN = Path(sys.executable).parent
PERMISSION = json.loads((FIXTURES / "claude-code-2.1.330" / "permission_request_bash.json").read_text())


def spread(values: list[float], unit: str = "ms", scale: float = 1000.0) -> str:
    v = sorted(x * scale for x in values)
    q = statistics.quantiles(v, n=20) if len(v) >= 2 else v * 19
    p95 = q[18]
    iqr = statistics.quantiles(v, n=4) if len(v) >= 2 else [v[0], v[0], v[0]]
    return (f"p50 {statistics.median(v):.1f} {unit}, p95 {p95:.1f} {unit}, min {v[0]:.1f}, max {v[-1]:.1f},"
            f" IQR {iqr[0]:.1f}-{iqr[2]:.1f} (n={len(v)})")


def _env(home: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
    env.update({"AGENT_HOOKS_HOME": home, "AGENT_HOOKS__FORWARD__ENABLED": "false", **extra})
    return env


def _answer(store: str, aid: str) -> float:
    """What `agent-hook approve ID` writes (features/approvals.answer), in this process; its commit time."""
    from agent_hooks.features import approvals

    conn = sqlite3.connect(store, isolation_level=None, timeout=5)
    try:
        conn.execute("BEGIN IMMEDIATE")
        result = approvals.answer(conn, aid, "allow", by="bench", via="cli")
        conn.execute("COMMIT")
        assert result.answered, result
        return time.perf_counter()
    finally:
        conn.close()


def _wait_pending(store: str, after: set[str], timeout: float = 10) -> tuple[str, float]:
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        try:
            conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
            try:
                rows = conn.execute("SELECT id FROM approvals WHERE state = 'pending'").fetchall()
            finally:
                conn.close()
        except sqlite3.Error:
            rows = []
        for (aid,) in rows:
            if aid not in after:
                return aid, time.perf_counter()
        time.sleep(0.002)
    raise SystemExit("no pending request appeared")


def latency_command(runs: int) -> None:
    with tempfile.TemporaryDirectory() as home:
        env = _env(home, AGENT_HOOKS__APPROVALS__WAIT_S="30")
        store = os.path.join(home, "store.db")
        subprocess.run([str(BIN / "agent-hook"), "init"], env=env, capture_output=True, check=True)
        listed, answered, seen = [], [], set()
        for i in range(runs):
            payload = dict(PERMISSION, session_id=f"bench-{i}")
            started = time.perf_counter()
            proc = subprocess.Popen([str(BIN / "agent-hook-permission-request")], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(payload).encode())
            proc.stdin.close()
            aid, at = _wait_pending(store, seen)
            seen.add(aid)
            listed.append(at - started)
            committed = _answer(store, aid)
            out = proc.stdout.readline()
            answered.append(time.perf_counter() - committed)
            proc.wait()
            assert b'"allow"' in out, out
        print(f"command transport, hook started -> request listed: {spread(listed)}")
        print(f"command transport, answer committed -> client has the answer: {spread(answered)}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def latency_http(runs: int) -> None:
    with tempfile.TemporaryDirectory() as home:
        port = _free_port()
        env = _env(home, AGENT_HOOKS__APPROVALS__WAIT_S="30", AGENT_HOOKS__SERVE__PORT=str(port))
        store = os.path.join(home, "store.db")
        subprocess.run([str(BIN / "agent-hook"), "server", "start"], env=env, capture_output=True, check=True)
        try:
            listed, answered, seen = [], [], set()
            for i in range(runs):
                body = json.dumps(dict(PERMISSION, session_id=f"bench-{i}")).encode()
                got: list[Any] = []

                # body and got are passed in: a post still running after t.join(30) times out must not
                # read the next run's body or answer into its list.
                def post(body: bytes, got: list[Any]) -> None:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                    conn.request("POST", "/hooks/PermissionRequest", body, {"Content-Type": "application/json"})
                    got.append(conn.getresponse().read())
                    got.append(time.perf_counter())
                    conn.close()

                started = time.perf_counter()
                t = threading.Thread(target=post, args=(body, got))
                t.start()
                aid, at = _wait_pending(store, seen)
                seen.add(aid)
                listed.append(at - started)
                committed = _answer(store, aid)  # as the CLI does: the server sees it through the store
                t.join(30)
                answered.append(got[1] - committed)
                assert b'"allow"' in got[0], got
            print(f"http transport, request sent -> request listed: {spread(listed)}")
            print(f"http transport, answer committed (CLI, through the store) -> client has the answer: {spread(answered)}")
        finally:
            subprocess.run([str(BIN / "agent-hook"), "server", "stop"], env=env, capture_output=True)


def _argv(exe: str, side: tuple[str, Path]) -> list[str]:
    """How to run ``exe`` for one side: its bin dir's console script, or this interpreter on a source tree."""
    kind, where = side
    if kind == "bin":
        return [str(where / exe)]
    module = "agent_hooks.events." + exe.removeprefix("agent-hook-").replace("-", "_")
    return [sys.executable, "-c", f"import sys; from {module} import main; sys.exit(main())"]


def hotpath(runs: int, baseline: Path | None, baseline_src: Path | None = None) -> None:
    pre = json.loads((FIXTURES / "claude-code-2.1.197" / "PreToolUse-Bash.json").read_text())
    post = json.loads((FIXTURES / "claude-code-2.1.197" / "PostToolUse-Bash.json").read_text())
    sides: dict[str, tuple[str, Path]] = {"this tree": ("bin", BIN)}
    if baseline is not None:
        sides["baseline"] = ("bin", baseline)
    if baseline_src is not None:  # both sides the same way: this interpreter, each tree on PYTHONPATH
        sides = {"this tree": ("src", ROOT), "baseline": ("src", baseline_src)}
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(baseline_src / "agent_hooks")], check=True)
        baseline = baseline_src
    times: dict[str, list[float]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as root:
        envs = {}
        for name, side in sides.items():
            home = os.path.join(root, name.replace(" ", "-"))
            envs[name] = _env(home)
            if side[0] == "src":
                envs[name]["PYTHONPATH"] = str(side[1])
            init = [str(side[1] / "agent-hook")] if side[0] == "bin" else \
                [sys.executable, "-c", "import sys; from agent_hooks.cli import main; sys.exit(main(['init']))"]
            subprocess.run(init, env=envs[name], capture_output=True, check=True)
        for i in range(runs + 5):
            for name, side in (sides.items() if i % 2 else reversed(list(sides.items()))):
                tid = f"toolu_b{i:05d}"
                a = json.dumps(dict(pre, tool_use_id=tid, tool_input={"command": f"echo {i}"})).encode()
                b = json.dumps(dict(post, tool_use_id=tid, tool_input={"command": f"echo {i}"})).encode()
                start = time.perf_counter()
                for exe, data in (("agent-hook-pre-tool-use", a), ("agent-hook-post-tool-use", b)):
                    subprocess.run(_argv(exe, side), input=data, env=envs[name], capture_output=True, check=True)
                if i >= 5:  # warm-up
                    times[name].append(time.perf_counter() - start)
    for name, values in times.items():
        print(f"{name}: PreToolUse + PostToolUse per tool call: {spread(values)}")
    if baseline is not None:
        diff = [a - b for a, b in zip(times["this tree"], times["baseline"], strict=True)]  # one of each per run
        print(f"difference (this tree - baseline), paired: {spread(diff)}")


def sql(runs: int) -> None:
    from agent_hooks import schema
    from agent_hooks.features import sessions

    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "store.db")
        schema.migrate(path)
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN")
        for i in range(10_000):
            conn.execute("INSERT INTO approvals (id, session_id, kind, tool_name, state, created_at)"
                         " VALUES (?, ?, 'permission', 'Bash', 'allowed', ?)", (f"a{i}", f"s{i % 5}", float(i)))
        conn.execute("COMMIT")
        values = []
        for i in range(runs):
            conn.execute("BEGIN IMMEDIATE")
            # The hook's transaction has read the store already (sessions.touch) when this runs.
            conn.execute("SELECT count(*) FROM sessions").fetchone()
            start = time.perf_counter()
            sessions.withdraw_dialogs(conn, f"s{i % 5}", time.time(), "bench", "Bash")
            values.append(time.perf_counter() - start)
            conn.execute("COMMIT")
        print(f"withdraw_dialogs with nothing pending (10,000 answered rows, 2,000 in the session): {spread(values, 'us', 1e6)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("latency", "hotpath", "sql"))
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--baseline-bin", type=Path, default=None)
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="a checkout to compare with, run by this interpreter (e.g. a worktree of main)")
    args = parser.parse_args()
    if args.what == "latency":
        latency_command(args.runs or 20)
        latency_http(args.runs or 20)
    elif args.what == "hotpath":
        hotpath(args.runs or 60, args.baseline_bin, args.baseline_src)
    else:
        sql(args.runs or 2000)


if __name__ == "__main__":
    main()
