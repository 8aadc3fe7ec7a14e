"""Running the due handlers: in priority order, each isolated, within the hook's deadline; then one merged verdict.

Isolation: an exception, a timeout, a result that is not the documented dict,
or an in-process handler that writes to stdout (our protocol) is logged with
the handler's name (error log and ``errors`` table), its result is dropped and
the next handler runs. In the command transport stdout's file descriptor is
moved away before the first handler runs, so not even ``os.write(1, ...)`` or a
child process can reach Claude Code; only output.emit writes the answer.

Merge: the strongest decision wins (deny and block, then warn, then allow; the
first of equals), and the first deny ends the run; contexts (and warnings'
reasons) are joined within ``handlers.context_budget_chars``; on PreToolUse
each ``updated_input`` is merged into the tool input in priority order, and the
next handler sees the result.
"""

from __future__ import annotations

import _thread
import json
import marshal
import os
import sys
import time

from agent_hooks.handlers import API_VERSION, registry

# Annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from agent_hooks.runner import Context

ALLOW, WARN, DENY = "allow", "warn", "deny"
RANK = {None: -1, "allow": 0, "warn": 1, "deny": 2, "block": 2}
# Where a deny or block means something (docs/handlers.md); elsewhere it is no decision, and the run goes on.
BLOCKING_EVENTS = frozenset({"PreToolUse", "UserPromptSubmit", "PostToolUse", "Stop", "PreCompact"})
CUT = " [… cut]"
# path of handler.py -> (its stamp, its handle function): a long-lived process reloads on change only.
_MODULES: dict[str, tuple[Any, Callable[[dict[str, Any]], Any]]] = {}


class Merged:
    """What the handlers decided together."""

    __slots__ = ("decision", "reason", "rule", "contexts", "tool_input", "ran", "failed")

    def __init__(self) -> None:
        self.decision: str = ALLOW
        self.reason: str | None = None
        self.rule: str | None = None  # "handler:<name>" of the decision
        self.contexts: list[str] = []
        self.tool_input: dict[str, Any] | None = None  # PreToolUse: the input after every updated_input
        self.ran: list[str] = []
        self.failed: list[str] = []


# -- stdout protection -------------------------------------------------------------------------

class _Stdout:
    """sys.stdout for the process once handlers run: handler threads write into their own buffer
    (which fails the handler), every other thread to the real stream."""

    def __init__(self, real: Any, answer_thread: int | None = None, other: Any = None) -> None:
        self.real = real
        self.owners: dict[int, list[str]] = {}
        # The command transport: only the thread that emits the answer (the main thread) reaches the
        # pipe; a thread a handler started is not in ``owners``, and its print would precede our JSON.
        self.answer_thread = answer_thread
        self.other = other

    def write(self, text: str) -> int:
        ident = _thread.get_ident()
        buf = self.owners.get(ident)
        if buf is None:
            if self.answer_thread is not None and ident != self.answer_thread:
                return self.other.write(text)
            return self.real.write(text)
        buf.append(str(text))
        return len(text)

    def flush(self) -> None:
        if _thread.get_ident() not in self.owners:
            self.real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def guard_stdout(fd_level: bool, answer_thread: int | None = None) -> _Stdout:
    """Install the thread-aware stdout (once). ``fd_level`` (the command transport, whose fd 1 is
    the pipe to Claude Code): fd 1 becomes a copy of stderr for good, and the answer goes out
    through a private duplicate of the pipe."""
    current = sys.stdout
    if isinstance(current, _Stdout):
        return current
    real = current
    if fd_level:
        try:
            current.flush()
            saved = os.dup(1)
            os.dup2(2, 1)
            real = open(saved, "w", encoding="utf-8", errors="surrogateescape", closefd=True)  # noqa: SIM115
        except (OSError, ValueError, AttributeError):
            real = current
    proxy = _Stdout(real, answer_thread if fd_level else None, sys.stderr)
    sys.stdout = proxy
    if fd_level:
        from agent_hooks import output

        output.ANSWER_STREAM = real  # a handler may rebind sys.stdout ("keep stdout clean"): not the answer
    return proxy


# -- the event a handler is given ----------------------------------------------------------------

def session_info(ctx: Context) -> dict[str, Any]:
    from agent_hooks.features.sessions import agent_name, role, task_id, tmux_session

    return {"id": ctx.payload.session_id, "agent": agent_name(ctx.env, ctx.config),
            "role": role(ctx.env, ctx.config), "task_id": task_id(ctx.env), "cwd": ctx.payload.cwd,
            "tmux_session": tmux_session(ctx.env)}


def data_dir(state_dir: str, name: str) -> str:
    """A directory the handler may write to: ``<state dir>/handlers/<name>``."""
    return os.path.join(state_dir, "handlers", name)


def event_for(ctx: Context, event: str, h: dict[str, Any], payload: dict[str, Any],
              session: dict[str, Any]) -> dict[str, Any]:
    """The documented event dict (docs/handlers.md, API version 1)."""
    ddir = data_dir(ctx.paths.state_dir, h["name"])
    if not os.path.isdir(ddir):  # one stat on the steady path (makedirs raises and catches)
        try:
            os.makedirs(ddir, mode=0o700, exist_ok=True)
        except OSError:
            pass
    return {"api_version": API_VERSION, "event": event, "payload": payload, "session": session,
            "config": registry.entry_of(ctx.config, h["name"]),
            "handler": {"name": h["name"], "dir": h["dir"], "source": h["source"], "data_dir": ddir}}


def private_copy(ev: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of the event, so one handler cannot change what the next is given, nor our own
    records. The event is JSON data, and marshal's round trip copies it ~5x faster than json's."""
    try:
        return marshal.loads(marshal.dumps(ev))
    except ValueError:  # a config value marshal cannot take (a TOML date): through JSON, as text
        return json.loads(json.dumps(ev, default=str))


# -- calling one handler -----------------------------------------------------------------------

def _code(entry: str, stamp: Any, state_dir: str) -> Any:
    """handler.py compiled, from a marshal cache keyed by its stamp: a process's first
    compile() costs ~2 ms of CPU, a marshal load ~0.06 ms (what a .pyc does for a module)."""
    from agent_hooks.hashing import sha256

    key = sha256(entry.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    path = os.path.join(state_dir, "cache", "code", f"{key}.bin")
    header = json.dumps([entry, stamp, sys.implementation.cache_tag]).encode() + b"\n"
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data.startswith(header):
            return marshal.loads(data[len(header):])
    except (OSError, ValueError, EOFError, TypeError):
        pass
    with open(entry, encoding="utf-8") as f:
        code = compile(f.read(), entry, "exec")
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(header + marshal.dumps(code))
        os.replace(tmp, path)
    except OSError:
        pass  # no cache: compiled again next call
    return code


def _load(h: dict[str, Any], state_dir: str) -> Callable[[dict[str, Any]], Any]:
    entry = h["entry"]
    stamp = registry.stamp(entry)
    memo = _MODULES.get(entry)
    if memo is not None and memo[0] == stamp:
        return memo[1]
    code = _code(entry, stamp, state_dir)
    namespace: dict[str, Any] = {"__name__": f"agent_hooks_handler_{h['name'].replace('-', '_')}",
                                 "__file__": entry, "__builtins__": __builtins__}
    exec(code, namespace)  # noqa: S102 - the operator installed and enabled this handler
    fn = namespace.get("handle")
    if not callable(fn):
        raise TypeError("handler.py defines no handle(event) function")
    _MODULES[entry] = (stamp, fn)
    return fn


def call_python(h: dict[str, Any], event: dict[str, Any], printed: list[str], state_dir: str) -> tuple[Any, str | None]:
    """(result, error) of an in-process handler, called on this thread (the run's worker)."""
    try:
        result = _load(h, state_dir)(event)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included
        import traceback

        tb = traceback.format_exc().strip().splitlines()
        return None, f"raised {type(exc).__name__}: {exc}" + (f" ({tb[-3].strip()})" if len(tb) >= 3 else "")
    if printed:
        text = "".join(printed)
        return None, (f"wrote {len(text)} characters to stdout, which is the hook protocol"
                      f" (use the result's context, or stderr): {text[:120]!r}")
    return result, None


def validate(result: Any, event: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the result as documented, or None for no opinion; what is wrong with it)."""
    if result is None:
        return None, None
    if not isinstance(result, dict):
        return None, f"returned {type(result).__name__}; expected a dict (or None)"
    decision = result.get("decision")
    if decision is not None and (not isinstance(decision, str) or decision not in RANK):
        return None, f"decision {str(decision)[:80]!r} is not allow, warn, deny or block"
    texts: dict[str, str | None] = {}
    for key in ("reason", "context"):
        text = result.get(key)
        if text is not None and not isinstance(text, str):
            return None, f"{key} must be a string"
        texts[key] = None if text is None else utf8(text)
    updated = result.get("updated_input")
    if updated is not None:
        if not isinstance(updated, dict):
            return None, "updated_input must be an object"
        if not all(isinstance(k, str) for k in updated):
            return None, "updated_input's keys must be strings"
        # It goes to Claude Code as JSON: what json.dumps refuses would cost the whole answer (an
        # internal error in render), and NaN or Infinity would make the answer invalid JSON.
        try:
            json.dumps(updated, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            return None, f"updated_input is not JSON: {type(exc).__name__}: {str(exc)[:120]}"
    return {"decision": decision, **texts, "updated_input": updated}, None


def utf8(text: str) -> str:
    """``text`` with each lone surrogate ("\\ud800", valid in a Python string and in JSON's escapes) as "?":
    UTF-8 cannot encode one, so SQLite would refuse a deny's reason (and the deny would be lost)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


# -- the run ---------------------------------------------------------------------------------

def _fail(ctx: Context, event: str, name: str, message: str) -> None:
    from agent_hooks.log import log_error
    from agent_hooks.store import record_error

    text = f"handler {name}: {message}"
    log_error(ctx.paths, event, "handler", text, ctx.payload.session_id)
    try:
        record_error(ctx.store.conn, event, "handler", text, ctx.payload.session_id)
    except Exception:  # noqa: BLE001 - the log line is the trace; a busy store must not cost the answer
        pass


def budget_s(ctx: Context) -> float:
    """Seconds the handlers may still use: up to the hook's deadline, minus a margin for the answer."""
    cfg = ctx.config
    deadline = max(50, int(cfg["runtime"]["deadline_ms"])) / 1000
    margin = max(0, int(cfg["handlers"].get("deadline_margin_ms", 300))) / 1000
    return ctx.started + deadline - margin - time.time()


class _Worker:
    """A thread that runs one call's handlers at a time. A long-lived process (the server) parks it
    between calls rather than start a thread per call (~0.1-0.3 ms each). One that was abandoned
    (its handler overran) parks once that handler returns, if it ever does."""

    MAX_IDLE = 8
    idle: list[_Worker] = []
    idle_lock = _thread.allocate_lock()

    __slots__ = ("wake", "job")

    def __init__(self) -> None:
        self.wake = _thread.allocate_lock()
        self.wake.acquire()
        self.job: tuple[Callable[..., None], tuple[Any, ...]] | None = None
        _thread.start_new_thread(self.loop, ())

    @classmethod
    def start(cls, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        with cls.idle_lock:
            worker = cls.idle.pop() if cls.idle else None
        if worker is None:
            worker = cls()
        worker.job = (fn, args)
        worker.wake.release()

    def loop(self) -> None:
        while True:
            self.wake.acquire()
            job, self.job = self.job, None
            if job is not None:
                job[0](*job[1])  # an exception ends the thread, with its traceback on stderr
            with self.idle_lock:
                if len(self.idle) >= self.MAX_IDLE:
                    return
                self.idle.append(self)


class _Run:
    """One hook call's handlers. The loop runs on one worker thread (one hand-off per call, whatever
    the number of handlers); the caller's thread watches the clock and, when a handler overruns,
    abandons that worker and hands the rest to another, starting at the next handler."""

    def __init__(self, ctx: Context, event: str, handlers: list[dict[str, Any]], out: _Stdout) -> None:
        self.ctx, self.event, self.handlers, self.out = ctx, event, handlers, out
        self.lock = _thread.allocate_lock()  # guards everything below
        self.merged = Merged()
        self.payload: dict[str, Any] = ctx.payload.raw
        self.session = session_info(ctx)
        self.default_ms = int(ctx.config["handlers"].get("default_timeout_ms", 1000))
        self.next = 0
        self.gen = 0
        self.current: tuple[str, float, int] | None = None  # running handler: name, monotonic deadline, timeout ms
        self.failures: list[tuple[str, str]] = []
        self.finished = _thread.allocate_lock()

    def start_worker(self) -> None:
        self.gen += 1
        self.finished = done = _thread.allocate_lock()
        done.acquire()
        _Worker.start(self.work, (self.gen, done))

    def work(self, gen: int, done: Any) -> None:
        """The handlers, one after the other, until all ran, a deny ends the run, or the watcher
        abandons this worker. Nothing may raise out of here: the thread would die with a traceback
        on stderr only, and every later handler would be skipped without a word in the error log."""
        printed: list[str] = []
        me = _thread.get_ident()
        self.out.owners[me] = printed  # until this returns: an abandoned handler's late print is caught too
        try:
            while True:
                with self.lock:
                    if gen != self.gen or self.next >= len(self.handlers) or self.merged.decision == DENY:
                        return  # all run, abandoned, or a deny ended the run
                    h = self.handlers[self.next]
                    self.next += 1
                    timeout_s = self.schedule(h)
                    if timeout_s is None:
                        continue
                    payload = self.payload
                del printed[:]
                result, error = self.call(h, payload, timeout_s, printed)
                with self.lock:
                    if gen != self.gen:
                        return  # timed out meanwhile: its result is ignored
                    self.current = None
                    if error is None:
                        try:
                            self.apply(h, result)
                        except Exception as exc:  # noqa: BLE001 - see the docstring
                            error = f"result not applied: {type(exc).__name__}: {exc}"
                    if error is not None:
                        self.failures.append((h["name"], error))
        finally:
            # Not registered past the run: a thread started later may get this id (the server's pool).
            self.out.owners.pop(me, None)
            done.release()

    def schedule(self, h: dict[str, Any]) -> float | None:
        """(Under the lock.) The seconds ``h`` may take, its deadline set for the watcher; None, with
        the failure noted, when it cannot run: the hook's deadline is reached, or a setting is nan."""
        try:
            left = budget_s(self.ctx)
            if left <= 0.005:
                self.failures.append((h["name"], "not run: the hook's deadline is reached"))
                return None
            # Compared in ms, not divided first: a timeout_ms too large for a float is just long.
            timeout_s = min(left * 1000, h["timeout_ms"] or self.default_ms) / 1000
            grace = 0.25 if h["kind"] == "exec" else 0.0  # an executable is killed by its own timeout
            self.current = (h["name"], time.monotonic() + timeout_s + grace, int(timeout_s * 1000))
            return timeout_s
        except Exception as exc:  # noqa: BLE001 - a value our arithmetic cannot take
            self.failures.append((h["name"], f"not run: {type(exc).__name__}: {exc}"))
            return None

    def call(self, h: dict[str, Any], payload: dict[str, Any], timeout_s: float,
             printed: list[str]) -> tuple[dict[str, Any] | None, str | None]:
        """(the validated result, what went wrong) of one handler; what of ours raises around it
        fails that handler, not the run."""
        try:
            ev = event_for(self.ctx, self.event, h, payload, self.session)
            if h["kind"] == "python":
                result, error = call_python(h, private_copy(ev), printed, self.ctx.paths.state_dir)
            else:
                from agent_hooks.handlers.executable import call_exec  # subprocess: only for these

                result, error = call_exec(h, ev, timeout_s, self.ctx.env, self.ctx.payload.cwd)
            return validate(result, self.event) if error is None else (None, error)
        except Exception as exc:  # noqa: BLE001 - ours, around the handler
            return None, f"could not be run: {type(exc).__name__}: {exc}"

    def apply(self, h: dict[str, Any], result: dict[str, Any] | None) -> None:
        merged = self.merged
        merged.ran.append(h["name"])
        if result is None:
            return
        updated = result["updated_input"]
        if updated is not None and self.event == "PreToolUse":
            tool_input = {**(self.payload.get("tool_input") or {}), **updated}
            tool_input = {k: v for k, v in tool_input.items() if v is not None}  # null removes a key
            self.payload = {**self.payload, "tool_input": tool_input}
            merged.tool_input = tool_input
        decision = result["decision"]
        if RANK[decision] == RANK[DENY] and self.event not in BLOCKING_EVENTS:
            decision = None  # it cannot block here: ending the run would only skip the later handlers
        text = result["context"]
        if decision == WARN and result["reason"]:
            text = result["reason"] if not text else f"{result['reason']}\n{text}"
        if text:
            merged.contexts.append(text)
        if RANK[decision] > RANK[merged.decision]:
            merged.decision = DENY if decision == "block" else decision
            merged.reason = result["reason"] or f"{decision} by handler {h['name']}"
            merged.rule = f"handler:{h['name']}"

    def watch(self) -> Merged:
        self.start_worker()
        while True:
            with self.lock:
                current, finished = self.current, self.finished
            now = time.monotonic()
            # No handler started yet (or between two): look again shortly, then wait for its deadline.
            wait = current[1] - now if current else 0.005
            if finished.acquire(timeout=max(0.001, wait)):
                break
            with self.lock:
                current = self.current
                if current is None or time.monotonic() < current[1]:
                    continue
                self.failures.append((current[0], f"timed out after {current[2]} ms"
                                                  " (left running; its result will be ignored)"))
                self.current = None
                self.start_worker()
        return self.merged


def run(ctx: Context, event: str, handlers: list[dict[str, Any]]) -> Merged:
    """Run ``handlers`` (already due, in priority order) for this call and merge their results."""
    from agent_hooks import output

    out = guard_stdout(output.STDOUT_IS_PROTOCOL, output.ANSWER_THREAD)
    state = _Run(ctx, event, handlers, out)
    merged = state.watch()
    with state.lock:
        failures = list(state.failures)
    for name, message in failures:  # here, on the caller's thread: the store's connection is its own
        _fail(ctx, event, name, message)
        merged.failed.append(name)
    merged.contexts = clip_contexts(merged.contexts, int(ctx.config["handlers"].get("context_budget_chars", 4000)))
    return merged


def clip_contexts(texts: list[str], budget: int) -> list[str]:
    """The contexts in order, cut so that together they fit ``budget`` characters."""
    out: list[str] = []
    used = 0
    for i, text in enumerate(texts):
        room = budget - used
        if room <= 0:
            out.append(f"[{len(texts) - i} more handler context(s) cut: over the budget]")
            break
        if len(text) > room:
            text = text[: max(0, room - len(CUT))] + CUT
        out.append(text)
        used += len(text)
    return out
