"""``POST /hooks/<Event>``: Claude Code's http hooks, answered by the same handlers as the executables.

The body is what a command hook reads on stdin; its ``hook_event_name`` must
be the route's event, as the executables check theirs (``POST /hooks`` takes
the event from the body). The session's variables arrive as headers (local.SESSION_ENV).
The request goes through agent_hooks.dispatch, under the same promises as the
executables. Where it runs:

* the tool events (INLINE_EVENTS), when no user handler can be due for the call
  (none installed, or none for its event and tool) and the body is small
  (INLINE_MAX_BYTES), run on the event loop itself: their work is a few reads
  and one short write, and handing them to a thread and back cost more than the
  work (p99 under 20 sessions 6.5 -> 1.3-2.5 ms, server CPU per request 2.0 ->
  0.9-1.5 ms; bench/bench_client.py). The loop's connection never waits: while
  another thread or process is writing, the call raises Deferred before it has
  changed anything; it is tried again on the loop a few times (INLINE_TRIES),
  then runs again from the start on the pool;
* everything else, and every deferred call, runs on the thread pool, with the
  deadline below.

The promises:

* deadline (``runtime.deadline_ms``): a call not done by then is answered with
  no decision; its thread carries on and commits its work (nothing lost), and
  the other requests are served by the other threads meanwhile;
* bad input, an unknown event, an internal error: 200 with an empty body (the
  tool proceeds, no decision), the one-line message in the
  ``X-Agent-Hooks-Problem`` header, the error log and the ``errors`` table.
  A body whose Content-Length is over ``runtime.max_payload_bytes`` is refused
  so without being read; one without a Content-Length (chunked) is read past the
  limit only to count it, never held;
* a caller who is not the server's user: 401, nothing read or written.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import time
from typing import TYPE_CHECKING, Any

from starlette.routing import BaseRoute

from agent_hooks import spool
from agent_hooks.dispatch import (
    Call,
    Deferred,
    count_error,
    dispatch,
    fail_closed_answer,
    log_error,
    report,
)
from agent_hooks.handlers.hook import maybe_any
from agent_hooks.output import for_http
from agent_hooks.payload import too_large
from agent_hooks.server import fastpath, local
from agent_hooks.server.app import UNAUTHORIZED, ServerState
from agent_hooks.server.recovery import StoreUnavailable
from agent_hooks.wiring.table import HOOKS

if TYPE_CHECKING:
    from agent_hooks.dispatch import Handler
    from agent_hooks.server.recovery import StoreWatch


# Answered on the event loop itself when they can be (see the module docstring): every tool call
# sends them, and their work is the guards and one short write, with no user handler to wait for.
INLINE_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
# A larger body goes to the pool: parsing and hashing 4 MiB takes ~70 ms, and on the loop every
# other session would wait for it.
INLINE_MAX_BYTES = 64 * 1024
# A call that finds the store's lock taken tries again this many times in all, this far apart,
# before it goes to the pool (3 tries deferred 20 of 2,000 calls in bursts of 20; 6 none).
INLINE_TRIES = 6
INLINE_RETRY_S = 0.001


def handlers() -> dict[str, Handler]:
    """Event name -> handler: the event module behind each executable of the wiring table."""
    table: dict[str, Handler] = {}
    for hook in HOOKS:
        module = importlib.import_module("agent_hooks.events." + hook.executable.removeprefix("agent-hook-")
                                         .replace("-", "_"))
        table[module.EVENT] = module.handle
    return table


def _spooling(watch: StoreWatch, call: Call, env: dict[str, str], config: dict[str, Any]) -> Handler:
    """The handler of every call while the store cannot be written: spool it, answer no decision."""
    def handle(_ctx: Any) -> None:
        watch.keep(call, env, config)

    return handle


def event_of(data: bytes) -> str:
    """The body's hook_event_name, or "unknown" (dispatch then says what is wrong)."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deeply
        return "unknown"
    event = doc.get("hook_event_name") if isinstance(doc, dict) else None
    if not isinstance(event, str) or not event:
        return "unknown"
    # A lone surrogate ("Stop\ud83d") is no text: every log line naming the event would fail to be written.
    return event.encode("utf-8", "backslashreplace").decode("utf-8")


class HookRoute:
    """``POST /hooks/<Event>`` as raw ASGI (agent_hooks.server.fastpath): every tool call of every
    session comes here. One per server; it holds the event table."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.table = handlers()
        self.prefix = len(local.HOOK_PATH)

    def work(self, call: Call, data: bytes, env: dict[str, str], config: dict[str, Any], store: Any = None) -> Call:
        state = self.state
        # config: the one the request read (one stat of the config file per request, not two).
        handler = self.table.get(call.event)
        watch = state.watch
        if handler is not None and store is None and not watch.down:
            try:
                store = state.store()
            except Exception as exc:  # noqa: BLE001 - dispatch opens it again and reports the failure
                if spool.unwritable(exc):
                    watch.failed(exc, "a hook call")
                store = None
        if handler is not None and watch.down:
            # The store cannot be written (agent_hooks.server.recovery): the payload is still checked,
            # then the call is spooled without trying the store; the retries are the watch's, and this
            # thread's connection must not hold the store's -shm read-only for them (ServerState.drop_store).
            state.drop_store()
            handler = _spooling(watch, call, env, config)

        def keep(c: Call, exc: BaseException) -> bool:
            kept = watch.keep(c, env, config, exc)
            if store is not None and store is not state._loop_store:
                state.drop_store()  # this pool thread's connection (see above)
            return kept

        dispatch(call, handler, data, env, state.paths, config, store, keep)
        return call

    def no_handler_due(self, event: str, data: bytes, env: dict[str, str], config: dict[str, Any]) -> bool:
        """True when no user handler can be due for this call: none installed, or none for this
        event and tool in the compiled registry (a handler for Stop keeps the tool calls here)."""
        state = self.state
        if not maybe_any(config, state.paths.config_dir):
            return True
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            return False  # bad input: the pool reports it anyway
        tool, cwd = (doc.get("tool_name"), doc.get("cwd")) if isinstance(doc, dict) else (None, None)
        if not isinstance(tool, str) or not (cwd is None or isinstance(cwd, str)):
            return False
        from agent_hooks.handlers import registry

        try:
            return registry.none_due(config, state.paths.config_dir, state.paths.state_dir, env, cwd, event, tool)
        except Exception:  # noqa: BLE001 - e.g. a cwd that is no path (a NUL, a lone surrogate), which the
            return False  # payload's checks repair or refuse: the pool's dispatch does it, and reports it

    async def on_the_loop(self, call: Call, data: bytes, env: dict[str, str], config: dict[str, Any]) -> bool:
        """Run the call inline (see the module docstring); False when it must go to the pool."""
        state = self.state
        for attempt in range(INLINE_TRIES):
            store = state.loop_store()
            if store is None:
                return False
            store.deferrable = True
            try:
                self.work(call, data, env, config, store)
                return True
            except Deferred as exc:
                if store.conn.in_transaction:  # not expected: start the next call on a fresh connection
                    state.drop_loop_store()
                if not exc.busy:
                    break
            if attempt < INLINE_TRIES - 1:
                # Another writer's transaction takes a millisecond or two: let it finish, serving the
                # other requests meanwhile, rather than hand this call to a thread at once.
                await asyncio.sleep(INLINE_RETRY_S)
        state.stats.count("deferred")
        return False

    async def __call__(self, scope: fastpath.Scope, receive: fastpath.Receive, send: fastpath.Send) -> None:
        state = self.state
        started = time.perf_counter()
        if not state.caller_allowed(scope):
            state.stats.count("unauthorized")
            await fastpath.send_json(send, 401, UNAUTHORIZED)
            return
        config = state.config
        path = scope["path"]
        limit = int(config["runtime"]["max_payload_bytes"])
        declared = fastpath.declared_length(scope)
        try:
            if declared is not None and declared > limit:
                raise fastpath.TooLarge(declared)  # refused unread: the parser drops what comes
            data = await fastpath.read_body(receive, limit)
        except fastpath.TooLarge as exc:  # never held: reported as the executables do
            call = Call(path[self.prefix:] if len(path) > self.prefix else "unknown")
            await state.run_blocking(report, state.paths, config, call, "bad_input", too_large(exc.size, limit))
            await _answer(state, send, call, started)
            return
        call = Call(path[self.prefix:] if len(path) > self.prefix else event_of(data))
        env = local.request_env(state.env, _Headers(scope["headers"]))
        inline = False
        try:
            inline = call.event in INLINE_EVENTS and len(data) <= INLINE_MAX_BYTES \
                and self.no_handler_due(call.event, data, env, config) and await self.on_the_loop(call, data, env, config)
        except Exception as exc:  # noqa: BLE001 - dispatch never raises before a commit; anything here is ours:
            import traceback  # the pool runs the call again, and the trace goes where doctor looks, not a 500

            log_error(state.paths, call.event, "error", f"on the event loop: {type(exc).__name__}: {exc}",
                      call.session_id, traceback.format_exc(), config)
        if inline:
            state.stats.count("inline")
            if call.hold is not None:
                await _hold(state, call, receive)
            await _answer(state, send, call, started)
            return
        deadline = max(50, int(config["runtime"]["deadline_ms"])) / 1000
        running = state.pool.submit(self.work, call, data, env, config)
        future = asyncio.wrap_future(running)
        try:
            # shield: on timeout the work goes on (queued or running) and commits.
            await asyncio.wait_for(asyncio.shield(future), deadline)
        except TimeoutError:
            closed = fail_closed_answer(config, call.event, f"the deadline of {int(deadline * 1000)} ms passed")
            answered = "denied (guards.fail_closed)" if closed else "answered fail-open"
            message = f"deadline of {int(deadline * 1000)} ms passed; {answered}"
            state.stats.count("timeout", (time.perf_counter() - started) * 1000)
            if closed:
                # The work goes on and commits what the guards decided; the client was told deny and
                # does not run the tool: once it commits, its record says so (a spooled one is replayed as one).
                running.add_done_callback(lambda _f: _later(state, _denied_past_deadline, state, call, data, message))
            await asyncio.to_thread(_record_timeout, state, config, call, message)
            await fastpath.send_bytes(send, 200, closed.encode("utf-8") if closed else b"",
                                      [(b"x-agent-hooks-problem", message.encode("latin-1"))])
            return
        if call.hold is not None:
            await _hold(state, call, receive)
        await _answer(state, send, call, started)





def routes(state: ServerState) -> list[BaseRoute]:
    hook = HookRoute(state)
    return [state.fast_route(local.HOOK_PATH + "{event}", hook),
            state.fast_route(local.HOOK_PATH.rstrip("/"), hook)]


async def _hold(state: ServerState, call: Call, receive: fastpath.Receive) -> None:
    """The handler recorded an approval to wait for: hold the request (features/approvals.py).
    Any failure gives the answer the call had without the wait (fail open, with a trace), or under
    strict guards (guards.fail_closed) a deny: a gated PreToolUse was not approved by anyone."""
    from agent_hooks.server import held

    try:
        await held.hold(state, call, receive)
    except Exception as exc:  # noqa: BLE001
        import traceback

        message = f"{type(exc).__name__}: {exc}"
        log_error(state.paths, call.event, "error", f"waiting for an approval: {message}",
                  call.session_id, traceback.format_exc(), state.config)
        closed = fail_closed_answer(state.config, call.event, f"waiting for an approval failed: {message}")
        if closed:
            call.text = closed


async def _answer(state: ServerState, send: fastpath.Send, call: Call, started: float) -> None:
    headers = []
    if call.problem:
        headers.append((b"x-agent-hooks-problem", header_value(call.problem)))
        state.stats.count("problem")
    # A request held for a person's answer would swamp the answer times: counted, not timed.
    state.stats.count("answered", None if call.hold is not None else (time.perf_counter() - started) * 1000)
    text = for_http(call.text)  # PreCompact's plain text as JSON: the only answer an http hook may give
    await fastpath.send_bytes(send, 200, text.encode("utf-8", "replace") if text else b"", headers)


def header_value(text: str, limit: int = 500) -> bytes:
    """``text`` as a header value: printable ASCII only (a payload's event name can hold a newline,
    which uvicorn refuses, and the client got no answer at all), at most ``limit`` characters."""
    return "".join(c if " " <= c <= "~" else "?" for c in text[:limit]).encode("ascii")


class _Headers:
    """An ASGI scope's headers as ``request_env`` reads them (``items()`` of str pairs)."""

    __slots__ = ("raw",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw

    def items(self) -> list[tuple[str, str]]:
        return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in self.raw]


async def startup(state: ServerState) -> None:
    """Open (and migrate) the store before the first hook call needs it."""
    def warm() -> None:
        try:
            state.store()
            # A store SQLite opened read-only answers reads and fails the first write: find out now,
            # so the first hook calls are spooled at once and the log says why from the start.
            state.watch.check("start")
        except Exception as exc:  # noqa: BLE001 - each call will report it with its own trace
            if spool.unwritable(exc):
                state.watch.failed(exc, "start")
            elif not isinstance(exc, StoreUnavailable):  # not opened: the watch has said so (ServerState.store)
                log_error(state.paths, "server", "error", f"store not ready at start: {type(exc).__name__}: {exc}")
        if state.watch.down:
            # Opened with a read-only -shm (left so by a worker that died during an outage), this connection
            # would keep every retry's connection read-only too, after the files are writable again.
            state.drop_store()
        else:
            state.watch.replay_left()

    await state.run_blocking(warm)
    # Everything loaded so far lives as long as the process: out of the collector's way, so a
    # full collection in the middle of a request does not walk it (measured: 35 ms on a busy machine).
    import gc

    gc.collect()
    gc.freeze()


def _later(state: ServerState, fn: Any, *args: Any) -> None:
    """``fn(*args)`` on the pool (a done callback may run on the event loop); not once it is shut down."""
    try:
        state.pool.submit(fn, *args)
    except RuntimeError:
        pass


def _denied_past_deadline(state: ServerState, call: Call, data: bytes, reason: str) -> None:
    """The PreToolUse answered deny at the deadline (strict guards) is recorded as denied, if the late
    work committed it as let through."""
    try:
        doc = json.loads(data)
        tool_use_id = doc.get("tool_use_id") if isinstance(doc, dict) else None
        if not call.session_id or not isinstance(tool_use_id, str):
            return
        with state.store().write() as conn:
            conn.execute("UPDATE tool_calls SET outcome = 'denied', decision = 'deny', rule = 'fail_closed',"
                         " reason = ? WHERE session_id = ? AND tool_use_id = ? AND outcome = 'pending'",
                         (reason[:2000], call.session_id, tool_use_id))
    except Exception as exc:  # noqa: BLE001 - the timeout itself is logged and counted already
        log_error(state.paths, call.event, "error", f"recording the deny given at the deadline: {exc}",
                  call.session_id, config=state.config)


def _record_timeout(state: ServerState, config: dict[str, Any], call: Call, message: str) -> None:
    log_error(state.paths, call.event, "timeout", message, call.session_id)
    count_error(state.paths, config, call.event, "timeout", message, call.session_id, busy_timeout_ms=250)
