"""Forwarding: delivery latency from commit to receipt, and drain throughput.

Runs the contract server of the tests (tests/support/ingest_server.py) on 127.0.0.1
and a throwaway AGENT_HOOKS_HOME.

1. Latency: events are committed to the outbox one at a time, through the
   same ``forward()`` a hook calls, and the server stamps each on receipt.
   Warm: ``--latency-events`` at ``--rate`` per second while a drainer is alive
   (as during a working session: it idles ``idle_exit_s`` before exiting);
   median and p99 of receipt - commit. Cold: ``--cold-runs`` events each
   committed with no drainer alive, so the commit spawns one (process start +
   httpx import) exactly as a hook does.
2. Latency through the real hook executables: ``--hook-runs`` calls of the
   installed UserPromptSubmit / Stop hooks; receipt - hook exit.
3. Hook cost: PostToolUse wall time with forwarding off, and on with the
   server up, down (port closed) and hanging (accepts, never answers); and
   forward() itself in-process (the noise-free number: what a hook adds).
4. Throughput: ``--events`` are queued across ``--sessions`` sessions with no
   drainer alive, then one drainer delivers them all; events/s from the
   drainer's start and from the first receipt.

    .venv/bin/python bench/bench_forward.py [--latency-events 300] [--rate 50] [--events 5000]

Targets (issue 7): p50 <= 300 ms commit -> receipt; >= 500 events/s.
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
FIXTURES = ROOT / "tests" / "fixtures" / "claude-code-2.1.197"  # the pinned client (agent_hooks.claude_code.PINNED)
BIN = Path(sys.executable).parent

from agent_hooks import config as config_mod  # noqa: E402
from agent_hooks.forward import outbox  # noqa: E402
from agent_hooks.paths import Paths  # noqa: E402
from agent_hooks.payload import Payload  # noqa: E402
from agent_hooks.store import Store  # noqa: E402

from support.ingest_server import IngestServer  # noqa: E402


class _Ctx:
    """What forward() reads from a hook's Context."""

    def __init__(self, payload: Payload, config: dict[str, Any], paths: Paths, env: dict[str, str]) -> None:
        self.payload, self.config, self.paths, self.env = payload, config, paths, env
        self.started = time.time()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def env_for(home: Path, server: IngestServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS") and k != "OPTIMALOS_SESSION_TMUX"}
    env.update({"AGENT_HOOKS_HOME": str(home), "HOME": str(home), "AGENT_HOOKS_INGEST_URL": server.url,
                "AGENT_HOOKS_TMUX_SESSION": "agent-bench",
                # The drainer idles 30 s by default before exiting; the bench waits for it.
                "AGENT_HOOKS__FORWARD__IDLE_EXIT_S": "1"})
    return env


def wait_gone(paths: Paths, timeout: float = 60) -> None:
    end = time.time() + timeout
    while outbox.drainer_alive(paths) and time.time() < end:
        time.sleep(0.05)


def _commit_one(store: Store, ctx_args: tuple[Any, ...], i: int) -> tuple[str, float]:
    config, paths, env = ctx_args
    # Alternate two events the state machine accepts, each its own hook-like transaction.
    event = "UserPromptSubmit" if i % 2 else "SessionStart"
    ctx = _Ctx(Payload({"session_id": "bench", "hook_event_name": event, "prompt": "x"}), config, paths, env)
    with store.write() as conn:
        eid = outbox.forward(conn, ctx)
    assert eid
    return eid, time.time()


def _receipts(server: IngestServer) -> dict[str, float]:
    first: dict[str, float] = {}
    for r in server.accepted():
        first.setdefault(r["key"], r["at"])
    return first


def latency(events: int, rate: float, cold_runs: int) -> None:
    server = IngestServer().start()
    with tempfile.TemporaryDirectory() as tmp:
        env = env_for(Path(tmp), server)
        paths = Paths(env)
        args = (config_mod.load(paths, env), paths, env)
        store = Store(paths.store)
        # Cold: no drainer alive; the commit starts one (spawn + imports) as a hook does.
        cold = []
        for i in range(cold_runs):
            wait_gone(paths)
            eid, at = _commit_one(store, args, i)
            # wait_for calls the lambda at once, in this iteration.
            server.wait_for(lambda: eid in _receipts(server), timeout=60, what="cold event")  # noqa: B023
            cold.append((_receipts(server)[eid] - at) * 1000)
        # Warm: a drainer is alive (hooks keep it so while a session works).
        committed: dict[str, float] = {}
        for i in range(events):
            eid, at = _commit_one(store, args, i)
            committed[eid] = at
            time.sleep(1 / rate)
        store.close()
        server.wait_for(lambda: set(committed) <= set(_receipts(server)), timeout=60, what="all")
        first = _receipts(server)
        lat = [(first[k] - committed[k]) * 1000 for k in committed]
        wait_gone(paths)
    server.stop()
    print(f"latency commit->receipt, drainer alive: {events} events at {rate:g}/s")
    print(f"  median {statistics.median(lat):7.1f} ms   p99 {pct(lat, 0.99):7.1f} ms   max {max(lat):7.1f} ms")
    print(f"latency commit->receipt, cold (the commit starts the drainer), {cold_runs} runs:")
    print(f"  median {statistics.median(cold):7.1f} ms   max {max(cold):7.1f} ms")


def hook_latency(runs: int) -> None:
    server = IngestServer().start()
    with tempfile.TemporaryDirectory() as tmp:
        env = env_for(Path(tmp), server)
        subprocess.run([str(BIN / "agent-hook"), "init"], env=env, capture_output=True, check=True)
        prompt = (FIXTURES / "UserPromptSubmit.json").read_bytes()
        stop = (FIXTURES / "Stop.json").read_bytes()
        start = (FIXTURES / "SessionStart-startup.json").read_bytes()
        subprocess.run([str(BIN / "agent-hook-session-start")], input=start, env=env, capture_output=True)
        ended: list[float] = []
        for i in range(runs):
            exe, data = ("agent-hook-user-prompt-submit", prompt) if i % 2 == 0 else ("agent-hook-stop", stop)
            subprocess.run([str(BIN / exe)], input=data, env=env, capture_output=True)
            ended.append(time.time())
            time.sleep(0.05)
        server.wait_for(lambda: len(server.accepted()) >= runs + 1, timeout=60, what="hook events")
        received = [r["at"] for r in server.accepted()][1:]
        # Not strict: wait_for asks for at least one event per call; any beyond are left out.
        lat = [(r - e) * 1000 for r, e in zip(received, ended, strict=False)]
        wait_gone(Paths(env))
    server.stop()
    print(f"latency hook exit->receipt through the installed hooks ({runs} calls): "
          f"median {statistics.median(lat):.1f} ms, p99 {pct(lat, 0.99):.1f} ms (upper bound of commit->receipt)")


def hook_cost(runs: int) -> None:
    """PostToolUse wall time: forwarding off vs on (every call enqueues: heartbeat 0) with the
    server up, down, and hanging; calls interleaved so machine load hits all alike."""
    post = json.loads((FIXTURES / "PostToolUse-Bash.json").read_text())
    server = IngestServer().start()
    down = IngestServer()  # never started: its port is closed
    hang = IngestServer().start()
    hang.mode = "hang"
    times: dict[str, list[float]] = {"off": [], "up": [], "down": [], "hang": []}
    with tempfile.TemporaryDirectory() as tmp:
        envs = {}
        for name, srv in (("off", server), ("up", server), ("down", down), ("hang", hang)):
            env = env_for(Path(tmp) / name, srv)
            env["AGENT_HOOKS__FORWARD__HEARTBEAT_INTERVAL_S"] = "0"
            env["AGENT_HOOKS__FORWARD__TIMEOUT_S"] = "60"
            if name == "off":
                env["AGENT_HOOKS__FORWARD__ENABLED"] = "false"
            subprocess.run([str(BIN / "agent-hook"), "init"], env=env, capture_output=True, check=True)
            envs[name] = env
        names = list(envs)
        for i in range(runs):
            for name in names[i % 4:] + names[:i % 4]:  # rotate: no variant always runs first
                env = envs[name]
                post["tool_use_id"] = f"toolu_cost_{i}"
                data = json.dumps(post).encode()
                t = time.perf_counter()
                subprocess.run([str(BIN / "agent-hook-post-tool-use")], input=data, env=env, capture_output=True)
                times[name].append((time.perf_counter() - t) * 1000)
        # The down / hang homes' drainers would retry for minutes: stop the drainers we caused.
        for name in ("up", "down", "hang"):
            pid_file = Path(Paths(envs[name]).lock_dir) / "drain.pid"
            if outbox.drainer_alive(Paths(envs[name])) and pid_file.exists():
                os.kill(int(pid_file.read_text()), 9)
    hang.stop()
    server.stop()
    base = statistics.median(times["off"])
    print(f"hook cost, PostToolUse median of {runs} (every call enqueues):")
    for name, label in (("off", "forwarding off"), ("up", "server up"), ("down", "server down"),
                        ("hang", "server hanging")):
        med = statistics.median(times[name])
        print(f"  {label:15} {med:6.1f} ms  ({med / base:.2f}x off)   max {max(times[name]):6.1f} ms")


def forward_cost(calls: int = 1000) -> None:
    """forward() in-process, inside a write transaction as a hook calls it: every call enqueues."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"AGENT_HOOKS_HOME": tmp, "AGENT_HOOKS_TMUX_SESSION": "agent-cost",
               "AGENT_HOOKS__FORWARD__AUTOSTART": "false", "AGENT_HOOKS__FORWARD__HEARTBEAT_INTERVAL_S": "0"}
        paths = Paths(env)
        config = config_mod.load(paths, env)
        store = Store(paths.store)
        raw = {"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {}}
        timings = {}
        for label, enqueue in (("empty transaction", False), ("with forward()", True)):
            t = time.perf_counter()
            for _ in range(calls):
                with store.write() as conn:
                    if enqueue:
                        outbox.forward(conn, _Ctx(Payload(dict(raw)), config, paths, env))
            timings[label] = (time.perf_counter() - t) / calls * 1000
        t = time.perf_counter()
        for _ in range(calls):
            outbox.drainer_alive(paths)
        probe = (time.perf_counter() - t) / calls * 1000
        store.close()
    print(f"forward() in-process, {calls} calls: {timings['with forward()'] - timings['empty transaction']:.3f} ms"
          f" per enqueue; drainer liveness probe {probe:.4f} ms")


def throughput(events: int, sessions: int) -> None:
    server = IngestServer().start()
    with tempfile.TemporaryDirectory() as tmp:
        env = env_for(Path(tmp), server)
        env["AGENT_HOOKS__FORWARD__IDLE_EXIT_S"] = "0"
        paths = Paths(env)
        store = Store(paths.store)
        with store.write() as conn:
            for i in range(events):
                key = f"agent-bench-{i % sessions}"
                ev = "start" if i < sessions else ("to_review" if (i // sessions) % 2 else "running")
                body = {"tmux_session": key, "event": ev, "metadata": "bench", "agent_type": "claude-code"}
                outbox.enqueue(conn, key, "bench", ev, body, time.time(), 0.0)
        store.close()
        t0 = time.time()
        p = subprocess.run([sys.executable, "-m", "agent_hooks.forward.drain"], env=env, capture_output=True)
        t1 = time.time()
        assert p.returncode == 0, p.stderr
        got = server.accepted()
        assert len({r["key"] for r in got}) == events, f"{len(got)} of {events} delivered"
        span = got[-1]["at"] - got[0]["at"]
    server.stop()
    print(f"throughput: {events} events over {sessions} sessions, one drainer:")
    print(f"  {events / (t1 - t0):7.0f} events/s including the drainer's start ({t1 - t0:.2f} s)")
    print(f"  {events / span:7.0f} events/s first receipt -> last receipt ({span:.2f} s)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency-events", type=int, default=300)
    ap.add_argument("--rate", type=float, default=50.0, help="events per second in the latency run")
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--hook-runs", type=int, default=30)
    ap.add_argument("--cost-runs", type=int, default=30)
    ap.add_argument("--events", type=int, default=5000)
    ap.add_argument("--sessions", type=int, default=10)
    args = ap.parse_args()
    latency(args.latency_events, args.rate, args.cold_runs)
    hook_latency(args.hook_runs)
    hook_cost(args.cost_runs)
    forward_cost()
    throughput(args.events, args.sessions)
    print("targets: p50 <= 300 ms, >= 500 events/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
