"""One hook call without a transport: bytes -> payload -> Context -> handler -> answer.

Both transports go through :func:`dispatch`: the executables (runner.py:
stdin, a deadline thread, stdout) and the resident server (server/hooks.py:
a request body, a thread pool with a timeout, a response body). What is
promised for every call lives here once:

* bad input (empty, not JSON, not an object, wrong types, too large, not
  UTF-8, a known event sent to another event's hook) gets a one-line message,
  no decision, a line in the error log and a row in ``errors``;
* a payload for an event we have no handler for, sent to one of our
  executables (newer clients send more), is not bad input: it is accepted
  with no decision, one line on stderr and one in the notice log
  (``logs/notices.log``), and is not counted as an error;
* an internal error fails open the same way (no decision), with a traceback
  in the error log.

Standard library only: the executables import this on every tool call.
"""

from __future__ import annotations

import os
import time

from agent_hooks import spool
from agent_hooks.context import Context
from agent_hooks.output import render, warn
from agent_hooks.payload import PayloadError, UnknownEvent, parse
from agent_hooks.store import record_error

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from agent_hooks.output import Outcome
    from agent_hooks.paths import Paths
    from agent_hooks.store import Store

# Context and log_error live in their own modules, below the spool; the server and tests import them from here.
__all__ = ["Call", "Context", "Deferred", "count_error", "dispatch", "log_error", "report", "save_to_spool"]


def log_error(*args: Any, **kwargs: Any) -> None:
    """:func:`agent_hooks.log.log_error`, imported on first use: a call with nothing to log (every
    call, nearly) never loads the module, so moving it out of here cost the hook path nothing."""
    try:
        from agent_hooks.log import log_error as write
    except Exception:  # noqa: BLE001 - the log is the last resort; it must not raise
        return
    write(*args, **kwargs)


if TYPE_CHECKING:
    Handler = Callable[[Context], "Outcome | None"]


class Call:
    """One call's progress, shared with whoever enforces the deadline.

    ``session_id`` is known once the payload parses (for the timeout's log
    line); ``text`` is the answer (None: no decision); ``problem`` is the
    one-line message of bad input or an internal error.
    """

    __slots__ = ("event", "session_id", "text", "problem", "done", "data", "started", "gate", "call_id", "hold")

    def __init__(self, event: str) -> None:
        self.event = event
        self.session_id: str | None = None
        self.text: str | None = None
        self.problem: str | None = None
        self.done = False
        self.data: bytes | None = None  # the payload, once read: what a spool entry holds
        self.started = time.time()
        self.gate = spool.CommitGate()  # the deadline and the commit decide under it (agent_hooks.spool)
        # One id per call: the worker (store busy) and the deadline may both spool it; replay records it once.
        self.call_id = os.urandom(12).hex()
        # An approval the handler asked to wait for (features/approvals.Hold): the transport waits
        # for it after the call's work is committed, then replaces ``text`` with the answer.
        self.hold: Any = None


class Deferred(Exception):
    """The call met a busy store, bad input or an error before its first commit, on a connection
    that must not wait (``Store.deferrable``: the server's event loop). The transport runs it
    again from the start where waiting is allowed (a pool thread). Nothing was committed, logged
    or counted before it is raised (features/isolate.py re-raises instead of logging); a drainer
    start is guarded by its own grace file (forward/outbox.py). ``busy``: only a lock was in
    the way, so a retry moments later may succeed where the call is."""

    def __init__(self, why: str, busy: bool = False) -> None:
        super().__init__(why)
        self.busy = busy


def count_error(paths: Paths, config: dict[str, Any], event: str, kind: str, message: str,
                session_id: str | None, busy_timeout_ms: int | None = None) -> None:
    """Count the error in the store; if the store itself is the problem, the log has it."""
    try:
        import sqlite3

        if not os.path.exists(paths.store):
            return
        timeout = (busy_timeout_ms or config["runtime"]["busy_timeout_ms"]) / 1000
        conn = sqlite3.connect(paths.store, timeout=timeout, isolation_level=None)
        limits = config.get("errors") or {}
        try:
            record_error(conn, event, kind, message, session_id, int(limits.get("keep_rows", 2000)),
                         float(limits.get("keep_days", 30.0)))
        finally:
            conn.close()
    except Exception:  # noqa: BLE001
        pass


def save_to_spool(paths: Paths, config: dict[str, Any], env: Any, call: Call, why: str) -> bool:
    """Spool the call's payload for replay (see agent_hooks.spool); True when it is saved."""
    # Under strict guards a spooled PreToolUse is answered deny (fail_closed_answer): its replay says so.
    answered = "deny" if fails_closed(config, call.event) else None
    problem = spool.save(paths, config, call.event, call.data or b"", call.started, env, call_id=call.call_id,
                         answered=answered)
    if problem is None:
        warn(f"{call.event}: {why}; the call is spooled and will be recorded by the next hook or the drainer")
        log_error(paths, call.event, "spooled", why, call.session_id, config=config)
        return True
    log_error(paths, call.event, "error", f"{why}; the call could not be spooled: {problem}", call.session_id,
              config=config)
    return False


def report(paths: Paths, config: dict[str, Any], call: Call, kind: str, message: str,
           trace: str | None = None, said: str | None = None) -> None:
    """Leave the trace of a failed call: a stderr line (``said``, else ``message``),
    the error log and the ``errors`` table."""
    call.problem = said or message
    warn(f"{call.event}: {call.problem}")
    log_error(paths, call.event, kind, message, call.session_id, trace, config)
    count_error(paths, config, call.event, kind, message, call.session_id,
                busy_timeout_ms=None if kind == "bad_input" else 250)


def accept_unknown(paths: Paths, call: Call, event: str, session_id: str | None) -> None:
    """An event with no handler here: accepted, said on stderr and in the notice log, not an error."""
    message = f"no agent-hooks handler for {event} events; accepted, nothing done"
    where = "" if event == call.event else f" (sent to the {call.event} hook)"
    warn(f"{event}{where}: {message}")
    log_error(paths, event, "unknown_event", message + where, session_id, path=paths.notice_log)


def fails_closed(config: dict[str, Any], event: str) -> bool:
    """True when a PreToolUse that cannot decide must deny (``guards.fail_closed``; docs/server.md)."""
    return event == "PreToolUse" and config["guards"]["fail_closed"] is True


def fail_closed_answer(config: dict[str, Any], event: str, why: str) -> str | None:
    """The answer of a call that failed before it could decide: a deny saying why under strict
    guards (``guards.fail_closed``, PreToolUse only), else None (fail open: the tool runs)."""
    if not fails_closed(config, event):
        return None
    from agent_hooks.output import Outcome

    outcome = Outcome()
    outcome.deny(f"agent-hooks could not check this tool call ({why}), and strict guards"
                 " (guards.fail_closed) deny what they cannot check. Try the call again; if this"
                 " repeats, ask the user to run `agent-hook doctor`.")
    return render(event, outcome)


def _defer(store: Store | None, why: str, busy: bool = False) -> None:
    """Raise Deferred when ``store`` must not wait and the call has changed nothing yet: what
    comes next (a report, a spool, a retry) may wait for the store, so it happens on the pool."""
    if store is not None and store.deferrable:
        raise Deferred(why, busy)


def dispatch(call: Call, handler: Handler | None, data: bytes, env: Any, paths: Paths,
             config: dict[str, Any], store: Store | None = None,
             keep: Callable[[Call, BaseException], bool] | None = None) -> None:
    """Answer one call into ``call`` (see module docstring). Never raises, but for
    :class:`Deferred` from a store that must not wait.

    ``handler`` None means the event has no handler here: the payload is
    still checked, and then refused as bad input. ``keep``: what to do with a
    call whose store cannot be written (read-only, unreachable: see
    ``spool.unwritable``) instead of reporting it as an internal error; True
    when it took the call (the server spools it and retries the store).
    """
    call.data = data
    try:
        try:
            payload = parse(data, call.event, int(config["runtime"]["max_payload_bytes"]))
        except UnknownEvent as exc:
            accept_unknown(paths, call, exc.event, exc.session_id)
            call.done = True
            return
        except PayloadError as exc:
            _defer(store, "bad input is reported")
            report(paths, config, call, "bad_input", str(exc))
            call.done = True
            return
        call.session_id = payload.session_id
        if handler is None:
            # The server's routes: a request for an event we do not serve is refused as bad input,
            # so the problem header tells whoever wired it (tests/server/test_server.py).
            _defer(store, "bad input is reported")
            report(paths, config, call, "bad_input", f"no handler for the event {call.event!r}")
            call.done = True
            return
        if payload.notes:
            _defer(store, "repaired bad input is reported")
            # Repaired bad input: said and logged now, counted once the store is free.
            note = "; ".join(payload.notes)
            warn(f"{call.event}: bad input, repaired: {note}")
            log_error(paths, call.event, "bad_input", note, payload.session_id, config=config)
        ctx = Context(payload, config, paths, env, store, call.gate)
        ctx.started = call.started
        try:
            outcome = handler(ctx)
        finally:
            if payload.notes:
                count_error(paths, config, call.event, "bad_input", note, payload.session_id)
        if outcome is not None:
            call.text = render(call.event, outcome)
            call.hold = outcome.hold
        call.done = True
    except BaseException as exc:  # noqa: BLE001 - fail open on anything
        if isinstance(exc, spool.Abandoned):
            return  # the deadline came first and the work was spooled
        if isinstance(exc, Deferred):
            raise
        busy = spool.transient(exc)
        # Before the first commit nothing was changed: a busy store, or an error the pool's run will
        # meet again and report there (the error log and the errors table may have to wait for the store).
        _defer(store, f"{type(exc).__name__}: {exc}", busy)
        if busy and save_to_spool(paths, config, env, call, f"store busy ({exc})"):
            call.text = fail_closed_answer(config, call.event, "the store was busy; the call is kept for later")
            call.done = True
            return
        if keep is not None and spool.unwritable(exc) and keep(call, exc):
            return
        import traceback

        message = f"{type(exc).__name__}: {exc}"
        closed = fail_closed_answer(config, call.event, f"internal error: {message}")
        report(paths, config, call, "error", message, traceback.format_exc(),
               said=f"internal error ({message}); "
                    + ("the tool call is denied (guards.fail_closed)" if closed else "the agent carries on"))
        call.text = closed
        call.done = True
