"""CPU time of each kind of process the product starts, this checkout against another.

Every hook call, CLI command and server start is a new Python process; on a small
machine running a fleet (or the test suite, which starts thousands of them) their CPU
time is what limits throughput. This runs each kind below, interleaved with the same
command from another checkout's venv (``--against BIN``, e.g. a clone of main), each
against its own store, and prints user + system CPU of the process (os.wait4's rusage)
with the spread over runs (median and quartiles), and the wall time. Kinds:

* ``version``: ``agent-hook --version`` (the CLI's fixed cost: Python, click, our group);
* ``status``: ``agent-hook status`` on a store with one session;
* ``new-store``: ``agent-hook-session-start`` as the first process on a new store;
* ``session-start``, ``pre-tool-use``, ``post-tool-use``: the executables on the pinned
  client's captured payloads, each call with a new session or tool_use_id;
* ``settings``: ``agent-hook settings install`` on a settings file it wired already;
* ``settings-uninstall``: ``agent-hook settings uninstall`` of what an install (not timed) wired;
* ``hooks-list``: ``agent-hook hooks list`` (the handlers' commands);
* ``server-status``: ``agent-hook server status`` with no server running (its /health probe);
* ``server``: ``agent-hook server run`` until it answers /health, then SIGTERM (supervisor and worker);
* ``init-new``: ``agent-hook init`` creating a new store;
* ``doctor``: ``agent-hook doctor`` (its synthetic run starts every executable).

    .venv/bin/python bench/bench_process_cpu.py [--runs 15] [--against OTHER/.venv/bin] [--only status,server]

A shared machine is noisy: read the CPU columns, which load moves less than wall time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import procs  # bench/procs.py: one timed process

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "claude-code-2.1.197"
HERE = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one(argv: list[str], env: dict[str, str], stdin: bytes = b"") -> tuple[float, float]:
    # doctor exits 1 when it finds something to look at, a bad command 2: both are a run measured.
    wall, usage = procs.run(argv, stdin, env, ok=(0, 1, 2))
    return procs.cpu_s(usage), wall


def _uninstall(cli: str, env: dict[str, str]) -> tuple[float, float]:
    subprocess.run([cli, "settings", "install"], env=env, capture_output=True, check=True)
    return _one([cli, "settings", "uninstall"], env)


def _server(bindir: Path, env: dict[str, str]) -> tuple[float, float]:
    port = _free_port()
    start = time.perf_counter()
    proc = subprocess.Popen([str(bindir / "agent-hook"), "server", "run"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**env, "AGENT_HOOKS__SERVE__PORT": str(port)})
    deadline = time.monotonic() + 30
    while True:
        try:  # the supervisor listens before its worker serves: wait for an answer
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            conn.getresponse().read()
            conn.close()
            break
        except OSError as exc:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit(f"the server did not start (last try: {exc})") from exc
            time.sleep(0.01)
    ready = time.perf_counter() - start
    proc.send_signal(signal.SIGTERM)
    _, usage = procs.wait(proc)
    return procs.cpu_s(usage), ready


def _payload(name: str, session: str) -> bytes:
    doc = json.loads((FIXTURES / name).read_text())
    doc["session_id"] = session
    if "tool_use_id" in doc:
        doc["tool_use_id"] = f"toolu_{uuid.uuid4().hex[:20]}"
    return json.dumps(doc).encode()


def _kinds(bindir: Path, env: dict[str, str], session: str) -> dict[str, object]:
    cli = str(bindir / "agent-hook")
    return {
        "version": lambda: _one([cli, "--version"], env),
        "status": lambda: _one([cli, "status"], env),
        "session-start": lambda: _one([str(bindir / "agent-hook-session-start")], env,
                                      _payload("SessionStart-startup.json", str(uuid.uuid4()))),
        "new-store": lambda: _one([str(bindir / "agent-hook-session-start")], _env(Path(tempfile.mkdtemp(dir=env["AGENT_HOOKS_HOME"]))),
                                  _payload("SessionStart-startup.json", str(uuid.uuid4()))),
        "pre-tool-use": lambda: _one([str(bindir / "agent-hook-pre-tool-use")], env,
                                     _payload("PreToolUse-Bash.json", session)),
        "post-tool-use": lambda: _one([str(bindir / "agent-hook-post-tool-use")], env,
                                      _payload("PostToolUse-Bash.json", session)),
        "settings": lambda: _one([cli, "settings", "install"], env),
        "settings-uninstall": lambda: _uninstall(cli, env),
        "hooks-list": lambda: _one([cli, "hooks", "list"], env),
        "server-status": lambda: _one([cli, "server", "status"], env),
        "server": lambda: _server(bindir, env),
        "init-new": lambda: _one([cli, "init"], _env(Path(tempfile.mkdtemp(dir=env["AGENT_HOOKS_HOME"])))),
        "doctor": lambda: _one([cli, "doctor"], env),
    }


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
    env.update(AGENT_HOOKS_HOME=str(home), HOME=str(home / "user"), AGENT_HOOKS__FORWARD__ENABLED="false")
    return env


def _q(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    if len(ms) < 4:
        return f"{statistics.median(ms):7.1f}"
    q1, q2, q3 = statistics.quantiles(ms, n=4)
    return f"{q2:7.1f} [{q1:6.1f}-{q3:6.1f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--against", type=Path, help="another checkout's venv bin directory")
    parser.add_argument("--only", default="", help="comma-separated kinds")
    args = parser.parse_args()
    sides = {"this": HERE}
    if args.against:
        sides["other"] = args.against
    with tempfile.TemporaryDirectory() as tmp:
        runs: dict[str, dict[str, list[tuple[float, float]]]] = {}
        kinds_by_side = {}
        for name, bindir in sides.items():
            home = Path(tmp) / name
            (home / "user").mkdir(parents=True)
            env = _env(home)
            session = str(uuid.uuid4())
            subprocess.run([str(bindir / "agent-hook-session-start")], input=_payload("SessionStart-startup.json", session),
                           env=env, capture_output=True, check=True)
            kinds_by_side[name] = _kinds(bindir, env, session)
        wanted = [k for k in kinds_by_side["this"] if not args.only or k in args.only.split(",")]
        for kind in wanted:
            for _ in range(args.runs):
                for name in sides:  # interleaved, so load falls on both sides alike
                    runs.setdefault(kind, {}).setdefault(name, []).append(kinds_by_side[name][kind]())  # type: ignore[operator]
        print(f"{args.runs} runs each; CPU = user + system of the process, ms: median [quartiles]")
        print(f"{'kind':14s} " + "  ".join(f"{n + ' CPU':>24s} {n + ' wall':>24s}" for n in sides))
        for kind in wanted:
            cells = []
            for name in sides:
                got = runs[kind][name]
                cells.append(f"{_q([c for c, _ in got]):>24s} {_q([w for _, w in got]):>24s}")
            print(f"{kind:14s} " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
