"""A host's server and its command centers: which one its subscription, reports and cost ledger talk to.

``forward.url`` may name several command centers of one fleet (agent_hooks.forward.centers has the
rule). The server keeps one :class:`Upstream`: its subscription (center/control.py), its reporter
(center/report.py) and the reporter's cost sender (center/ledger.py) ask it for the current center
before each request, and tell it what became of each try. When one sender's tries fail
``forward.failover_after`` times in a row, the host moves on (a compare-and-set on the store's row,
which the drainer reads too) and every sender follows at once:

* the subscription drops its long poll and polls the new center; its cursor is kept per store
  (epoch): a center on the same store goes on from the same control, another starts over;
* the reporter sends a ``full`` report (cards and pending requests) to the new center;
* the cost sender sends what the new center has not acknowledged (its cursor is per center; the
  ledger's keys make a message sent twice a no-op).

A move made by the drainer (its own process) reaches the server through the store: every commit
the hub sees (PRAGMA data_version) has the row read again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from agent_hooks import fleet
from agent_hooks.forward import centers

log = logging.getLogger("agent_hooks.center.failover")


class Upstream:
    """The host's command centers as its server sees them, and the current one."""

    def __init__(self, hub: Any, fwd: dict[str, Any], urls: list[str]) -> None:
        self.hub = hub
        self.urls = urls
        after, self.failback_after_s = centers.settings(fwd)
        self.counter = centers.Counter(after)
        self.choice = centers.Choice(urls)
        # Called on the loop with (old base, new base) when the host moves on.
        self.listeners: list[Callable[[str, str], None]] = []
        self._reading: asyncio.Future[Any] | None = None
        self._again = False
        # The failback's own clock: a host that has moved away from the first center goes back when
        # forward.failback_after_s has passed, idle or not (no commit has to come to read the row again).
        self._failback: asyncio.TimerHandle | None = None

    @property
    def base(self) -> str:
        """The current command center's base URL."""
        return fleet.center_base(self.choice.url) or self.choice.url

    @property
    def bases(self) -> list[str]:
        return [fleet.center_base(u) or u for u in self.urls]

    def status(self) -> dict[str, Any]:
        return {**self.choice.status(), "current_base": self.base, "bases": self.bases}

    async def load(self) -> None:
        """Read the store's row (at start, and after a commit of another process)."""
        choice = await self.hub.submit(centers.read, self.urls)
        if centers.failback_due(choice, self.failback_after_s, time.time()):
            choice = await self.hub.write(centers.move, self.urls, choice.url, "back to the first command center"
                                          " (forward.failback_after_s)", time.time(), 0)
        self._apply(choice)

    def store_changed(self) -> None:
        """A hub change listener: another process (the drainer) may have moved the host."""
        if self._reading is not None:
            self._again = True
            return
        self._reading = asyncio.ensure_future(self.load())
        self._reading.add_done_callback(self._read)

    def _read(self, task: asyncio.Future[Any]) -> None:
        self._reading = None
        if not task.cancelled() and task.exception() is not None:
            log.debug("could not read the current command center: %s", task.exception())
        if self._again:
            self._again = False
            self.store_changed()

    def _apply(self, choice: centers.Choice) -> None:
        old = self.base
        self.choice = choice
        self._schedule_failback()
        if self.base != old:
            self.counter.reset()
            log.warning("command center: moved on from %s to %s (%s)", old, self.base, choice.reason)
            for listener in list(self.listeners):
                try:
                    listener(old, self.base)
                except Exception:  # noqa: BLE001 - one sender must not keep the others on the old center
                    log.exception("failover listener failed")

    def _schedule_failback(self) -> None:
        """Read the row again when a failback is due (load() makes the move, as after any commit)."""
        if self._failback is not None:
            self._failback.cancel()
            self._failback = None
        if self.failback_after_s <= 0 or self.choice.current == 0 or len(self.urls) < 2:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on the loop (a test's direct call): the next load() looks again
            return
        due = max(0.0, self.choice.since + self.failback_after_s - time.time())
        # A little past the moment: failback_due compares with >=, and the clocks agree to the millisecond.
        self._failback = loop.call_later(due + 0.05, self.store_changed)

    def close(self) -> None:
        if self._failback is not None:
            self._failback.cancel()
            self._failback = None

    def answered(self, sender: str, base: str) -> None:
        """``sender``'s try at ``base`` got an answer that is not a failure (a 2xx, or a 4xx)."""
        if base == self.base:
            self.counter.answered(sender, self.choice.url)

    async def failed(self, sender: str, base: str, why: str) -> bool:
        """``sender``'s try at ``base`` got no answer, or a 5xx. True when the host has moved on from
        ``base`` (now, or before: the sender should use :attr:`base` at once, without a backoff)."""
        if base != self.base:
            return True
        if len(self.urls) < 2 or not self.counter.failed(sender, self.choice.url):
            return False
        choice = await self.hub.write(centers.move, self.urls, self.choice.url, f"{sender}: {why}", time.time())
        self._apply(choice)
        return self.base != base
