"""Http hooks held for a person's answer: each waits on an event, never on a thread.

A handler that asks to wait (features/approvals.Hold) has written a pending
row; :func:`hold` keeps the client's request open until that row is settled.
It is woken by :meth:`Holds.wake`: an answer posted to this server
(center/approvals.py), a command center's answer applied by this host's
subscription (center/control.py), or any commit to the store (the hub's
``PRAGMA data_version`` poll sees a CLI's answer). The row is read again at
least every ``RECHECK_S`` in any case. The client closing the request (the
person answered at the terminal) withdraws it at once; a server asked to stop
gives the client its answer within uvicorn's graceful shutdown.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from agent_hooks.features import approvals
from agent_hooks.output import render

if TYPE_CHECKING:
    from agent_hooks.dispatch import Call
    from agent_hooks.server.app import ServerState
    from agent_hooks.server.fastpath import Receive

# While held, the row is read again at least this often (a commit the hub's poll missed, a clock). A
# stop of the server wakes every held request (ServerState.stop_listeners): it gives the client its
# answer then, well inside uvicorn's graceful shutdown, rather than a 500 when the request is cancelled.
RECHECK_S = 2.0
STOPPED = "the server stopped while the request waited"


class Holds:
    """The events the held requests wait on, by approval id. On the event loop only."""

    def __init__(self) -> None:
        self.waiters: dict[str, set[asyncio.Event]] = {}

    def wake(self, approval_id: str | None = None) -> None:
        """Held requests look at their rows again (one request's, or all of them)."""
        for aid, events in list(self.waiters.items()):
            if approval_id is None or aid == approval_id:
                for event in events:
                    event.set()

    def add(self, approval_id: str, event: asyncio.Event) -> None:
        self.waiters.setdefault(approval_id, set()).add(event)

    def discard(self, approval_id: str, event: asyncio.Event) -> None:
        events = self.waiters.get(approval_id)
        if events is not None:
            events.discard(event)
            if not events:
                self.waiters.pop(approval_id, None)


def _read_state(state: ServerState, approval_id: str) -> str | None:
    row = state.store().conn.execute("SELECT state FROM approvals WHERE id = ?", (approval_id,)).fetchone()
    return row[0] if row else None


def _conclude(state: ServerState, hold: approvals.Hold, gone: str | None,
              why: str | None = None) -> approvals.Outcome | None:
    store = state.store()
    return approvals.conclude(store.conn, hold, gone=gone, write=store.write, why=why)


async def hold(state: ServerState, call: Call, receive: Receive) -> None:
    """Wait for the answer to ``call.hold`` and put the client's answer in ``call.text``."""
    h = call.hold
    assert h is not None
    event = asyncio.Event()
    state.holds.add(h.approval_id, event)
    disconnect: asyncio.Future[Any] = asyncio.ensure_future(receive())
    gone: str | None = None
    why: str | None = None
    try:
        next_read = time.monotonic() + RECHECK_S
        while True:
            left = h.left_s()
            if left <= 0:
                break
            if state.stopping():
                why = STOPPED
                break
            event.clear()
            woken = asyncio.ensure_future(event.wait())
            try:
                done, _ = await asyncio.wait({disconnect, woken},
                                             timeout=max(0.0, min(left, next_read - time.monotonic())),
                                             return_when=asyncio.FIRST_COMPLETED)
            finally:
                woken.cancel()
            if disconnect in done:
                message = disconnect.result()
                if message.get("type") == "http.disconnect":
                    gone = "the client closed the request (answered at the terminal)"
                    break
                disconnect = asyncio.ensure_future(receive())  # more body: not expected, keep listening
            if state.stopping():
                continue  # woken by the stop: answered as stopped above
            if woken in done or time.monotonic() >= next_read:
                next_read = time.monotonic() + RECHECK_S
                if await state.run_blocking(_read_state, state, h.approval_id) != approvals.PENDING:
                    break
    except asyncio.CancelledError:
        # Cancelled (the server stopping past its grace): the row must not stay pending for good.
        state.pool.submit(_conclude, state, h, None, STOPPED)
        raise
    finally:
        disconnect.cancel()
        state.holds.discard(h.approval_id, event)
    outcome = await state.run_blocking(_conclude, state, h, gone, why)
    call.text = render(call.event, outcome) if outcome is not None else None
