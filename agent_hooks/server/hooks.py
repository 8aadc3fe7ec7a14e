"""``POST /hooks/<Event>``: Claude Code's http hooks, answered by the same handlers as the executables.

The body is what a command hook reads on stdin; its ``hook_event_name`` must
be the route's event, as the executables check theirs (``POST /hooks`` takes
the event from the body). The session's variables arrive as headers (local.SESSION_ENV).
The request goes through agent_hooks.dispatch on the thread pool, under the
same promises as the executables:

* deadline (``runtime.deadline_ms``): a call not done by then is answered with
  no decision; its thread carries on and commits its work (nothing lost), and
  the other requests are served by the other threads meanwhile;
* bad input, an unknown event, an internal error: 200 with an empty body (the
  tool proceeds, no decision), the one-line message in the
  ``X-Agent-Hooks-Problem`` header, the error log and the ``errors`` table;
* a caller who is not the server's user: 401, nothing read or written.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_hooks.dispatch import Call, count_error, dispatch, log_error
from agent_hooks.server import local
from agent_hooks.server.app import ServerState, unauthorized
from agent_hooks.wiring.table import HOOKS

if TYPE_CHECKING:
    from agent_hooks.dispatch import Handler


def handlers() -> dict[str, Handler]:
    """Event name -> handler: the event module behind each executable of the wiring table."""
    table: dict[str, Handler] = {}
    for hook in HOOKS:
        module = importlib.import_module("agent_hooks.events." + hook.executable.removeprefix("agent-hook-")
                                         .replace("-", "_"))
        table[module.EVENT] = module.handle
    return table


def event_of(data: bytes) -> str:
    """The body's hook_event_name, or "unknown" (dispatch then says what is wrong)."""
    import json

    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return "unknown"
    event = doc.get("hook_event_name") if isinstance(doc, dict) else None
    return event if isinstance(event, str) and event else "unknown"


def routes(state: ServerState) -> list[BaseRoute]:
    table = handlers()

    def work(call: Call, data: bytes, env: dict[str, str]) -> Call:
        config = state.config
        handler = table.get(call.event)
        store = None
        if handler is not None:
            try:
                store = state.store()
            except Exception:  # noqa: BLE001 - dispatch opens it again and reports the failure
                store = None
        dispatch(call, handler, data, env, state.paths, config, store)
        return call

    async def hook(request: Request) -> Response:
        started = time.perf_counter()
        if not state.caller_allowed(request):
            state.stats.count("unauthorized")
            return unauthorized()
        data = await request.body()
        call = Call(request.path_params.get("event") or event_of(data))
        env = local.request_env(state.env, request.headers)
        config = state.config
        deadline = max(50, int(config["runtime"]["deadline_ms"])) / 1000
        future = asyncio.wrap_future(state.pool.submit(work, call, data, env))
        try:
            # shield: on timeout the work goes on (queued or running) and commits.
            await asyncio.wait_for(asyncio.shield(future), deadline)
        except TimeoutError:
            message = f"deadline of {int(deadline * 1000)} ms passed; answered fail-open"
            state.stats.count("timeout", (time.perf_counter() - started) * 1000)
            await asyncio.to_thread(_record_timeout, state, config, call, message)
            return Response(b"", media_type="application/json", headers={"X-Agent-Hooks-Problem": message})
        headers = {}
        if call.problem:
            headers["X-Agent-Hooks-Problem"] = call.problem[:500].encode("ascii", "replace").decode()
            state.stats.count("problem")
        state.stats.count("answered", (time.perf_counter() - started) * 1000)
        return Response(call.text.encode() if call.text else b"", media_type="application/json", headers=headers)

    return [Route(local.HOOK_PATH + "{event}", hook, methods=["POST"]),
            Route(local.HOOK_PATH.rstrip("/"), hook, methods=["POST"])]


async def startup(state: ServerState) -> None:
    """Open (and migrate) the store before the first hook call needs it."""
    def warm() -> None:
        try:
            state.store()
        except Exception as exc:  # noqa: BLE001 - each call will report it with its own trace
            log_error(state.paths, "server", "error", f"store not ready at start: {type(exc).__name__}: {exc}")

    await state.run_blocking(warm)
    # Everything loaded so far lives as long as the process: out of the collector's way, so a
    # full collection in the middle of a request does not walk it (measured: 35 ms on a busy machine).
    import gc

    gc.collect()
    gc.freeze()


def _record_timeout(state: ServerState, config: dict[str, Any], call: Call, message: str) -> None:
    log_error(state.paths, call.event, "timeout", message, call.session_id)
    count_error(state.paths, config, call.event, "timeout", message, call.session_id, busy_timeout_ms=250)
