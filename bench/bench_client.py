"""What a tool call costs under each transport, measured through the real Claude Code client.

Drives the real client (tests/e2e: scripted model on loopback, offline) through
20 Bash tool calls, in interleaved runs of four setups, each wiring PreToolUse
and PostToolUse only (the two hooks every tool call waits for):

  none           no hooks at all
  http-nothing   an http hook to a do-nothing Starlette/uvicorn server (the floor of an http hook)
  command        our executables (agent-hook-pre-tool-use / -post-tool-use) as command hooks
  http           our http transport: the resident server (agent-hook server), same handlers

and prints each setup's overhead per tool call against "none": the median
tool-call cycle (from one model request to the next, which spans one tool call
and its two hooks) less that of "none". The whole run's time is printed too,
but it carries the client's start-up (0.7-1.3 s here, varying by more than 20
tool calls' worth of hooks), so it is not what the targets are judged on.
Then the server's own answer time (p50/p99, as its /status reports it)
under 20 concurrent sessions sending PreToolUse/PostToolUse pairs: independent
sessions (what the target is judged on), then all in lockstep, then back to back.

    AGENT_HOOKS_CLAUDE_CACHE=/path/to/claude-cache AGENT_HOOKS_CLAUDE_VERSION=2.1.330 \\
        .venv/bin/python bench/bench_client.py [--runs 5] [--calls 20] [--sessions 20] [--pairs 50]

Targets (issue 14): http <= 2x http-nothing and <= 1/5 of command per tool call;
server p99 <= 5 ms under 20 concurrent sessions.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

import claude_client  # noqa: E402
from bench_server_stack import SERVER as NOTHING_SERVER  # noqa: E402
from model_server import ModelServer, text, tool_use  # noqa: E402

from agent_hooks import config as config_mod  # noqa: E402
from agent_hooks.wiring.entries import our_groups  # noqa: E402

BIN = Path(sys.executable).parent
SETUPS = ("none", "http-nothing", "command", "http")
TOOL_EVENTS = ("PreToolUse", "PostToolUse")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 15) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing answers on port {port}")


def settings_for(setup: str, nothing_port: int, our_port: int) -> dict[str, Any]:
    if setup == "none":
        return {}
    if setup == "http-nothing":
        entry = {"type": "http", "url": f"http://127.0.0.1:{nothing_port}/hook", "timeout": 10}
        return {"hooks": {e: [{"matcher": "*", "hooks": [entry]}] for e in TOOL_EVENTS}}
    cfg = config_mod.defaults()
    cfg["serve"]["port"] = our_port
    groups = our_groups(str(BIN), cfg, "command" if setup == "command" else "http")
    return {"hooks": {e: [groups[e]] for e in TOOL_EVENTS}}


def one_run(claude: Path, model: ModelServer, root: Path, setup: str, calls: int, env: dict[str, str],
            settings: dict[str, Any], cycles: list[float] | None = None) -> float:
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    turns: list[Any] = [[tool_use("Bash", {"command": f"echo {i}", "description": f"step {i}"},
                                  id=f"toolu_{setup.replace('-', '_')}_{i:02d}")] for i in range(calls)]
    model.set_script(turns + [[text("Done.")]])
    path = root / f"settings-{setup}.json"
    path.write_text(json.dumps(settings))
    cmd = [str(claude), "-p", "Run the steps.", "--settings", str(path), "--allowedTools", "Bash",
           "--output-format", "json"]
    seen = len(model.requests)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workspace, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    took = time.perf_counter() - start
    if cycles is not None:  # model request to model request: one tool call each, the client's start left out
        arrivals = sorted(r.at for r in model.requests[seen:] if r.kind == "main")
        cycles.extend(b - a for a, b in zip(arrivals, arrivals[1:]))
    result = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    if proc.returncode != 0 or result.get("result") != "Done." or model.remaining:
        raise SystemExit(f"{setup}: run failed (rc {proc.returncode}): {proc.stdout[-300:]} {proc.stderr[-300:]}")
    return took


def server_cmd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "agent-hook"), "server", *args], env=env, capture_output=True, text=True,
                          timeout=60, check=True)


def post(port: int, event: str, body: bytes) -> float:
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", f"/hooks/{event}", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    if resp.status != 200 or resp.getheader("X-Agent-Hooks-Problem"):
        raise SystemExit(f"{event}: {resp.status} {resp.getheader('X-Agent-Hooks-Problem')}")
    return time.perf_counter() - start


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (its threads included): far less sensitive to the
    machine's load than wall-clock time."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def concurrent_sessions(root: Path, sessions: int, pairs: int, tool_s: float, think_s: float,
                        lockstep: bool = False) -> None:
    """The server's own answer time with ``sessions`` sessions calling at once: each sends
    PreToolUse, waits ``tool_s`` (the tool runs), sends PostToolUse, waits ``think_s`` (the model).

    Sessions are independent, as agents are: each starts at a random point of its cycle and
    each pause varies by +-50 % (seeded). ``lockstep`` starts them all at once with fixed
    pauses instead, so their calls arrive in bursts of ``sessions`` at a time: the worst case."""
    home = root / f"concurrent-{tool_s}-{think_s}"
    port = free_port()
    env = {**os.environ, "AGENT_HOOKS_HOME": str(home), "AGENT_HOOKS__SERVE__PORT": str(port),
           "AGENT_HOOKS__FORWARD__ENABLED": "false"}
    subprocess.run([str(BIN / "agent-hook"), "init"], env=env, capture_output=True, check=True)
    server_cmd(env, "start")
    info = json.loads((home / "server.json").read_text())
    pid = int(info.get("worker_pid") or info["pid"])  # the process that serves (the supervisor only waits)
    rtts: list[float] = []
    lock = threading.Lock()

    def session(n: int) -> None:
        rng = random.Random(n)

        def pause(seconds: float) -> None:
            time.sleep(seconds if lockstep else seconds * rng.uniform(0.5, 1.5))

        mine = []
        if not lockstep:
            time.sleep(rng.uniform(0, tool_s + think_s))
        for i in range(pairs):
            base = {"session_id": f"bench-{n:02d}", "cwd": str(root), "transcript_path": str(root / "t.jsonl"),
                    "permission_mode": "default", "tool_name": "Bash", "tool_use_id": f"toolu_{n:02d}_{i:04d}",
                    "tool_input": {"command": f"echo {n} {i}", "description": "step"}}
            mine.append(post(port, "PreToolUse", json.dumps({**base, "hook_event_name": "PreToolUse"}).encode()))
            pause(tool_s)
            mine.append(post(port, "PostToolUse", json.dumps({
                **base, "hook_event_name": "PostToolUse",
                "tool_response": {"stdout": f"{n} {i}", "stderr": "", "interrupted": False}}).encode()))
            pause(think_s)
        with lock:
            rtts.extend(mine)

    try:
        threads = [threading.Thread(target=session, args=(n,)) for n in range(sessions)]
        cpu0 = cpu_seconds(pid)
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        cpu = cpu_seconds(pid) - cpu0
        st = json.loads(server_cmd(env, "status", "--json").stdout)
    finally:
        server_cmd(env, "stop")
    rtts.sort()
    n = len(rtts)
    pace = (f"tool {tool_s * 1000:.0f} ms between Pre and Post, {think_s * 1000:.0f} ms to the next call"
            + (", all in lockstep: bursts of one call per session at once" if lockstep
               else " (each +-50 %, sessions independent)")
            if tool_s or think_s else "back to back, no pause: saturation")
    print(f"\n[server under {sessions} concurrent sessions; {pace}]")
    print(f"  {n} requests ({pairs} Pre+Post pairs per session) in {wall:.1f} s = {n / wall:.0f} requests/s")
    print(f"  server's own answer time  p50 {st['p50_ms']:.2f} ms   p99 {st['p99_ms']:.2f} ms   (target p99 <= 5 ms)")
    print(f"  round trip from a client  p50 {rtts[n // 2] * 1000:.2f} ms   p99 {rtts[int(n * 0.99)] * 1000:.2f} ms"
          f"   (new connection per request, {sessions} client threads on this 2-core machine)")
    print(f"  server CPU per request {cpu / n * 1000:.3f} ms (user+system of the server process, threads"
          f" included): {n / cpu:.0f} requests per server CPU-second (its capacity on one free core)")
    print(f"  errors {st['requests'].get('problem', 0)}, past the deadline {st['requests'].get('timeout', 0)},"
          f" deferred from the event loop to a thread (store busy) {st['requests'].get('deferred', 0)};"
          f" load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="interleaved runs per setup")
    ap.add_argument("--calls", type=int, default=20, help="tool calls per run")
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=50, help="Pre+Post pairs per session in the concurrency part")
    ap.add_argument("--tool-ms", type=float, default=50, help="pause between a session's Pre and Post")
    ap.add_argument("--think-ms", type=float, default=200, help="pause before a session's next call")
    ap.add_argument("--no-client", action="store_true", help="only the concurrency part")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="agent-hooks-bench-client-"))
    procs: list[subprocess.Popen[bytes]] = []
    our_env: dict[str, str] = {}
    try:
        if not args.no_client:
            claude = claude_client.ensure_client()
            print(f"Claude Code {claude_client.version()}, {args.calls} Bash calls per run, {args.runs} interleaved"
                  f" runs per setup; hooks on {' + '.join(TOOL_EVENTS)} only")
            nothing_port, our_port = free_port(), free_port()
            procs.append(subprocess.Popen([sys.executable, "-c", NOTHING_SERVER, "starlette-httptools",
                                           str(nothing_port)]))
            home = root / "agent-hooks"
            our_env = {**os.environ, "AGENT_HOOKS_HOME": str(home), "AGENT_HOOKS__SERVE__PORT": str(our_port),
                       "AGENT_HOOKS__FORWARD__ENABLED": "false"}
            subprocess.run([str(BIN / "agent-hook"), "init"], env=our_env, capture_output=True, check=True)
            server_cmd(our_env, "start")
            wait_port(nothing_port)
            user_home = root / "home"
            user_home.mkdir()
            with ModelServer() as model:
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(user_home),
                       "TMPDIR": str(root), "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": model.url,
                       "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
                       "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "NO_PROXY": "127.0.0.1,localhost",
                       "AGENT_HOOKS_HOME": str(home), "AGENT_HOOKS__SERVE__PORT": str(our_port),
                       "AGENT_HOOKS__FORWARD__ENABLED": "false"}
                settings = {s: settings_for(s, nothing_port, our_port) for s in SETUPS}
                for setup in SETUPS:  # warm-up (disk caches, the server's first connections)
                    one_run(claude, model, root, setup, 2, env, settings[setup])
                times: dict[str, list[float]] = {s: [] for s in SETUPS}
                cycles: dict[str, list[float]] = {s: [] for s in SETUPS}
                for r in range(args.runs):
                    for setup in (SETUPS if r % 2 == 0 else tuple(reversed(SETUPS))):
                        times[setup].append(one_run(claude, model, root, setup, args.calls, env, settings[setup],
                                                    cycles[setup]))
            base = statistics.median(times["none"])
            by_run = {s: (statistics.median(times[s]) - base) / args.calls * 1000 for s in SETUPS}
            base_cycle = statistics.median(cycles["none"])
            per = {s: (statistics.median(cycles[s]) - base_cycle) * 1000 for s in SETUPS}
            print(f"\n{'setup':14} {'median run s':>13} {'median tool-call cycle':>23} {'overhead per tool call':>23}"
                  f" {'(by run time)':>14}")
            for s in SETUPS:
                print(f"{s:14} {statistics.median(times[s]):13.2f} {statistics.median(cycles[s]) * 1000:20.1f} ms"
                      f" {per[s]:20.1f} ms {by_run[s]:11.1f} ms")
            print("(a cycle: from one model request to the next, i.e. one tool call with its hooks; the overhead is"
                  " the setup's median cycle less that of no hooks. The run-time column divides whole runs,"
                  " client start-up included, by the calls: the same quantity, with the start-up's noise)")
            nothing, cmd, ours = per["http-nothing"], per["command"], per["http"]
            print(f"\nours over http: {ours:.1f} ms per tool call = {ours / nothing:.2f}x the do-nothing http hook"
                  f" (target <= 2x), {ours / cmd:.3f} of our command transport (target <= 0.2)"
                  if nothing > 0 and cmd > 0 else "\n(overheads too small to compare on this run)")
            st = json.loads(server_cmd(our_env, "status", "--json").stdout)
            print(f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
            print(f"our server during the client runs: {st['requests'].get('answered', 0)} answers,"
                  f" p50 {st['p50_ms']} ms, p99 {st['p99_ms']} ms")
        concurrent_sessions(root, args.sessions, args.pairs, args.tool_ms / 1000, args.think_ms / 1000)
        concurrent_sessions(root, args.sessions, args.pairs, args.tool_ms / 1000, args.think_ms / 1000, lockstep=True)
        concurrent_sessions(root, args.sessions, args.pairs, 0, 0)
    finally:
        if our_env:
            subprocess.run([str(BIN / "agent-hook"), "server", "stop"], env=our_env, capture_output=True)
        for p in procs:
            p.terminate()
            p.wait()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
