"""The command centers this host talks to (``forward.url``: one, or several in order), and which one is current.

Every sender of a host (the drainer's events, the server's subscription, its reports and its cost
ledger) talks to one command center at a time: the *current* one. The rule, the same for all:

* **Which one.** The first of ``forward.url``'s list, until it stops answering; then the next, in
  order, wrapping round at the end.
* **When to move on.** A sender counts its own tries in a row that the current center did not
  answer: a transport error (connection refused, a timeout, a connection reset) or a 5xx. At
  ``forward.failover_after`` of them (3 by default) the host moves on. A 4xx never counts: it is an
  answer, and final by the ingest contract (401, 403, 404, 413, 429 say something about the request
  or the caller, which the next center would say too). Any answer that is not a failure resets the
  sender's count.
* **One notion per host.** The choice is a row of the host's store (``meta``, key
  :data:`KEY`): the drainer (its own process) and the server's senders read the same row. A move is
  a compare-and-set on that row (it moves only if the failing center is still current), so two
  senders that see the same outage move the host once, not twice.
* **Coming back.** The host stays where it moved to while that center answers: every move costs a
  full report and a subscription that starts over, and centers that share a fleet serve it alike.
  With ``forward.failback_after_s`` > 0 the host goes back to the first center that long after it
  left it (if the first is still down, the next failures move it on again).

Stdlib only: the drainer, the server and doctor import it.
"""

from __future__ import annotations

import json
import sqlite3

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KEY = "forward.center"
# What a sender is called in the counts and in the record of a move.
DRAIN, SUBSCRIBE, REPORT, COST = "drain", "subscribe", "report", "cost"


def stored_object(raw: str | None) -> dict[str, Any]:
    """A JSON object kept in the store's meta table (a sender's cursor, the current center); {} when there
    is none, or it is not one (written by another version, or damaged)."""
    try:
        doc = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def ingest_urls(fwd: dict[str, Any]) -> list[str]:
    """``forward.url`` as a list of ingest URLs, in order: a string names one, a list several ("" none)."""
    raw = fwd.get("url")
    items = [raw] if isinstance(raw, str) else list(raw) if isinstance(raw, list) else []
    out: list[str] = []
    for item in items:
        # Kept as written: a URL with a stray newline is refused by name (forward/urls.py), not mended.
        if isinstance(item, str) and item.strip() and item not in out:
            out.append(item)
    return out


def failure(status: int | None) -> bool:
    """Whether an outcome counts toward moving on: no answer at all (None) or a 5xx; never a 4xx."""
    return status is None or status >= 500


class Choice:
    """The current center among ``urls``, and when and why the host last moved (the store's row)."""

    def __init__(self, urls: list[str], current: int = 0, since: float = 0.0, switched_at: float | None = None,
                 switched_from: str | None = None, reason: str | None = None, switches: int = 0) -> None:
        self.urls = urls
        self.current = current if 0 <= current < len(urls) else 0
        self.since = since
        self.switched_at = switched_at
        self.switched_from = switched_from
        self.reason = reason
        self.switches = switches

    @property
    def url(self) -> str:
        return self.urls[self.current] if self.urls else ""

    def to_json(self) -> str:
        return json.dumps({"urls": self.urls, "current": self.current, "since": self.since,
                           "switched_at": self.switched_at, "switched_from": self.switched_from,
                           "reason": self.reason, "switches": self.switches})

    def status(self) -> dict[str, Any]:
        """For doctor, ``server status`` and ``/api/fleet/status``."""
        return {"centers": list(self.urls), "current": self.url, "index": self.current, "since": self.since,
                "switched_at": self.switched_at, "switched_from": self.switched_from, "reason": self.reason,
                "switches": self.switches}

    @classmethod
    def parse(cls, raw: str | None, urls: list[str]) -> Choice:
        """The stored row for this list of centers. A row for another list (forward.url was changed)
        keeps its current center when it is still listed, else starts at the first."""
        doc = stored_object(raw)
        raw_urls, raw_current = doc.get("urls"), doc.get("current")
        stored: list[Any] = raw_urls if isinstance(raw_urls, list) else []
        current: int = raw_current if isinstance(raw_current, int) else 0
        at = stored[current] if 0 <= current < len(stored) else None
        if stored != urls:
            if at not in urls:
                return cls(urls, 0, 0.0, _num(doc.get("switched_at")), _str(doc.get("switched_from")),
                           _str(doc.get("reason")), int(doc.get("switches") or 0))
            current = urls.index(at)
        return cls(urls, current, float(_num(doc.get("since")) or 0.0), _num(doc.get("switched_at")),
                   _str(doc.get("switched_from")), _str(doc.get("reason")), int(doc.get("switches") or 0))

    def moved(self, now: float, reason: str, to: int | None = None) -> Choice:
        """The choice after moving on from the current center (to the next, or to ``to``)."""
        nxt = (self.current + 1) % len(self.urls) if to is None else to
        return Choice(self.urls, nxt, now, now, self.url, reason, self.switches + 1)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def read(conn: sqlite3.Connection, urls: list[str]) -> Choice:
    """The host's current center (the store's row; the first center when there is none)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (KEY,)).fetchone()
    except sqlite3.OperationalError:  # a store without its tables yet
        row = None
    return Choice.parse(row[0] if row else None, urls)


def write(conn: sqlite3.Connection, choice: Choice) -> None:
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (KEY, choice.to_json()))


def move(conn: sqlite3.Connection, urls: list[str], away_from: str, reason: str, now: float,
         to: int | None = None) -> Choice:
    """Move the host on from ``away_from``, unless it has moved already (compare-and-set: call it in a
    write transaction). The choice as it now is."""
    choice = read(conn, urls)
    if len(urls) < 2 or choice.url != away_from:
        return choice
    choice = choice.moved(now, reason, to)
    write(conn, choice)
    return choice


class Counter:
    """The switching rule's counts, in one process: tries in a row each sender's current center failed."""

    def __init__(self, after: int) -> None:
        self.after = max(1, int(after))
        self.fails: dict[tuple[str, str], int] = {}

    def failed(self, sender: str, url: str) -> bool:
        """One failed try of ``sender`` at ``url``; True when that is the one that moves the host on."""
        key = (sender, url)
        self.fails[key] = self.fails.get(key, 0) + 1
        return self.fails[key] >= self.after

    def answered(self, sender: str, url: str) -> None:
        self.fails.pop((sender, url), None)

    def reset(self) -> None:
        self.fails.clear()


def failback_due(choice: Choice, failback_after_s: float, now: float) -> bool:
    """Whether the host goes back to the first center now (``forward.failback_after_s`` after it left it)."""
    return (failback_after_s > 0 and choice.current != 0 and len(choice.urls) > 1
            and now - choice.since >= failback_after_s)


def settings(fwd: dict[str, Any]) -> tuple[int, float]:
    """(failover_after, failback_after_s) from ``[forward]``."""
    return int(fwd.get("failover_after") or 3), float(fwd.get("failback_after_s") or 0.0)
