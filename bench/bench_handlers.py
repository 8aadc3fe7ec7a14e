"""What user handlers cost PreToolUse: 0, 1 and 5 in-process handlers against the floor.

Command transport: the installed ``agent-hook-pre-tool-use`` on a Bash payload, one
AGENT_HOOKS_HOME per case (each initialised), the cases interleaved run by run so
the machine's drift hits them alike:

* floor: ``python -c "import json, sqlite3"``;
* off: ``handlers.enabled = false`` (the hook as it was before handlers, bar one import);
* 0: handlers on, none installed (the registry's few stat calls);
* 1 and 5: no-op in-process handlers (``return None``) in the managed dir.

Then, in fresh processes, the in-process cost itself, timed around the call
(no process start-up noise): ``hook.run_due`` with 0 handlers (imports included),
and with 1 and 5 handlers (compile of handler.py, a thread each, the stdout guard).

Targets (issue 16): 0 handlers <= 1 ms over "off"; each in-process handler <= 1 ms + its own work.

    .venv/bin/python bench/bench_handlers.py [--runs 60] [--http]

``--http`` adds the http transport (issue 14's resident server, ``POST /hooks/PreToolUse``)
for the same cases when ``agent_hooks.server`` is installed; without it the run says so
and measures the command transport only.
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

import procs  # bench/procs.py: one timed process

BIN = Path(sys.executable).parent
NOOP = "def handle(event):\n    return None\n"
CASES = ("off", "0", "1", "5")


def make_home(root: str, case: str) -> dict[str, str]:
    home = os.path.join(root, f"home-{case}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
    env.update({"AGENT_HOOKS_HOME": home, "AGENT_HOOKS__FORWARD__ENABLED": "false"})
    if case == "off":
        env["AGENT_HOOKS__HANDLERS__ENABLED"] = "false"
    subprocess.run([str(BIN / "agent-hook"), "init"], env=env, check=True, stdout=subprocess.DEVNULL)
    n = int(case) if case.isdigit() else 0
    for i in range(n):
        d = Path(home) / "hooks" / f"noop-{i}"
        d.mkdir(parents=True)
        (d / "HOOK.md").write_text(f"---\nname: noop-{i}\ndescription: bench\nevents: [PreToolUse]\n"
                                   f"matcher: Bash\npriority: {i}\n---\n")
        (d / "handler.py").write_text(NOOP)
    return env


def payload(i: int, session_id: str) -> bytes:
    return json.dumps({"session_id": session_id, "hook_event_name": "PreToolUse", "cwd": "/tmp",
                       "tool_name": "Bash", "tool_input": {"command": f"echo step {i}", "description": "s"},
                       "tool_use_id": f"toolu_bench_{i:06d}", "permission_mode": "default"}).encode()


def run_once(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one process. CPU time is what a loaded
    machine (2 cores, many engineers) distorts least; wall time is what the agent waits."""
    wall, usage = procs.run(argv, stdin, env)
    return wall, procs.cpu_s(usage)


def command_transport(envs: dict[str, dict[str, str]], runs: int) -> dict[str, float]:
    floor_argv = [sys.executable, "-c", "import json, sqlite3"]
    hook = [str(BIN / "agent-hook-pre-tool-use")]
    sessions = {case: str(uuid.uuid4()) for case in CASES}
    times: dict[str, list[float]] = {c: [] for c in ("floor", *CASES)}
    cpu: dict[str, list[float]] = {c: [] for c in ("floor", *CASES)}
    for i in range(3):  # warm-up: page cache, the registry's first compile
        for case in CASES:
            run_once(hook, payload(900000 + i, sessions[case]), envs[case])
    for i in range(runs):
        w, c = run_once(floor_argv, b"", envs["off"])
        times["floor"].append(w)
        cpu["floor"].append(c)
        for case in CASES:
            w, c = run_once(hook, payload(i, sessions[case]), envs[case])
            times[case].append(w)
            cpu[case].append(c)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    mcpu = {k: statistics.median(v) * 1000 for k, v in cpu.items()}
    print(f"\n[command transport] PreToolUse, {runs} runs each, interleaved (median ms: wall | CPU)")
    print(f"  floor  python -c 'import json, sqlite3'   {med['floor']:7.2f} | {mcpu['floor']:6.2f}")
    labels = {"off": "handlers off (as before)", "0": "0 handlers", "1": "1 in-process handler",
              "5": "5 in-process handlers"}
    for case in CASES:
        over = med[case] - med["off"]
        print(f"  {labels[case]:34} {med[case]:7.2f} | {mcpu[case]:6.2f}   {med[case] / med['floor']:5.3f}x floor"
              f"   {over:+6.2f} ms wall, {mcpu[case] - mcpu['off']:+6.2f} ms CPU vs off")
    return med


PROBE = r"""
import json, os, sys, time
t0 = time.perf_counter()
from agent_hooks import config as config_mod
from agent_hooks.paths import Paths
from agent_hooks.payload import validate
from agent_hooks.runner import Context
import agent_hooks.events.pre_tool_use  # what the hook has loaded before handlers run
env = dict(os.environ)
paths = Paths(env)
cfg, _ = config_mod.load_lenient(paths, env)
raw = json.loads(sys.argv[1])
ctx = Context(validate(raw, "PreToolUse"), cfg, paths, env)
t1, c1 = time.perf_counter(), time.process_time()
from agent_hooks.handlers import hook
merged = hook.run_due(ctx, "PreToolUse")
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"ms": (t2 - t1) * 1000, "cpu": (c2 - c1) * 1000, "ran": merged.ran if merged else [],
                  "failed": merged.failed if merged else []}))
"""


def in_process(envs: dict[str, dict[str, str]], runs: int) -> dict[str, float]:
    out: dict[str, float] = {}
    outc: dict[str, float] = {}
    print(f"\n[in-process] hook.run_due on PreToolUse in a fresh process, imports included"
          f" ({runs} runs, median ms: wall | CPU of the process, all threads)")
    for case in CASES:
        samples, csamples = [], []
        for i in range(runs):
            raw = json.loads(payload(500000 + i, "probe-" + case))
            proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(raw)], env=envs[case],
                                  capture_output=True, text=True, check=True)
            doc = json.loads(proc.stdout)
            if doc["failed"]:
                raise SystemExit(f"handlers failed in the probe: {doc}")
            samples.append(doc["ms"])
            csamples.append(doc["cpu"])
        out[case] = statistics.median(samples)
        outc[case] = statistics.median(csamples)
    for case in CASES:
        per = ((out[case] - out["0"]) / int(case), (outc[case] - outc["0"]) / int(case)) if case in ("1", "5") else None
        extra = f"   per handler over 0: {per[0]:5.2f} | {per[1]:5.2f}" if per is not None else ""
        label = "(handlers off)" if case == "off" else "handler(s)"
        print(f"  {case:>3} {label:14} {out[case]:6.3f} | {outc[case]:6.3f}{extra}")
    print(f"  0 handlers over off: {out['0'] - out['off']:+.3f} ms wall, {outc['0'] - outc['off']:+.3f} ms CPU"
          " (target <= 1 ms)")
    # The issue's "each in-process handler <= 1 ms plus its own work", read three ways: the first
    # handler carries the machinery a call pays once (imports, the registry, the timeout thread);
    # read with "no handlers: <= 1 ms", n handlers may add up to 1 + n ms over handlers off.
    print(f"  the first handler, machinery included: {out['1'] - out['0']:.2f} ms wall;"
          f" each handler after it: {(out['5'] - out['1']) / 4:.2f} ms wall (target <= 1 ms)")
    print(f"  over handlers off: 1 handler {out['1'] - out['off']:.2f} ms (budget 1 + 1 = 2 ms),"
          f" 5 handlers {out['5'] - out['off']:.2f} ms (budget 1 + 5 = 6 ms)")
    return out


def http_transport(envs: dict[str, dict[str, str]], runs: int) -> None:
    """Issue 14's server, one per case home, POST /hooks/PreToolUse (a new connection each, as the client does)."""
    try:
        import agent_hooks.server  # noqa: F401
        from agent_hooks.paths import Paths
        from agent_hooks.server import local
    except ImportError:
        print("\n[http transport] not available on this build (agent_hooks.server missing: issue 14 not merged);"
              " skipped")
        return
    import http.client

    print(f"\n[http transport] POST /hooks/PreToolUse, {runs} runs each (median wall ms)")
    import socket

    for case in CASES:
        with socket.socket() as probe:  # a free port: the default one may be another user's server
            probe.bind((local.HOST, 0))
            free = probe.getsockname()[1]
        env = {**envs[case], "AGENT_HOOKS__SERVE__PORT": str(free)}
        subprocess.run([str(BIN / "agent-hook"), "server", "start"], env=env, check=True, stdout=subprocess.DEVNULL)
        try:
            info = local.read_info(Paths(env)) or {}
            port = int(info.get("port") or free)
            samples = []
            sid = str(uuid.uuid4())
            for i in range(runs + 3):
                body = payload(700000 + i, sid)
                start = time.perf_counter()
                conn = http.client.HTTPConnection(local.HOST, port, timeout=10)
                conn.request("POST", local.HOOK_PATH + "PreToolUse", body, {"Content-Type": "application/json"})
                conn.getresponse().read()
                conn.close()
                if i >= 3:
                    samples.append((time.perf_counter() - start) * 1000)
            print(f"  {case:>3} handler(s){' (off)' if case == 'off' else ''}   {statistics.median(samples):6.2f}")
        finally:
            subprocess.run([str(BIN / "agent-hook"), "server", "stop"], env=env, stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--probe-runs", type=int, default=25)
    ap.add_argument("--http", action="store_true", help="Also the http transport (needs issue 14's server).")
    args = ap.parse_args()
    import agent_hooks

    # A regular install ships .pyc files; handler.py is compiled per call (no .pyc), as users get it.
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(agent_hooks.__file__)], check=True)
    with tempfile.TemporaryDirectory(prefix="agent-hooks-bench-") as root:
        envs = {case: make_home(root, case) for case in CASES}
        command_transport(envs, args.runs)
        in_process(envs, args.probe_runs)
        if args.http:
            http_transport(envs, args.runs)


if __name__ == "__main__":
    main()
