"""The one body reader of the API routes: bounded before it is read, parsed without a 500.

Every route that reads a JSON body (ingest, register, PATCH, the cancels)
goes through :func:`read_json`, so they refuse bad input alike, with a 4xx
and a message that says what is wrong:

* a ``Content-Length`` over the limit: 413 before a byte of the body is read
  (the HTTP parser drops what the client sends after it, without keeping it);
* a body without a length (chunked) that passes the limit: 413 as soon as it
  does, nothing past the limit read into memory;
* not JSON, nested too deeply, text that is no Unicode (a lone surrogate
  escape such as ``"\\ud800"``, which SQLite cannot store), not an object,
  wrong types: 400 (agent_hooks.center.contract says which).

The hook routes (``/hooks``) are different on purpose: bad input there is
answered 200 with the problem in a header, as Claude Code's http hooks
expect (agent_hooks.server.hooks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from agent_hooks.center import contract
from agent_hooks.server import fastpath

T = TypeVar("T")

TOO_LARGE = 413


async def read(scope: fastpath.Scope, receive: fastpath.Receive, limit: int = contract.MAX_BODY_BYTES) -> bytes:
    """The request's body, at most ``limit`` bytes; BodyError (413) past it, read no further."""
    declared = fastpath.declared_length(scope)
    if declared is not None and declared > limit:
        raise contract.BodyError(contract.too_large(declared, limit), TOO_LARGE)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise contract.BodyError("the client went away before its body arrived")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise contract.BodyError(contract.too_large(f"more than {limit}", limit), TOO_LARGE)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def read_json(scope: fastpath.Scope, receive: fastpath.Receive, parse: Callable[[bytes], T],
                    limit: int = contract.MAX_BODY_BYTES) -> T:
    """``parse`` (one of contract's ``parse_*``) of the request's body; BodyError (its ``status``:
    400 or 413) for anything it refuses."""
    return parse(await read(scope, receive, limit))
