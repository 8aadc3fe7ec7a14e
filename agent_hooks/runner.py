"""Every hook executable goes through :func:`run`: the stdin transport.

It reads stdin and hands the bytes to :func:`agent_hooks.dispatch.dispatch`
(payload, Context, handler, answer; bad input and internal errors fail open
with a trace), under the deadline: the work runs in a daemon thread; if it is
not done in ``runtime.deadline_ms`` the main thread gives the fail-open answer
(nothing) and exits 0, whatever the thread is stuck in (a locked store, a slow
disk). The resident server (agent_hooks.server.hooks) is the other transport
over the same dispatch.

Nothing here imports click, httpx, sqlite-utils or filelock.
"""

from __future__ import annotations

import os
import sys
import _thread  # threading's import costs ~1 ms per call; a lock and a thread are all we need

from agent_hooks import config as config_mod
from agent_hooks.dispatch import Call, Context, count_error, dispatch, log_error, report
from agent_hooks.output import emit, warn
from agent_hooks.paths import Paths

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_hooks.dispatch import Handler

# Context and log_error moved to dispatch; features and workers import them from here.
__all__ = ["Context", "count_error", "load_config", "log_error", "run"]


class _Result:
    __slots__ = ("call", "finished")

    def __init__(self, event: str) -> None:
        self.call = Call(event)
        # Held while the worker runs; the main thread waits on it with the deadline.
        self.finished = _thread.allocate_lock()
        self.finished.acquire()


def _work(handler: Handler, env: Any, paths: Paths, config: dict[str, Any], result: _Result) -> None:
    try:
        try:
            data = sys.stdin.buffer.read()
        except BaseException as exc:  # noqa: BLE001 - fail open on anything
            report(paths, config, result.call, "error", f"{type(exc).__name__}: {exc}",
                   said=f"internal error ({type(exc).__name__}: {exc}); the agent carries on")
            result.call.done = True
            return
        # The store connection is left open on purpose: the process ends with
        # os._exit, and a close would make this (the last) connection checkpoint
        # the WAL and fsync on every hook call. Committed data is safe in the WAL.
        dispatch(result.call, handler, data, env, paths, config)
    finally:
        result.finished.release()


def load_config(paths: Paths, env: Any, event: str) -> dict[str, Any]:
    """The configuration to run on; what was wrong with it is said on stderr.

    Invalid parts are left out (see config.load_lenient) rather than costing the
    hook its work; an unparsable file is also logged, and doctor reports all of it.
    """
    config, problems = config_mod.load_lenient(paths, env)
    if problems:
        warn(f"configuration: {'; '.join(problems)}")
        if any(p.startswith("file ignored") for p in problems):
            log_error(paths, event, "config", problems[0])
    return config


def run(event: str, handler: Handler, env: Any = None, fast_exit: bool = True) -> int:
    """Run one hook call for ``event`` and exit 0 (see module docstring).

    With ``fast_exit`` false (tests in-process) it returns 0 instead of ending the process.
    """
    env = os.environ if env is None else env
    # Claude Code passes no arguments; a person trying the executable may (one list check on the hot path).
    if fast_exit and len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help", "--version"):
        return _usage(event, handler, sys.argv[1])
    try:
        return _run(event, handler, env, fast_exit)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never exit 1
        import traceback

        warn(f"{event}: internal error ({type(exc).__name__}: {exc}); the agent carries on")
        log_error(Paths(env), event, "error", f"{type(exc).__name__}: {exc}", None, traceback.format_exc())
        if fast_exit:
            _exit_now()
        return 0


def _usage(event: str, handler: Handler, flag: str) -> int:
    """Answer ``--help`` / ``--version`` instead of waiting for a payload on stdin."""
    from agent_hooks import __version__

    exe = os.path.basename(sys.argv[0]) or "agent-hook-*"
    if flag == "--version":
        sys.stdout.write(f"{exe} (agent-hooks) {__version__}\n")
        return 0
    doc = (sys.modules.get(getattr(handler, "__module__", "")) or sys.modules[__name__]).__doc__ or ""
    sys.stdout.write(
        f"usage: {exe} < payload.json\n\n"
        f"The Claude Code {event} hook of agent-hooks {__version__}: {' '.join(doc.split())}\n\n"
        "Claude Code runs it with the event's JSON payload on stdin and reads its answer on stdout\n"
        "(one JSON object or nothing); it always exits 0, and problems go to the error log.\n"
        "Wire it with `agent-hook settings install`; check it with `agent-hook doctor`.\n"
        "Options: -h, --help  this text;  --version  the version.\n")
    return 0


def _exit_now() -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def _run(event: str, handler: Handler, env: Any, fast_exit: bool) -> int:
    os.umask(0o077)
    paths = Paths(env)
    config = load_config(paths, env, event)
    result = _Result(event)
    _thread.start_new_thread(_work, (handler, env, paths, config, result))
    deadline = max(50, int(config["runtime"]["deadline_ms"])) / 1000
    call = result.call
    if not result.finished.acquire(timeout=deadline) or not call.done:
        message = f"deadline of {int(deadline * 1000)} ms passed; answered fail-open"
        warn(f"{event}: {message}")
        log_error(paths, event, "timeout", message, call.session_id)
        count_error(paths, config, event, "timeout", message, call.session_id, busy_timeout_ms=250)
        _exit_now()  # the worker may still hold the store: do not wait for it
    try:
        emit(call.text)
    except (OSError, ValueError) as exc:
        log_error(paths, event, "error", f"could not write the answer: {exc}", call.session_id)
    if not fast_exit:
        return 0
    # Skip interpreter finalization: nothing is left to clean up, and it costs
    # every tool call a millisecond or more.
    _exit_now()
    return 0
