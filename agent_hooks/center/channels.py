"""Agents the command center reaches through a client of their own, such as an OpenClaw gateway.

The center's routes do not import such a client. The client's route module
registers a :class:`Channel` on the server's state (``state.channels``) when the
app is built, and the center asks each channel first:

* ``POST /api/approvals/<id>`` (center/approvals.py): is this request yours?
  Then the channel answers it, and its response is the caller's.
* ``POST /api/sessions/<ref>/cancel`` (center/control.py): is this card yours?
* ``/status``, ``/api/fleet/status``, the board's header and its WebSocket's
  hello show each channel's connection under its ``name``.

A channel says None for what is not its own, and the center goes on as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from starlette.responses import Response

if TYPE_CHECKING:
    from agent_hooks.server.access import Caller


class Channel(Protocol):
    name: str  # the key its status is shown under ("openclaw")

    def status(self) -> dict[str, Any] | None:
        """Its connection's state; None when it is not configured."""
        ...

    async def answer(self, ref: str, body: dict[str, Any], by: str, where: str, caller: Caller) -> Response | None:
        """Answer request ``ref`` if it is this channel's (``body`` as posted, ``via`` set); else None. What it
        did is recorded under ``caller`` (``fleet_actions``), as the center records its own answers."""
        ...

    async def cancel(self, ref: str, cancelling: bool, reason: str | None, caller: Caller) -> Response | None:
        """Cancel (or uncancel) the sessions ``ref`` names if they are this channel's; else None. Recorded
        under ``caller`` as :meth:`answer`."""
        ...
