"""Run one feature inside a savepoint of the event's write transaction.

A bug in a secondary feature (identity sync, memory indexing) must not roll
back the session and tool-call records the same transaction carries: its
changes are undone alone, the error is logged and counted, and the hook goes on.
"""

from __future__ import annotations

import sqlite3

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import ParamSpec, TypeVar

    from agent_hooks.runner import Context

    P = ParamSpec("P")
    R = TypeVar("R")


def isolated(conn: sqlite3.Connection, ctx: Context, name: str, fn: Callable[P, R], *args: P.args,
             **kwargs: P.kwargs) -> R | None:
    """``fn(*args)`` under SAVEPOINT ``name``; on an exception, roll it back, log it, return None."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - fail open, feature by feature
        conn.execute(f"ROLLBACK TO {name}")
        conn.execute(f"RELEASE {name}")
        if ctx.store.deferrable:
            # The server's event loop, before its first commit: the whole call is run again on a
            # pool thread (agent_hooks.dispatch.Deferred), which logs and counts this once.
            raise
        import traceback

        from agent_hooks.log import log_error
        from agent_hooks.store import record_error

        message = f"{name}: {type(exc).__name__}: {exc}"
        log_error(ctx.paths, ctx.payload.event, "error", message, ctx.payload.session_id, traceback.format_exc())
        record_error(conn, ctx.payload.event, "error", message, ctx.payload.session_id)
        return None
    conn.execute(f"RELEASE {name}")
    return result
