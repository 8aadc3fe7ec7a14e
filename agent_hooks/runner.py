"""Every hook executable goes through :func:`run`: the stdin transport.

It reads stdin and hands the bytes to :func:`agent_hooks.dispatch.dispatch`
(payload, Context, handler, answer; bad input and internal errors fail open
with a trace), under the deadline: the work runs in a daemon thread; if it is
not done ``runtime.deadline_ms`` after its payload was read the main thread gives
the fail-open answer (nothing) and exits 0, whatever the thread is stuck in (a
locked store, a slow disk). A payload that comes late is waited for up to a
second before Claude Code's own hook timeout (``install.hook_timeout_s``).
The resident server (agent_hooks.server.hooks) is the other transport over the
same dispatch.

Nothing here imports click, httpx, sqlite-utils or filelock.
"""

from __future__ import annotations

import _thread  # threading's import costs ~1 ms per call; a lock and a thread are all we need
import os
import sys
import time

from agent_hooks import config as config_mod
from agent_hooks import output, spool
from agent_hooks.context import Context
from agent_hooks.dispatch import Call, count_error, dispatch, fail_closed_answer, log_error, report, save_to_spool
from agent_hooks.output import emit, warn
from agent_hooks.paths import Paths

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_hooks.dispatch import Handler

# Context and log_error live in context.py and log.py (log_error through dispatch, loaded on first use);
# event modules and tests import them from here.
__all__ = ["Context", "count_error", "load_config", "log_error", "run"]


class _Result:
    __slots__ = ("call", "finished", "read")

    def __init__(self, event: str) -> None:
        self.call = Call(event)
        # Held until stdin is read: the deadline counts from the payload, not from our start.
        self.read = _thread.allocate_lock()
        self.read.acquire()
        # Held while the worker runs; the main thread waits on it with the deadline.
        self.finished = _thread.allocate_lock()
        self.finished.acquire()


def _work(handler: Handler, env: Any, paths: Paths, config: dict[str, Any], result: _Result) -> None:
    try:
        try:
            data = sys.stdin.buffer.read()
            result.call.data = data
        except BaseException as exc:  # noqa: BLE001 - fail open on anything
            report(paths, config, result.call, "error", f"{type(exc).__name__}: {exc}",
                   said=f"internal error ({type(exc).__name__}: {exc}); the agent carries on")
            result.call.done = True
            return
        finally:
            result.read.release()
        # The store connection is left open on purpose: the process ends with
        # os._exit, and a close would make this (the last) connection checkpoint
        # the WAL and fsync on every hook call. Committed data is safe in the WAL.
        dispatch(result.call, handler, data, env, paths, config)
    finally:
        result.finished.release()


def _at_deadline(env: Any, paths: Paths, config: dict[str, Any], call: Call, deadline_ms: int,
                 left_s: float) -> str:
    """The spool point passed (``left_s`` before the deadline): keep the work, committed or spooled.

    The gate is closed first, so a worker that has not committed yet never will:
    "committed" (the write is in), "spooled", "unread" (no payload arrived: nothing
    to keep) or "lost" (the spool refused it, or a commit outlived every wait).
    """
    wait_s = int(config["spool"]["commit_wait_ms"]) / 1000
    committed = call.gate.abandon(left_s)
    if committed is None:
        # A commit under way at the deadline: letting it finish beats losing the call.
        waited = time.monotonic()
        committed = call.gate.abandon(wait_s)
        warn(f"{call.event}: answered {int((time.monotonic() - waited) * 1000)} ms past the deadline:"
             f" a commit was under way")
    if committed:
        return "committed"
    if committed is None:
        return "lost"
    if call.data is None:
        return "unread"
    if save_to_spool(paths, config, env, call, f"deadline of {deadline_ms} ms passed before the write"):
        return "spooled"
    return "lost"


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

        closed = _fail_closed_text(env, event, f"internal error: {type(exc).__name__}: {exc}")
        warn(f"{event}: internal error ({type(exc).__name__}: {exc}); "
             + ("the tool call is denied (guards.fail_closed)" if closed else "the agent carries on"))
        log_error(Paths(env), event, "error", f"{type(exc).__name__}: {exc}", None, traceback.format_exc())
        if closed:
            _emit_quietly(closed)
        if fast_exit:
            _exit_now()
        return 0


def _fail_closed_text(env: Any, event: str, why: str) -> str | None:
    """The deny of strict guards for a PreToolUse that failed before anything was set up (None:
    fail open). The configuration is read again here: what failed may have been its first reading."""
    if event != "PreToolUse":
        return None
    try:
        config, _problems = config_mod.load_lenient(Paths(env), env)
        return fail_closed_answer(config, event, why)
    except Exception:  # noqa: BLE001 - cannot tell: fail open, as without strict guards
        return None


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


def _held(paths: Paths, config: dict[str, Any], call: Call) -> str | None:
    """Wait for the approval the handler recorded (features/approvals.py), then the answer to give.

    The call's work is committed by now; the wait is on the local store only. Any failure here
    gives the answer the call had without the wait (no decision for a permission dialog), or
    under strict guards (guards.fail_closed) a deny: a gated PreToolUse was not approved by anyone.
    """
    from agent_hooks.features import approvals

    try:
        outcome = approvals.hold_command(paths.store, int(config["runtime"]["busy_timeout_ms"]), call.hold)
        return output.render(call.event, outcome) if outcome is not None else None
    except Exception as exc:  # noqa: BLE001 - fail open: the client's own dialog or rules decide
        import traceback

        message = f"{type(exc).__name__}: {exc}"
        log_error(paths, call.event, "error", f"waiting for an approval: {message}",
                  call.session_id, traceback.format_exc(), config)
        return fail_closed_answer(config, call.event, f"waiting for an approval failed: {message}") or call.text


def _emit_quietly(text: str) -> None:
    """A strict guard's deny on the way out; a closed stdout is no one left to tell."""
    try:
        emit(text)
    except (OSError, ValueError):
        pass


def _exit_now() -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def _run(event: str, handler: Handler, env: Any, fast_exit: bool) -> int:
    os.umask(0o077)
    # A hook process (fast_exit): fd 1 is the answer's pipe, so user handlers are kept off it.
    output.STDOUT_IS_PROTOCOL = fast_exit
    output.ANSWER_THREAD = _thread.get_ident()  # emit() below runs on this thread
    paths = Paths(env)
    config = load_config(paths, env, event)
    result = _Result(event)
    _thread.start_new_thread(_work, (handler, env, paths, config, result))
    deadline = max(50, int(config["runtime"]["deadline_ms"])) / 1000
    # Claude Code kills the hook at its own timeout, counted from our start: answer a second before it.
    hard = max(deadline, float(config["install"]["hook_timeout_s"]) - 1)
    call = result.call
    # The spool point comes a little before the deadline: a commit under way then can still land in time.
    margin = min(int(config["spool"]["commit_wait_ms"]) / 1000, deadline / 4)
    began = time.monotonic()
    # A starved client may write the payload late; that wait is the client's, not ours. So the
    # deadline counts from the read, within the client's timeout, and a late payload is still kept.
    if result.read.acquire(timeout=hard - margin):
        answer_by = min(time.monotonic() + deadline, began + hard)
    else:
        answer_by = began + hard
    if not result.finished.acquire(timeout=max(0.0, answer_by - margin - time.monotonic())) or not call.done:
        kept = _at_deadline(env, paths, config, call, int(deadline * 1000),
                            max(0.001, answer_by - time.monotonic()))
        left = answer_by - time.monotonic()
        if kept == "committed" and left > 0 and result.finished.acquire(timeout=left) and call.done:
            pass  # the work is in and the answer came in time after all: give it
        else:
            closed = fail_closed_answer(config, event, f"the deadline of {int(deadline * 1000)} ms passed")
            if kept in ("unread", "lost"):
                unread = " before the payload was read" if kept == "unread" else ""
                answered = "denied (guards.fail_closed)" if closed else "answered fail-open"
                message = f"deadline of {int(deadline * 1000)} ms passed{unread}; {answered}"
                warn(f"{event}: {message}")
                log_error(paths, event, "timeout", message, call.session_id, config=config)
                # Counted only if the store is free at once: the answer is due now.
                count_error(paths, config, event, "timeout", message, call.session_id, busy_timeout_ms=1)
            if closed:
                _emit_quietly(closed)
            _exit_now()  # the worker may still hold the store: do not wait for it
    if call.hold is not None:
        call.text = _held(paths, config, call)
    try:
        emit(call.text)
    except (OSError, ValueError) as exc:
        log_error(paths, event, "error", f"could not write the answer: {exc}", call.session_id)
    if spool.has_work(paths):  # after the answer; one listing when there is nothing owed
        try:
            spool.kick(paths, env)
        except Exception as exc:  # noqa: BLE001 - the spool stays; the next call tries again
            log_error(paths, event, "error", f"starting the spool replayer: {exc}", config=config)
    if not fast_exit:
        return 0
    # Skip interpreter finalization: nothing is left to clean up, and it costs
    # every tool call a millisecond or more.
    _exit_now()
    return 0
