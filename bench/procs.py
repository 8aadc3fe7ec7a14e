"""One process run for the benchmarks: its wall time and its own resource usage.

``os.wait4`` gives the child's rusage alone (CPU seconds, peak RSS), so the figures are the
process's own, not the benchmark's; CPU time is what a loaded machine distorts least.
"""

from __future__ import annotations

import os
import resource
import subprocess
import time


def run(argv: list[str], stdin: bytes, env: dict[str, str],
        ok: tuple[int, ...] = (0,)) -> tuple[float, resource.struct_rusage]:
    """(wall seconds, rusage) of ``argv`` fed ``stdin``; exits the benchmark if the process exited
    with a code not in ``ok``."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    code, usage = wait(proc)
    wall = time.perf_counter() - start
    if code not in ok:
        raise SystemExit(f"{argv[0]} exited {code}")
    return wall, usage


def wait(proc: subprocess.Popen[bytes]) -> tuple[int, resource.struct_rusage]:
    """(exit code, rusage) of a started process, once it has exited."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage


def cpu_s(usage: resource.struct_rusage) -> float:
    """User + system CPU seconds."""
    return usage.ru_utime + usage.ru_stime
