"""One process run for the benchmarks: its wall time and its own resource usage.

``os.wait4`` gives the child's rusage alone (CPU seconds, peak RSS), so the figures are the
process's own, not the benchmark's; CPU time is what a loaded machine distorts least.
"""

from __future__ import annotations

import os
import resource
import subprocess
import time


def run(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, resource.struct_rusage]:
    """(wall seconds, rusage) of ``argv`` fed ``stdin``; exits the benchmark if the process failed."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{argv[0]} exited {code}")
    return wall, usage


def cpu_s(usage: resource.struct_rusage) -> float:
    """User + system CPU seconds."""
    return usage.ru_utime + usage.ru_stime
