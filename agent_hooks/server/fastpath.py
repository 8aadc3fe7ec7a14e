"""The hot routes (``POST /hooks/<Event>``, ``POST /api/hooks/ingest``) as raw ASGI, ahead of Starlette.

Starlette's per-request machinery (its two default middlewares, the router
matching every route's regex in turn, a Request and a Response object, the
response's own ``__call__``) cost more server CPU per request than the work
behind the two routes that carry nearly all the traffic. Those routes are
written here as plain ASGI callables: :class:`FastPath` sends a request whose
method and path are one of them straight to it, and everything else (other
routes, another method on the same path, a trailing slash, lifespan,
WebSockets) to the Starlette app as before. The same callables are also
registered as Starlette routes, so there is one implementation of each, and
the answers are byte for byte what the Starlette versions sent.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from agent_hooks.server import jsonout

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("agent_hooks.server")

_JSON = (b"content-type", b"application/json")
_PLAIN = (b"content-type", b"text/plain; charset=utf-8")


class Disconnected(Exception):
    """The client went away before its body arrived: nothing to answer."""


class TooLarge(Exception):
    """The body passed the route's limit; ``size`` is its whole length (read, and dropped)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


async def read_body(receive: Receive, limit: int | None = None) -> bytes:
    """The request's whole body (what ``Request.body()`` returns). Past ``limit`` bytes the rest
    is read and dropped, not kept (a Content-Length can be left out), and TooLarge is raised.
    (The hook routes: bad input is reported with its size. The API routes stop at the limit
    instead: agent_hooks.server.body.)"""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            size += len(chunk)
            if limit is None or size <= limit:
                chunks.append(chunk)
            else:
                chunks.clear()
            if not message.get("more_body", False):
                if limit is not None and size > limit:
                    raise TooLarge(size)
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise Disconnected


def declared_length(scope: Scope) -> int | None:
    """The request's ``Content-Length`` as a number, or None (absent: a chunked body; or not digits,
    which the HTTP parser refuses before any app sees it)."""
    for key, value in scope["headers"]:
        if key == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def json_bytes(content: Any) -> bytes:
    """JSON as the routes' JSONResponse renders it (compact, UTF-8, strict: agent_hooks.server.jsonout)."""
    return jsonout.dumps(content)


async def send_bytes(send: Send, status: int, body: bytes,
                     headers: list[tuple[bytes, bytes]] | None = None, content_type: tuple[bytes, bytes] = _JSON) -> None:
    """One complete answer; headers in Starlette's order (the given ones, content-length, content-type)."""
    raw = list(headers) if headers else []
    raw.append((b"content-length", str(len(body)).encode()))
    raw.append(content_type)
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, content: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A JSON answer, as ``JSONResponse(content, status_code=status, headers=headers)`` would send it."""
    await send_bytes(send, status, json_bytes(content), headers)


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of a header (``name`` in lower case, as ASGI servers give them), or None."""
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


class Endpoint:
    """A fast route's callable as a Starlette route endpoint (an ASGI app, not a request handler)."""

    def __init__(self, fn: ASGIApp) -> None:
        self.fn = fn

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _guarded(self.fn, scope, receive, send)


Door = Callable[[Scope], str | None]
Refuse = Callable[[Scope, Receive, Send, str], Awaitable[None]]


class FastPath:
    """ASGI app: the registered (method, path) pairs go straight to their callables, the rest to ``app``.

    ``door``, when given, sees every http and WebSocket request first, whatever its route (a
    fast one, a Starlette one, none): a reason it returns is answered by ``refuse`` and
    the request goes no further. This is the one place every request passes, so a new route
    cannot forget the checks (agent_hooks.server.access.front_door).

    ``state`` is the Starlette app's (``app.state.server`` keeps working on this object).
    """

    def __init__(self, app: Any, exact: dict[tuple[str, str], ASGIApp],
                 prefixes: list[tuple[str, str, ASGIApp]], door: Door | None = None,
                 refuse: Refuse | None = None) -> None:
        self.app = app
        self.state = app.state
        self.exact = exact
        self.prefixes = prefixes
        self.door = door
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "lifespan" and self.door is not None:
            problem = self.door(scope)
            if problem is not None:
                assert self.refuse is not None
                await self.refuse(scope, receive, send, problem)
                return
        if kind == "http":
            method, path = scope["method"], scope["path"]
            target = self.exact.get((method, path))
            if target is None:
                for m, prefix, app in self.prefixes:
                    # A prefix route takes one more non-empty path segment ("/hooks/{event}").
                    if m == method and path.startswith(prefix) and len(path) > len(prefix) \
                            and "/" not in path[len(prefix):]:
                        target = app
                        break
            if target is not None:
                await _guarded(target, scope, receive, send)
                return
        await self.app(scope, receive, send)


def route(path: str, fn: ASGIApp, method: str, exact: dict[tuple[str, str], ASGIApp],
          prefixes: list[tuple[str, str, ASGIApp]]) -> Any:
    """Register ``fn`` for ``method`` on ``path`` (``/x/{name}``: a prefix route) and return the
    same callable as a Starlette Route, for everything the fast path does not take."""
    from starlette.routing import Route

    if path.endswith("}"):
        prefixes.append((method, path[:path.rindex("{")], fn))
    else:
        exact[(method, path)] = fn
    return Route(path, Endpoint(fn), methods=[method])


async def _guarded(target: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """Run a fast route; an exception is answered 500 as Starlette's ServerErrorMiddleware does, and logged."""
    started = False

    async def tracking_send(message: Message) -> None:
        nonlocal started
        if message["type"] == "http.response.start":
            started = True
        await send(message)

    try:
        await target(scope, receive, tracking_send)
    except Disconnected:
        return
    except Exception as exc:
        status = getattr(exc, "http_status", None)
        if isinstance(status, int) and not started:
            # An error that names its answer (recovery.StoreUnavailable: 503), said by its owner already.
            await send_json(send, status, {"error": str(exc)})
            return
        log.exception("error answering %s %s", scope.get("method"), scope.get("path"))
        if not started:
            await send_bytes(send, 500, b"Internal Server Error", content_type=_PLAIN)
