"""Work that must not hold a hook: detached stdlib workers, and bounded child processes.

:func:`spawn` starts ``python -m MODULE ARGS`` in its own session with every
standard stream on /dev/null, so Claude Code (which waits for the hook's
stdout to close) and the hook's deadline never wait for it, and a kill of the
hook's process group does not reach it. :func:`run_bounded` is used by those
workers: it kills the child's whole process group at the timeout, so a shell
command cannot leave grandchildren behind holding pipes open.
"""

from __future__ import annotations

import os
import sys
import time

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Set in the environment of everything our workers run: a summarizer such as
# `claude -p` fires our hooks too, and its Stop must not spawn workers again.
NESTED_VAR = "AGENT_HOOKS_NESTED"


def nested(env: Any) -> bool:
    return bool(env.get(NESTED_VAR))


def session_lock(lock_dir: str, kind: str, session_id: str) -> int | None:
    """An exclusive, non-blocking flock per (kind, session): the fd to hold, or None when
    another worker already holds it. Closing the fd (or exiting) releases it."""
    import fcntl
    import hashlib

    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    name = hashlib.sha256(session_id.encode()).hexdigest()[:24]
    fd = os.open(os.path.join(lock_dir, f"{kind}-{name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def worker_main(argv: list[str] | None, module: str, kind: str, event: str,
                work: Callable[[str, Any, Any, dict[str, Any]], int]) -> int:
    """The entry of a detached per-session worker (``python -m MODULE SESSION_ID``).

    Private files, one worker per (kind, session) at a time (a second one
    leaves the work to the first), and every failure in the error log, since
    nobody reads a detached worker's stderr. ``work(session_id, env, paths,
    config)`` returns the exit code.
    """
    from agent_hooks import config as config_mod
    from agent_hooks.log import log_error
    from agent_hooks.paths import Paths

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m {module} SESSION_ID", file=sys.stderr)
        return 2
    session_id = args[0]
    os.umask(0o077)
    env = os.environ
    paths = Paths(env)
    try:
        config = config_mod.load(paths, env)
        lock = session_lock(paths.lock_dir, kind, session_id)
        if lock is None:
            return 0
        try:
            return work(session_id, env, paths, config)
        finally:
            os.close(lock)
    except Exception as exc:  # noqa: BLE001 - detached: the log is the only place to tell
        import traceback

        log_error(paths, event, "error", f"{type(exc).__name__}: {exc}", session_id, traceback.format_exc())
        return 1


def spawn(module: str, args: list[str], env: Any) -> int:
    """Start ``python -m module args`` detached; returns its pid."""
    import subprocess

    child_env = dict(env)
    child_env[NESTED_VAR] = "1"
    if child_env.get("AGENT_HOOKS_HOME"):
        # The worker runs from / : a relative state directory must not move.
        child_env["AGENT_HOOKS_HOME"] = os.path.abspath(os.path.expanduser(child_env["AGENT_HOOKS_HOME"]))
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        env=child_env,
        cwd="/",
    )
    return proc.pid


def run_bounded(command: list[str] | str, timeout_s: float, stdin: bytes | None = None,
                env: Any = None, cwd: str | None = None, tail_chars: int = 2000) -> dict[str, Any]:
    """Run one command (argv list, or a string for /bin/sh -c) with a hard timeout.

    Returns ``{"exit_code", "timed_out", "stdout", "output_tail", "duration_ms"}``;
    ``exit_code`` is None when it timed out or could not start.
    """
    import signal
    import subprocess

    started = time.monotonic()
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else command
    result: dict[str, Any] = {"exit_code": None, "timed_out": False, "stdout": "", "output_tail": "",
                              "duration_ms": 0}
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=None if env is None else dict(env),
            cwd=cwd,
        )
    except OSError as exc:
        result["output_tail"] = f"cannot start: {exc}"
        result["duration_ms"] = int((time.monotonic() - started) * 1000)
        return result
    try:
        out, err = proc.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
        result["timed_out"] = True
    else:
        result["exit_code"] = proc.returncode
    text_out = out.decode("utf-8", "replace")
    text_err = err.decode("utf-8", "replace")
    combined = (text_out + ("\n" if text_out and text_err else "") + text_err).strip()
    result["stdout"] = text_out
    result["output_tail"] = combined[-tail_chars:]
    result["duration_ms"] = int((time.monotonic() - started) * 1000)
    return result
