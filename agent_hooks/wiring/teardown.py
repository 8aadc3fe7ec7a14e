"""What uninstalling leaves running: the drainer.

A drainer is a detached ``python -m agent_hooks.forward.drain`` from the
installation's venv; it outlives the venv being deleted. Uninstall stops it.
Its queued events stay in the store (the outbox is durable): a later
installation delivers them.
"""

from __future__ import annotations

import os
import signal
import time

from agent_hooks.paths import Paths

DRAINER_MODULE = b"agent_hooks.forward.drain"


def _pid(paths: Paths) -> int | None:
    from agent_hooks.forward.drain import PID_NAME

    try:
        with open(os.path.join(paths.lock_dir, PID_NAME), encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _is_drainer(pid: int) -> bool:
    """The pid is a drainer (not a recycled pid of something else)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return DRAINER_MODULE in f.read()
    except OSError:
        return False


def stop_drainer(paths: Paths, wait_s: float = 5.0) -> int | None:
    """Stop the drainer of this state directory, if one runs; return its pid (None: none ran)."""
    from agent_hooks.forward.outbox import drainer_alive

    if not drainer_alive(paths):
        return None
    pid = _pid(paths)
    if pid is None or not _is_drainer(pid):
        return None
    try:
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + wait_s
        while drainer_alive(paths) and time.monotonic() < end:
            time.sleep(0.05)
        if drainer_alive(paths) and _is_drainer(pid):
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return pid
