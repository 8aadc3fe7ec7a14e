"""One command center at a time does the fleet's work that must be done once (its budgets counted, alerts
recorded, the ledger pruned); the others read what it wrote (``fleet_shared``).

With PostgreSQL the lease is a session-level advisory lock (``pg_try_advisory_lock``) taken on a connection
of its own: held as long as that connection lives. When the center that holds it dies, or loses its
connection, PostgreSQL lets the lock go, and the next center to try takes it over (each tries whenever its
budgets are due, at least every few seconds). With SQLite there is one process: it always holds it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger("agent_hooks.center.lease")

# pg_try_advisory_lock's key for counting the fleet's budgets ("ahbg").
BUDGETS = 0x61686267
# How often a held lease looks at its connection (a lost one: the lock is gone with it), and how long
# after a failure to connect it tries again.
CHECK_S = 1.0
RETRY_S = 1.0


class Lease:
    """``held()``: whether this center does the work now (see the module docstring). Used on one thread."""

    def __init__(self, url: str | None, key: int, what: str) -> None:
        self.url = url
        self.key = key
        self.what = what
        self.holding = url is None
        self._conn: Any = None
        self._checked = 0.0
        self._retry_at = 0.0

    def held(self) -> bool:
        if self.url is None:
            return True
        from agent_hooks.center import fleetstore

        now = time.monotonic()
        try:
            if self._conn is None:
                if now < self._retry_at:
                    return False
                self._conn = fleetstore.connect(self.url, f"agent-hooks center lease: {self.what}")
            if self.holding:
                if now - self._checked >= CHECK_S:
                    self._conn.execute("SELECT 1").fetchone()  # the lock lives as long as this connection
                    self._checked = now
                return True
            if self._conn.execute("SELECT pg_try_advisory_lock(?)", (self.key,)).fetchone()[0]:
                self.holding, self._checked = True, now
                log.info("this command center now %s for the fleet", self.what)
            return self.holding
        except Exception as exc:  # noqa: BLE001 - PostgreSQL away: not held; tried again later
            if self.holding:
                log.warning("this command center no longer %s for the fleet: %s", self.what, exc)
            self.close()
            self._retry_at = now + RETRY_S
            return False

    def close(self) -> None:
        """Give the lease up (the connection closed: PostgreSQL lets the lock go)."""
        conn, self._conn = self._conn, None
        if self.url is not None:
            self.holding = False
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
