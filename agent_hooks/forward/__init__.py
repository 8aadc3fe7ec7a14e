"""Forwarding lifecycle events to the command center (ingest contract).

* ``eventmap``: hook event -> contract event and body (stdlib, hook path);
* ``outbox``: enqueue in the hook's own write transaction, start the drainer
  detached when none is alive (stdlib, hook path);
* ``urls``: loopback-only policy (stdlib);
* ``drain``: the drainer process (httpx + filelock), never imported by hooks.
"""

from __future__ import annotations

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any


def forward(conn: sqlite3.Connection, ctx: Any) -> str | None:
    """Queue this hook call's event if the configuration forwards its event.

    Every event module calls this inside its write transaction. The check is
    made here so that a hook whose event is not forwarded (PreToolUse, by
    default) never imports the outbox and event-map modules.
    """
    fwd = ctx.config["forward"]
    event_map = fwd.get("event_map")
    if not fwd.get("enabled") or not isinstance(event_map, dict) or not event_map.get(ctx.payload.event):
        return None
    from agent_hooks.forward.outbox import forward as enqueue_event

    return enqueue_event(conn, ctx)
