"""What hooks cost a session, measured through the real Claude Code client the way a user pays.

A session's hook cost has two parts: a fixed part (SessionStart, UserPromptSubmit,
Stop, SessionEnd, and whatever they start) and a part per tool call (PreToolUse
and PostToolUse, which every tool call waits for). Whole-run times mix the two,
and a per-call figure taken from them hides the per-session hooks in it. So
each setup runs a short and a long session (``--short`` and ``--long`` Bash
calls, default 5 and 35) of the real client (tests/e2e: scripted model on
loopback, offline), in rounds that interleave every setup and both lengths,
and the slope between the two gives, from the same runs:

  per tool call      the slope: (long - short) / (long calls - short calls), each session
                     timed from its first model request to the client's exit, so that the
                     client's start-up (which varies by more than a session's hooks) stays out
  fixed per session  less that of "none": before the first model request (the start-up,
                     SessionStart, UserPromptSubmit), plus from it on what the short session
                     cost beyond short calls x per tool call (Stop, SessionEnd, and anything
                     started once per session that slows the calls)

Setups, each wired as a user would wire it:

  none           no hooks at all
  http-nothing   an http hook on PreToolUse + PostToolUse to a do-nothing Starlette/uvicorn
                 server: the floor of any http hook (it has no per-session hooks)
  command        `agent-hook settings install`: every hook of ours as a command hook
  http           `agent-hook settings install --transport http`: every hook but SessionStart
                 posted to the resident server (started before the runs); SessionStart, the
                 one process of ours a session starts, stays a command

Each figure is the median over the rounds with the min and max beside it. A
tool-call cycle (one model request to the next) less that of "none" is printed as
a cross-check of the per-call figure, and the same slope over CPU time (user +
system of the client, the hooks it waited for, and the setup's http server: for
ours, its supervisor and the worker that answers), which a loaded machine moves
far less than wall time; its fixed part is the CPU per session. The executables measured are a fresh
regular install of this checkout, as install.sh makes one (an editable install's
import hook costs each hook process ~6 ms of CPU a user does not pay), or
``--bin DIR``. The configuration is the defaults (forwarding included)
unless ``--no-forward``. Then, unless ``--no-concurrency``, the server's own
answer time (p50/p99, as its /status reports it) under 20 concurrent sessions
sending PreToolUse/PostToolUse pairs: independent sessions (what the target is
judged on), then all in lockstep, then back to back.

    AGENT_HOOKS_CLAUDE_CACHE=/path/to/claude-cache \\
        .venv/bin/python bench/bench_client.py [--versions 2.1.197,latest] [--rounds 5] [--short 5] [--long 35]
    .venv/bin/python bench/bench_client.py --no-client [--sessions 20] [--pairs 50]   # the server only

``--setups`` adds ``command-nothing`` (``true`` as a command hook on Pre + Post,
the floor of any command hook), or leaves setups out. ``--per-hook N`` then runs N
short sessions per transport with every command hook of ours logging its start and
end: how many processes of ours a session starts, and where their time goes.

Targets: http <= 2x http-nothing and <= 1/5 of command per tool call;
server p99 <= 5 ms under 20 concurrent sessions. The machine's load average is
printed before and after: on a shared machine the figures move with it.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import platform
import random
import resource
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

import claude_client  # noqa: E402
from bench_server_stack import SERVER as NOTHING_SERVER  # noqa: E402
from model_server import ModelServer, text, tool_use  # noqa: E402

import agent_hooks  # noqa: E402
from agent_hooks import config as config_mod  # noqa: E402
from agent_hooks.wiring.entries import our_groups  # noqa: E402

# Our executables: a fresh regular install by default (see install_regular), or --bin.
BIN = Path(sys.executable).parent
SETUPS = ("none", "http-nothing", "command", "http")
# More setups for --setups: a do-nothing command hook on Pre + Post (the floor of any command hook).
EXTRA_SETUPS = ("command-nothing",)
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
    """The settings a user of ``setup`` has: nothing, a do-nothing http hook, or ours as installed."""
    if setup == "none":
        return {}
    if setup in ("http-nothing", "command-nothing"):
        entry = ({"type": "http", "url": f"http://127.0.0.1:{nothing_port}/hook", "timeout": 10}
                 if setup == "http-nothing" else {"type": "command", "command": "true", "timeout": 10})
        return {"hooks": {e: [{"matcher": "*", "hooks": [entry]}] for e in TOOL_EVENTS}}
    cfg = config_mod.defaults()
    cfg["serve"]["port"] = our_port
    groups = our_groups(str(BIN), cfg, "command" if setup == "command" else "http")
    return {"hooks": {e: [group] for e, group in groups.items()}}  # every hook, as settings install writes


def install_regular(root: Path) -> Path:
    """A regular (not editable) install of this checkout in a new venv, as install.sh makes one:
    an editable install's import hook costs every hook process ~6 ms of CPU that users do not pay."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           str(ROOT)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"pip install {ROOT} failed (use --bin to measure an existing install):\n{proc.stderr[-2000:]}")
    return venv / "bin"


class Run:
    """One session: its wall time, and where the model requests fell in it (time.monotonic)."""

    __slots__ = ("wall", "head", "cycles", "cpu")

    def __init__(self, wall: float, head: float, cycles: list[float], cpu: float) -> None:
        self.wall = wall  # the client's start to its exit
        # CPU seconds (user + system) of the client and every process it waited for (its hooks), plus
        # what the setup's http server spent meanwhile: a loaded machine moves it far less than wall time.
        self.cpu = cpu
        self.head = head  # start to the first model request: start-up, SessionStart, UserPromptSubmit
        self.cycles = cycles  # model request to model request: one tool call with its hooks each


# CPU seconds so far of each setup's http server, which count in its runs (set in main).
SERVER_CPU: dict[str, Callable[[], float]] = {}


def one_run(claude: Path, model: ModelServer, root: Path, setup: str, calls: int, env: dict[str, str],
            settings_path: Path, tag: str) -> Run:
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    turns: list[Any] = [[tool_use("Bash", {"command": f"echo {i}", "description": f"step {i}"},
                                  id=f"toolu_{tag}_{i:02d}")] for i in range(calls)]
    model.set_script(turns + [[text("Done.")]])
    cmd = [str(claude), "-p", "Run the steps.", "--settings", str(settings_path), "--allowedTools", "Bash",
           "--output-format", "json"]
    seen = len(model.requests)
    server = SERVER_CPU.get(setup)
    server_cpu = server() if server else 0.0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=workspace, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    end = time.monotonic()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the client, and the hooks it waited for
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if server:
        cpu += server() - server_cpu
    result = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    if proc.returncode != 0 or result.get("result") != "Done." or model.remaining:
        raise SystemExit(f"{setup}: run failed (rc {proc.returncode}): {proc.stdout[-300:]} {proc.stderr[-300:]}")
    arrivals = sorted(r.at for r in model.requests[seen:] if r.kind == "main")
    return Run(end - start, arrivals[0] - start, [b - a for a, b in itertools.pairwise(arrivals)], cpu)


def span(values: list[float]) -> str:
    """median [min-max], in ms."""
    return f"{statistics.median(values):.1f} [{min(values):.1f} to {max(values):.1f}]"


def client_rounds(claude: Path, version: str, model: ModelServer, root: Path, env: dict[str, str],
                  settings: dict[str, Path], rounds: int, short: int, long: int) -> dict[str, dict[str, list[float]]]:
    """Interleaved rounds of every setup at both lengths; per setup, per round (ms): the slope's
    per-call and fixed figures (fixed less that of "none"), and the head, tail and cycle less "none"'s."""
    setups = tuple(settings)
    for setup in setups:  # warm-up: disk caches, the server's first connections, the store's creation
        one_run(claude, model, root, setup, 2, env, settings[setup], f"warm_{setups.index(setup)}")
    runs: dict[tuple[str, int], list[Run]] = {(s, n): [] for s in setups for n in (short, long)}
    loads = []
    for r in range(rounds):
        loads.append(os.getloadavg()[0])
        order = [(s, n) for s in setups for n in ((short, long) if r % 2 == 0 else (long, short))]
        for setup, n in (order if r % 2 == 0 else order[::-1]):  # neither setup nor length always first
            runs[(setup, n)].append(one_run(claude, model, root, setup, n, env, settings[setup],
                                            f"r{r}_{setups.index(setup)}_{n}"))
    keys = ("per_call", "above", "fixed", "head", "rest", "cycle", "cpu_call", "cpu_fixed")
    out: dict[str, dict[str, list[float]]] = {s: {k: [] for k in keys} for s in setups}
    for r in range(rounds):
        fig: dict[str, dict[str, float]] = {}
        for s in setups:
            a, b = runs[(s, short)][r], runs[(s, long)][r]
            # The slope is taken from the first model request on: the client's start-up, which varies
            # by more than all the hooks of a session, stays out of it; the head is added back apart.
            per_call = ((b.wall - b.head) - (a.wall - a.head)) / (long - short)
            fig[s] = {"per_call": per_call, "head": (a.head + b.head) / 2,
                      "rest": (a.wall - a.head) - short * per_call,
                      "cycle": statistics.median(a.cycles + b.cycles),
                      "cpu_call": (b.cpu - a.cpu) / (long - short)}
            fig[s]["cpu_fixed"] = a.cpu - short * fig[s]["cpu_call"]
        for s in setups:
            f, none = fig[s], fig["none"]
            out[s]["per_call"].append(f["per_call"] * 1000)
            out[s]["above"].append((f["per_call"] - none["per_call"]) * 1000)
            out[s]["head"].append((f["head"] - none["head"]) * 1000)
            out[s]["rest"].append((f["rest"] - none["rest"]) * 1000)
            out[s]["fixed"].append(out[s]["head"][-1] + out[s]["rest"][-1])
            out[s]["cycle"].append((f["cycle"] - none["cycle"]) * 1000)
            out[s]["cpu_call"].append((f["cpu_call"] - none["cpu_call"]) * 1000)
            out[s]["cpu_fixed"].append((f["cpu_fixed"] - none["cpu_fixed"]) * 1000)
    loads.append(os.getloadavg()[0])
    print(f"\nload average (1 min) at the start of each round and at the end: {', '.join(f'{x:.1f}' for x in loads)}")
    print(f"Claude Code {version}: {rounds} rounds, each every setup at {short} and {long} Bash calls, interleaved;"
          f" all figures ms, median [min to max] over the rounds")
    tables = (
        (("per tool call", "per_call"), ("above none", "above"), ("fixed per session", "fixed"),
         ("= before 1st request", "head"), ("+ from it on", "rest")),
        (("cycle above none", "cycle"), ("CPU per call", "cpu_call"), ("CPU per session", "cpu_fixed")),
    )
    for columns in tables:
        print(f"{'setup':15}" + "".join(f" {title:>26}" for title, _ in columns))
        for s in setups:
            print(f"{s:15}" + "".join(f" {span(out[s][key]):>26}" for _, key in columns))
    print("per tool call: the slope between the two lengths, timed from the first model request to the exit."
          " fixed per session, less that of none: before the first model request (the client's start-up,"
          " SessionStart, UserPromptSubmit) plus, from it on, what the short session cost beyond its calls"
          " (Stop, SessionEnd, and anything per session that slows the calls). cycle: one model request to the"
          " next, a cross-check of the per-call figure. CPU: user + system time of the client, the hooks it"
          " waited for and the setup's http server, by the same slope, above none.")
    if not {"http-nothing", "command", "http"} <= set(setups):
        return out
    nothing, cmd, ours = (statistics.median(out[s]["above"]) for s in ("http-nothing", "command", "http"))
    if nothing > 0 and cmd > 0:
        print(f"ours over http: {ours:.1f} ms per tool call above none = {ours / nothing:.2f}x the do-nothing http"
              f" hook (target <= 2x), {ours / cmd:.3f} of our command transport (target <= 0.2)")
    else:
        print("(per-call overheads too small to compare in this run)")
    return out


TIMED = """#!{python} -S
# bench_client --per-hook: run one hook, then log its event, wall time (ns) and CPU time (user + system,
# its own and its children's, from wait4: microseconds) when it ends.
import os, sys, time
start = time.time_ns()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
with open(os.environ["HOOK_LOG"], "a") as log:
    log.write(f"{{os.environ['HOOK_EVENT']}} {{start}} {{time.time_ns()}} {{usage.ru_utime + usage.ru_stime}}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def timed_settings(settings: dict[str, Any], wrapper: Path, log: Path) -> dict[str, Any]:
    """The same settings, every command hook of ours run through ``wrapper`` (which logs its time)."""
    out = json.loads(json.dumps(settings))
    for event, groups in out.get("hooks", {}).items():
        for group in groups:
            for h in group["hooks"]:
                if h.get("type") == "command" and "agent-hook-" in h.get("command", ""):
                    h["command"] = (f"HOOK_EVENT={event} HOOK_LOG={shlex.quote(str(log))} "
                                    f"{shlex.quote(str(wrapper))} sh -c {shlex.quote(h['command'])}")
    return out


def detached(home: Path) -> dict[str, float]:
    """Our detached processes of this store now: ``python -m agent_hooks.X`` -> CPU seconds so far."""
    found: dict[str, float] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"-m" not in cmd or not cmd[cmd.index(b"-m") + 1].startswith(b"agent_hooks."):
                continue
            if f"AGENT_HOOKS_HOME={home}".encode() not in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                continue
            module = cmd[cmd.index(b"-m") + 1].decode()
            if module == "agent_hooks.server":
                continue  # the http transport's server: resident by design, measured apart
            found[module] = found.get(module, 0.0) + cpu_seconds(int(pid))
        except (OSError, ValueError, IndexError):
            continue
    return found


def per_hook(claude: Path, model: ModelServer, root: Path, env: dict[str, str], settings: dict[str, Path],
             sessions: int, calls: int, home: Path) -> None:
    """Where a session's fixed cost goes, in real sessions whose command hooks of ours run through a
    timing wrapper (so these sessions are not the measured ones): each hook's wall and CPU time, how
    many processes of ours a session starts, the server's CPU over the session, and the detached
    processes of ours (drainer, spool replayer, summarizer, cleanup) alive after them, with their CPU.
    Sessions of no tool call give our CPU per session by itself: its hooks', and the server's."""
    wrapper = root / "timed-hook"
    wrapper.write_text(TIMED.format(python=sys.executable))
    wrapper.chmod(0o700)
    for setup in ("command", "http"):
        if setup not in settings:
            continue
        log = root / f"per-hook-{setup}.log"
        path = root / f"settings-timed-{setup}.json"
        path.write_text(json.dumps(timed_settings(json.loads(settings[setup].read_text()), wrapper, log)))
        server = SERVER_CPU.get(setup)
        for length in (0, calls):
            took: dict[str, list[float]] = {}
            cpu: dict[str, list[float]] = {}
            ours: list[float] = []
            served: list[float] = []
            workers: dict[str, list[float]] = {}
            for n in range(sessions):
                log.unlink(missing_ok=True)
                before = server() if server else 0.0
                one_run(claude, model, root, setup, length, env, path, f"hook_{setup}_{length}_{n}")
                served.append(((server() - before) if server else 0.0) * 1000)
                hooks_cpu = 0.0
                for line in log.read_text().splitlines():
                    event, start, end, used = line.split()
                    took.setdefault(event, []).append((int(end) - int(start)) / 1e6)
                    cpu.setdefault(event, []).append(float(used) * 1000)
                    hooks_cpu += float(used) * 1000
                ours.append(hooks_cpu + served[-1])
                for module, spent in detached(home).items():
                    workers.setdefault(module, []).append(spent * 1000)
            print(f"\n[{setup}: {sessions} sessions of {length} tool calls, each command hook of ours through a"
                  " timing wrapper; ms, median [min to max]]")
            print(f"  {'hook':18} {'wall':>24} {'CPU':>24}")
            for event, xs in sorted(took.items(), key=lambda kv: -statistics.median(cpu[kv[0]])):
                print(f"  {event:18} {span(xs):>24} {span(cpu[event]):>24}   x {len(xs) / sessions:g} per session")
            started = sum(len(xs) for xs in took.values()) / sessions
            print(f"  processes of ours a session of {length} calls starts (command hooks): {started:g}")
            if server:
                print(f"  the server's CPU over the session (its answers, and ~4.5 ms/s of its own): {span(served)}")
            print(f"  our CPU for the session (command hooks + server): {span(ours)}")
            if workers:
                for module, xs in workers.items():
                    print(f"  detached {module} alive after {len(xs)} of {sessions} sessions; its CPU so far {span(xs)}")
            else:
                print("  no detached process of ours alive after the sessions")


def our_server_cpu(home: Path) -> float:
    """CPU seconds so far of our server: the supervisor (with the workers it reaped) and its worker
    (to the nanosecond: its threads' schedstat; /proc/PID/stat counts in 10 ms ticks)."""
    info = json.loads((home / "server.json").read_text())
    worker = int(info["worker_pid"])
    return (cpu_seconds(int(info["pid"]), reaped=True) + threads_cpu(worker)
            + cpu_seconds(worker, reaped=True) - cpu_seconds(worker))  # + the worker's reaped children


def threads_cpu(pid: int) -> float:
    """CPU seconds so far of a process's live threads, from the scheduler's nanosecond count."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[0])
        except OSError:
            continue  # a thread that ended meanwhile
    return total / 1e9


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


def cpu_seconds(pid: int, reaped: bool = False) -> float:
    """User + system CPU time of a process so far (its threads included; ``reaped``: and its children it
    waited for): far less sensitive to the machine's load than wall-clock time."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if reaped else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


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
    ap.add_argument("--versions", default="",
                    help="comma-separated client versions ('latest' allowed); default: AGENT_HOOKS_CLAUDE_VERSION,"
                         " else the pinned one")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (every setup at both lengths)")
    ap.add_argument("--short", type=int, default=5, help="tool calls in the short session")
    ap.add_argument("--long", type=int, default=35, help="tool calls in the long session")
    ap.add_argument("--no-forward", action="store_true", help="forwarding off, whatever the defaults say")
    ap.add_argument("--bin", type=Path, help="measure the executables in this directory (e.g. .venv/bin) instead of"
                    " a fresh regular install of this checkout")
    ap.add_argument("--setups", default=",".join(SETUPS),
                    help=f"comma-separated, from {', '.join(SETUPS + EXTRA_SETUPS)}; 'none' is always measured")
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=50, help="Pre+Post pairs per session in the concurrency part")
    ap.add_argument("--tool-ms", type=float, default=50, help="pause between a session's Pre and Post")
    ap.add_argument("--think-ms", type=float, default=200, help="pause before a session's next call")
    ap.add_argument("--per-hook", type=int, default=0, metavar="N",
                    help="then N more short sessions per transport, each command hook timed (where the fixed cost goes)")
    ap.add_argument("--no-client", action="store_true", help="only the concurrency part")
    ap.add_argument("--no-concurrency", action="store_true", help="only the client part")
    args = ap.parse_args()
    if args.long <= args.short:
        ap.error("--long must be more than --short")
    setups = ("none", *[s for s in args.setups.split(",") if s and s != "none"])
    unknown = set(setups) - set(SETUPS + EXTRA_SETUPS)
    if unknown:
        ap.error(f"unknown setups: {', '.join(sorted(unknown))}")
    global BIN
    root = Path(tempfile.mkdtemp(prefix="agent-hooks-bench-client-"))
    procs: list[subprocess.Popen[bytes]] = []
    our_env: dict[str, str] = {}
    try:
        if args.bin:
            BIN = args.bin.resolve()
        else:
            print("installing this checkout (a regular install, as install.sh makes one) ...", flush=True)
            BIN = install_regular(root)
        if not args.no_client:
            versions = [claude_client.resolve(v.strip()) for v in args.versions.split(",") if v.strip()] \
                or [claude_client.version()]
            clients = {v: claude_client.ensure_client(v) for v in versions}
            print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()};"
                  f" load average {os.getloadavg()[0]:.1f} at the start; Python {sys.version.split()[0]};"
                  f" agent-hooks {agent_hooks.__version__} from {BIN}")
            nothing_port, our_port = free_port(), free_port()
            procs.append(subprocess.Popen([sys.executable, "-c", NOTHING_SERVER, "starlette-httptools",
                                           str(nothing_port)]))
            home = root / "agent-hooks"
            forward = {"AGENT_HOOKS__FORWARD__ENABLED": "false"} if args.no_forward else {}
            our_env = {**os.environ, "AGENT_HOOKS_HOME": str(home), "AGENT_HOOKS__SERVE__PORT": str(our_port),
                       **forward}
            subprocess.run([str(BIN / "agent-hook"), "init"], env=our_env, capture_output=True, check=True)
            server_cmd(our_env, "start")
            wait_port(nothing_port)
            nothing_pid = procs[0].pid
            SERVER_CPU.update({"http-nothing": lambda: cpu_seconds(nothing_pid), "http": lambda: our_server_cpu(home)})
            user_home = root / "home"
            user_home.mkdir()
            settings = {}
            for setup in setups:
                settings[setup] = root / f"settings-{setup}.json"
                settings[setup].write_text(json.dumps(settings_for(setup, nothing_port, our_port)))
            fwd_default = config_mod.defaults()["forward"]["enabled"]
            print(f"forwarding {'off (--no-forward)' if args.no_forward else 'as the defaults have it: '}"
                  f"{'' if args.no_forward else ('on, nothing listening' if fwd_default else 'off')};"
                  f" hooks: none | *-nothing on {' + '.join(TOOL_EVENTS)} | command, http: every hook of ours")
            with ModelServer() as model:
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(user_home),
                       "TMPDIR": str(root), "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": model.url,
                       "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
                       "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "NO_PROXY": "127.0.0.1,localhost",
                       "AGENT_HOOKS_HOME": str(home), "AGENT_HOOKS__SERVE__PORT": str(our_port), **forward}
                for version, claude in clients.items():
                    client_rounds(claude, version, model, root, env, settings, args.rounds, args.short, args.long)
                    if args.per_hook:
                        per_hook(claude, model, root, env, settings, args.per_hook, args.short, home)
            st = json.loads(server_cmd(our_env, "status", "--json").stdout)
            print(f"\nload average {os.getloadavg()[0]:.1f} at the end of the client runs")
            print(f"our server during the client runs: {st['requests'].get('answered', 0)} answers,"
                  f" p50 {st['p50_ms']} ms, p99 {st['p99_ms']} ms")
        if not args.no_concurrency:
            concurrent_sessions(root, args.sessions, args.pairs, args.tool_ms / 1000, args.think_ms / 1000)
            concurrent_sessions(root, args.sessions, args.pairs, args.tool_ms / 1000, args.think_ms / 1000,
                                lockstep=True)
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
