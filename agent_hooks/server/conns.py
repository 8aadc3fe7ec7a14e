"""Connections that cost the server nothing unless they send requests.

uvicorn closes a kept-alive connection that sends nothing after its response,
but a connection that never completes a request (silent from the start, or
headers sent a byte at a time) is held for good: each one is a file
descriptor, and enough of them, from any local user and without a token, made
every one of the owner's hook calls fail. Two rules, applied where uvicorn
accepts a connection (its protocol, :func:`protocol_class`):

* **A request within ``serve.request_timeout_s``**: from the moment a
  connection is accepted, and again from the end of each response, the next
  request must arrive whole (headers and body) within that time, else the
  connection is closed. A request being answered (a long poll) is not timed;
  a WebSocket, once upgraded, is not either.
* **At most ``serve.connections_per_uid`` open connections per local caller**
  other than the server's own user (the uid the kernel shows for the caller's
  socket, :mod:`agent_hooks.server.peer`), and at most
  ``serve.connections_per_address`` per address for callers from other hosts:
  many hosts behind one NAT share an address, so its cap is much higher. One
  over is closed as soon as it is accepted. The server's own user is not
  capped: its hook calls must never be the ones turned away.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from typing import Any


class ConnectionGuard:
    """The open-connection counts per caller, and the two limits (see module docstring)."""

    def __init__(self, request_timeout_s: float, per_uid: int, per_address: int | None = None,
                 count: Callable[[str], None] | None = None, own_uid: int | None = None) -> None:
        self.request_timeout_s = max(0.1, float(request_timeout_s))
        self.per_uid = max(1, int(per_uid))
        self.per_address = max(1, int(per_address)) if per_address is not None else self.per_uid
        self.own_uid = os.geteuid() if own_uid is None else own_uid
        self.open: dict[Hashable, int] = {}
        self._count = count or (lambda what: None)

    def key(self, uid: int | None, client: Any) -> Hashable | None:
        """Whose connection this is, for the cap; None for the server's own user (not capped)."""
        if uid == self.own_uid:
            return None
        if uid is not None:
            return uid
        return ("addr", client[0] if client else None)

    def admit(self, key: Hashable | None) -> bool:
        """Count one more connection for ``key``; False (nothing counted) when it is at the cap."""
        if key is None:
            return True
        held = self.open.get(key, 0)
        if held >= (self.per_address if isinstance(key, tuple) else self.per_uid):
            self._count("connections_refused")
            return False
        self.open[key] = held + 1
        return True

    def release(self, key: Hashable | None) -> None:
        """One connection of ``key`` is gone."""
        if key is None:
            return
        held = self.open.get(key, 0) - 1
        if held > 0:
            self.open[key] = held
        else:
            self.open.pop(key, None)

    def timed_out(self) -> None:
        self._count("connections_timed_out")


def protocol_class(guard: ConnectionGuard) -> type:
    """uvicorn's protocol (the caller's uid asked once, :func:`agent_hooks.server.peer.protocol_class`),
    with the request timer and the per-caller cap of ``guard``. Everything here runs on the event loop."""
    from agent_hooks.server import peer

    base = peer.protocol_class()

    class GuardedProtocol(base):  # type: ignore[misc, valid-type]
        _guard_key: Hashable | None = None
        _request_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            key = guard.key(self._peer_uid, self.client)
            if not guard.admit(key):
                # Over the cap: closed at once (a reset: nothing was asked, nothing is owed).
                transport.abort()
                return
            self._guard_key = key
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            key, self._guard_key = self._guard_key, None
            guard.release(key)
            super().connection_lost(exc)

        def on_message_complete(self) -> None:
            self._disarm()  # the request is whole: answering it is not timed here
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # uvicorn armed its keep-alive timer: the connection now waits for its next request.
            # That timer is reset by every byte; ours only by a whole request.
            if self.timeout_keep_alive_task is not None and not self.transport.is_closing():
                self._arm()

        def handle_websocket_upgrade(self) -> None:
            # The WebSocket protocol takes the transport over: this one no longer times or counts it.
            self._disarm()
            key, self._guard_key = self._guard_key, None
            guard.release(key)
            super().handle_websocket_upgrade()

        def _arm(self) -> None:
            self._disarm()
            self._request_timer = self.loop.call_later(guard.request_timeout_s, self._too_slow)

        def _disarm(self) -> None:
            if self._request_timer is not None:
                self._request_timer.cancel()
                self._request_timer = None

        def _too_slow(self) -> None:
            self._request_timer = None
            if not self.transport.is_closing():
                guard.timed_out()
                self.transport.close()

    return GuardedProtocol
