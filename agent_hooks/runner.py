"""Every hook executable goes through :func:`run`.

It reads stdin, validates the payload, opens the store, calls the event's
handler and prints its answer, under three promises:

* a deadline: the work runs in a daemon thread; if it is not done in
  ``runtime.deadline_ms`` the main thread gives the fail-open answer (nothing)
  and exits 0, whatever the thread is stuck in (a locked store, a slow disk);
* fail open, never silently: an internal error means exit 0 and no stdout, a
  JSON line in the error log under the state dir and a row in ``errors``;
* bad input (empty, not JSON, not an object, wrong types, too large, not UTF-8)
  gets a one-line message on stderr, exit 0, and is logged the same way;
* a payload for an event we have no handler for (newer clients send more) is
  accepted: exit 0, no answer, one line on stderr and in the notice log.

Nothing here imports click, httpx, sqlite-utils or filelock.
"""

from __future__ import annotations

import json
import os
import sys
import _thread  # threading's import costs ~1 ms per call; a lock and a thread are all we need
import time

from agent_hooks import config as config_mod
from agent_hooks.output import emit, render, warn
from agent_hooks.paths import Paths, ensure_dir
from agent_hooks.payload import Payload, PayloadError, UnknownEvent, parse
from agent_hooks.store import Store, record_error

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from agent_hooks.output import Outcome

MAX_LOG_BYTES = 1024 * 1024


class Context:
    """What a handler works with: the payload, configuration, store and environment."""

    __slots__ = ("payload", "config", "paths", "env", "started", "_store")

    def __init__(self, payload: Payload, config: dict[str, Any], paths: Paths, env: Any) -> None:
        self.payload = payload
        self.config = config
        self.paths = paths
        self.env = env
        self.started = time.time()
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.paths.store, self.config["runtime"]["busy_timeout_ms"])
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


if TYPE_CHECKING:
    Handler = Callable[[Context], "Outcome | None"]


def log_error(paths: Paths, event: str, kind: str, message: str, session_id: str | None = None,
              trace: str | None = None, path: str | None = None) -> None:
    """Append one JSON line to the error log (or ``path``; rotated at 1 MiB). Never raises."""
    try:
        ensure_dir(paths.log_dir)
        path = path or paths.error_log
        try:
            if os.path.getsize(path) > MAX_LOG_BYTES:
                os.replace(path, path + ".1")
        except OSError:
            pass
        entry = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "ts": time.time(),
            "event": event,
            "kind": kind,
            "session_id": session_id,
            "message": message,
            "pid": os.getpid(),
        }
        if trace:
            entry["traceback"] = trace
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
    except Exception:  # noqa: BLE001 - the log is the last resort; it must not raise
        pass


def _count_error(paths: Paths, config: dict[str, Any], event: str, kind: str, message: str,
                 session_id: str | None, busy_timeout_ms: int | None = None) -> None:
    """Count the error in the store; if the store itself is the problem, the log has it."""
    try:
        import sqlite3

        if not os.path.exists(paths.store):
            return
        timeout = (busy_timeout_ms or config["runtime"]["busy_timeout_ms"]) / 1000
        conn = sqlite3.connect(paths.store, timeout=timeout, isolation_level=None)
        try:
            record_error(conn, event, kind, message, session_id)
        finally:
            conn.close()
    except Exception:  # noqa: BLE001
        pass


class _Result:
    __slots__ = ("text", "done", "finished")

    def __init__(self) -> None:
        self.text: str | None = None
        self.done = False
        # Held while the worker runs; the main thread waits on it with the deadline.
        self.finished = _thread.allocate_lock()
        self.finished.acquire()


def _work(event: str, handler: Handler, env: Any, paths: Paths, config: dict[str, Any],
          result: _Result, session_box: list[str | None]) -> None:
    try:
        _handle(event, handler, env, paths, config, result, session_box)
    finally:
        result.finished.release()


def _handle(event: str, handler: Handler, env: Any, paths: Paths, config: dict[str, Any],
            result: _Result, session_box: list[str | None]) -> None:
    try:
        data = sys.stdin.buffer.read()
        try:
            payload = parse(data, event, int(config["runtime"]["max_payload_bytes"]))
        except UnknownEvent as exc:
            # Not bad input: the client is newer than our handlers, or wired us on more events.
            warn(f"{exc.event} (sent to the {event} hook): {exc}")
            log_error(paths, exc.event, "unknown_event", f"{exc} (sent to the {event} hook)", exc.session_id,
                      path=paths.notice_log)
            result.done = True
            return
        except PayloadError as exc:
            warn(f"{event}: {exc}")
            log_error(paths, event, "bad_input", str(exc))
            _count_error(paths, config, event, "bad_input", str(exc), None)
            result.done = True
            return
        session_box[0] = payload.session_id
        ctx = Context(payload, config, paths, env)
        # The connection is left open on purpose: the process ends with os._exit,
        # and a close would make this (the last) connection checkpoint the WAL
        # and fsync on every hook call. Committed data is safe in the WAL.
        outcome = handler(ctx)
        if outcome is not None:
            result.text = render(event, outcome)
        result.done = True
    except BaseException as exc:  # noqa: BLE001 - fail open on anything
        import traceback

        message = f"{type(exc).__name__}: {exc}"
        warn(f"{event}: internal error ({message}); the agent carries on")
        log_error(paths, event, "error", message, session_box[0], traceback.format_exc())
        _count_error(paths, config, event, "error", message, session_box[0], busy_timeout_ms=250)
        result.text = None
        result.done = True


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
    result = _Result()
    session_box: list[str | None] = [None]
    _thread.start_new_thread(_work, (event, handler, env, paths, config, result, session_box))
    deadline = max(50, int(config["runtime"]["deadline_ms"])) / 1000
    if not result.finished.acquire(timeout=deadline) or not result.done:
        message = f"deadline of {int(deadline * 1000)} ms passed; answered fail-open"
        warn(f"{event}: {message}")
        log_error(paths, event, "timeout", message, session_box[0])
        _count_error(paths, config, event, "timeout", message, session_box[0], busy_timeout_ms=250)
        _exit_now()  # the worker may still hold the store: do not wait for it
    try:
        emit(result.text)
    except (OSError, ValueError) as exc:
        log_error(paths, event, "error", f"could not write the answer: {exc}", session_box[0])
    if not fast_exit:
        return 0
    # Skip interpreter finalization: nothing is left to clean up, and it costs
    # every tool call a millisecond or more.
    _exit_now()
    return 0
