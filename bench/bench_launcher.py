"""What the launcher costs on every hook call, against the alternatives (issue 12 item 13).

Claude Code runs a command hook as ``/bin/sh -c COMMAND``. This times that,
for each way of wiring one executable:

* ``direct``: the bare path (what versions before the launcher wrote; exit 127 once it is gone);
* ``inline``: our launcher, a command string (``[ -x ]``, ``read`` of the shebang, ``exec``: builtins);
* ``script``: a launcher script with a ``#!/bin/sh`` shebang that execs the target (one more exec);
* ``missing``: the inline launcher when the target is gone (logs one line, exits 0);
* ``plugin``: the Claude Code plugin's launcher (``$CLAUDE_PLUGIN_DATA/env-<version>``, its
  ``.ready`` checked too), ready and not built yet (exits 0 at once).

The target is a tiny ``#!/bin/sh`` script, so the numbers are the wiring's own
cost, not Python's. It also times the real ``agent-hook-stop`` direct and
through the launcher when it is installed next to this interpreter.

    .venv/bin/python bench/bench_launcher.py [--runs 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from agent_hooks.wiring import plugin  # noqa: E402
from agent_hooks.wiring.entries import launcher  # noqa: E402


def timed(command: str, env: dict[str, str], runs: int) -> list[float]:
    """Wall ms of ``sh -c command`` (stdin: a small payload), ``runs`` times."""
    out = []
    payload = b'{"session_id":"bench","hook_event_name":"Stop","cwd":"/tmp"}'
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", command], input=payload, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        out.append((time.perf_counter() - t) * 1000)
    return out


def line(name: str, ms: list[float], base: float | None) -> str:
    med = statistics.median(ms)
    p95 = sorted(ms)[int(len(ms) * 0.95) - 1]
    extra = "" if base is None else f"  (+{med - base:.2f} ms vs direct)"
    return f"{name:28} median {med:6.2f} ms  p95 {p95:6.2f} ms{extra}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {"PATH": "/usr/bin:/bin", "AGENT_HOOKS_HOME": tmp, "HOME": tmp}
        target = os.path.join(tmp, "agent-hook-stop")
        with open(target, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(target, 0o755)
        script = os.path.join(tmp, "launch")
        with open(script, "w") as f:
            f.write(f'#!/bin/sh\n[ -x "{target}" ] && exec "{target}"\nexit 0\n')
        os.chmod(script, 0o755)
        cases = [("direct", target), ("inline launcher", launcher(target, "Stop")), ("script launcher", script),
                 ("missing (inline launcher)", launcher(target + "-gone", "Stop"))]
        results = {name: timed(cmd, env, args.runs) for name, cmd in cases}
        # The plugin's launcher: an environment of version 0.0.0 in a data directory, ready, then not built.
        data = os.path.join(tmp, "plugin-data")
        env_bin = os.path.join(data, plugin.env_dirname("0.0.0"), "bin")
        os.makedirs(env_bin)
        os.link(target, os.path.join(env_bin, "agent-hook-stop"))
        open(os.path.join(data, plugin.env_dirname("0.0.0"), plugin.READY), "w").close()
        plugin_env = {**env, "CLAUDE_PLUGIN_DATA": data, "CLAUDE_PLUGIN_ROOT": tmp}
        results["plugin launcher"] = timed(plugin.launcher("agent-hook-stop", "0.0.0"), plugin_env, args.runs)
        results["plugin, not built yet"] = timed(plugin.launcher("agent-hook-stop", "0.0.1"), plugin_env, args.runs)
        base = statistics.median(results["direct"])
        print(f"sh -c COMMAND, {args.runs} runs each, target: a #!/bin/sh script that exits 0")
        for name, ms in results.items():
            print(line(name, ms, None if name == "direct" else base))
        real = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "agent-hook-stop")
        if os.access(real, os.X_OK):
            runs = max(20, args.runs // 5)
            real_direct = timed(real, env, runs)
            real_launch = timed(launcher(real, "Stop"), env, runs)
            print(f"\nthe real {real}, {runs} runs each (scratch store)")
            print(line("direct", real_direct, None))
            print(line("inline launcher", real_launch, statistics.median(real_direct)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
