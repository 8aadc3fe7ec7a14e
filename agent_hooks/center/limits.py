"""What the command center keeps of other hosts: a cap on hosts, on each host's cards and requests, on rows in all.

Any caller with the fleet token (or the owner's uid) names the host it speaks for, so without caps
one caller could invent hosts and sessions without end, and one host's flood of requests dated long
ago pushed every other request, the center's own included, out of the "Needs you" list (oldest
first, capped). The caps (``[fleet]``, docs/command-center.md "Limits"):

* ``max_hosts``: other hosts kept at most. A host holds a place while it has cards or pending
  requests here, or polled for controls in the last ``HOST_SEEN_S``. A new host past the cap is
  refused with 429 and says so; nothing of it is stored.
* ``max_cards_per_host``: a host keeps its newest cards. A new card past the cap takes the place of
  that host's least recently active card (never another host's); a report with more new sessions
  than fit stores the newest.
* ``max_requests_per_host``: the newest pending requests of a host are kept as copies here; the
  others are left out, counted, and said (GET /api/approvals ``left_out``, /api/fleet/status, doctor).
  As many settled copies of each host are kept as history, the newest.
* ``max_rows``: other hosts' cards and pending requests together. A new one past it is refused (429).

What was left out or refused is counted per host in the fleet store (``fleet_left_out``, by whichever
center saw it: with several centers on one PostgreSQL the counts are the fleet's, not one process's):
:func:`count_left_out` adds to them, :func:`left_out_counts` reads them.

The center's own cards and requests (host "") count against none of these, and the pending list
always shows them first (agent_hooks.center.relay.pending). Functions here run on the hub's writer
thread, inside its transaction.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

# A host that polled for controls this long ago (and has nothing stored here) no longer holds a place.
HOST_SEEN_S = 86400.0
# A host's counts of what was left out are forgotten this long after they were last written (a center writes
# a host's count of requests left out again every hour while it stays: hub.LEFT_OUT_REFRESH_S),
# and at most this many hosts are counted by name (invented hosts refused past max_hosts: the rest as "*").
LEFT_OUT_KEPT_S = 86400.0
LEFT_OUT_HOSTS = 1000
THIS_HOST = ""  # (fleetdb.THIS_HOST: fleetdb imports this module)


@dataclass(frozen=True)
class Limits:
    """The caps, from ``[fleet]``."""

    hosts: int
    cards_per_host: int
    requests_per_host: int
    rows: int

    @classmethod
    def of(cls, config: dict[str, Any]) -> Limits:
        fleet = config["fleet"]
        return cls(hosts=max(1, int(fleet["max_hosts"])), cards_per_host=max(1, int(fleet["max_cards_per_host"])),
                   requests_per_host=max(1, int(fleet["max_requests_per_host"])), rows=max(1, int(fleet["max_rows"])))


def known(conn: sqlite3.Connection, host: str) -> bool:
    """``host`` already holds a place (cards, pending requests, a subscription), or is this host."""
    if host == THIS_HOST:
        return True
    # One query (with PostgreSQL a round trip each would add up: every report asks). state = 'pending' as a
    # literal: the partial index of pending rows answers it.
    return conn.execute(
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM fleet_sessions WHERE host = ?)"
        " OR EXISTS (SELECT 1 FROM fleet_hosts WHERE host = ?)"
        " OR EXISTS (SELECT 1 FROM approvals WHERE state = 'pending' AND host = ?)", (host, host, host)).fetchone() is not None


def hosts_kept(conn: sqlite3.Connection, now: float) -> int:
    """How many other hosts hold a place."""
    return int(conn.execute(
        "SELECT count(*) FROM (SELECT host FROM fleet_sessions WHERE host != ''"
        " UNION SELECT host FROM approvals WHERE state = 'pending' AND host != ''"
        " UNION SELECT host FROM fleet_hosts WHERE last_seen_at >= ?) AS hosts", (now - HOST_SEEN_S,)).fetchone()[0])


def refuse_host(conn: sqlite3.Connection, host: str, limits: Limits, now: float) -> str | None:
    """Why ``host`` may not be kept (a new host past ``max_hosts``), or None."""
    if known(conn, host):
        return None
    kept = hosts_kept(conn, now)
    if kept < limits.hosts:
        return None
    return (f"this command center keeps {kept} other hosts, its most (fleet.max_hosts = {limits.hosts}):"
            f" host {host!r} is refused; remove a host's cards, or raise fleet.max_hosts")


def rows_kept(conn: sqlite3.Connection) -> int:
    """Other hosts' cards and pending requests, together."""
    cards = conn.execute("SELECT count(*) FROM fleet_sessions WHERE host != ''").fetchone()[0]
    pending = conn.execute("SELECT count(*) FROM approvals WHERE state = 'pending' AND host != ''").fetchone()[0]
    return int(cards) + int(pending)


def rows_full(limits: Limits, kept: int) -> str:
    """The refusal of a new row once ``kept`` rows fill ``max_rows``."""
    return (f"this command center keeps {kept} cards and requests of other hosts, its most"
            f" (fleet.max_rows = {limits.rows}); remove cards, or raise fleet.max_rows")


def cards_of(conn: sqlite3.Connection, host: str) -> int:
    return int(conn.execute("SELECT count(*) FROM fleet_sessions WHERE host = ?", (host,)).fetchone()[0])


def make_room(conn: sqlite3.Connection, host: str, limits: Limits, adding: int = 1) -> list[str]:
    """Drop ``host``'s least recently active cards (with their events) until ``adding`` more fit within
    ``max_cards_per_host``; the ids dropped."""
    over = cards_of(conn, host) + adding - limits.cards_per_host
    if over <= 0 or host == THIS_HOST:
        return []
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM fleet_sessions WHERE host = ? ORDER BY max(updated_at, coalesce(details_at, 0)), id LIMIT ?",
        (host, over))]
    for cid in ids:
        conn.execute("DELETE FROM fleet_sessions WHERE id = ?", (cid,))
        conn.execute("DELETE FROM fleet_events WHERE fleet_id = ?", (cid,))
        conn.execute("DELETE FROM fleet_cost_samples WHERE fleet_id = ?", (cid,))
    return ids


def prune_settled(conn: sqlite3.Connection, host: str, limits: Limits) -> int:
    """Keep ``host``'s newest ``max_requests_per_host`` settled copies (its own store keeps the truth;
    these are only the history a session page shows), so a host whose requests come and go cannot grow
    the history without end. How many were dropped."""
    if host == THIS_HOST:
        return 0
    return conn.execute(
        "DELETE FROM approvals WHERE id IN (SELECT id FROM approvals WHERE host = ? AND state != 'pending'"
        " ORDER BY coalesce(answered_at, created_at) DESC, id DESC LIMIT -1 OFFSET ?)",
        (host, limits.requests_per_host)).rowcount


def new_card(conn: sqlite3.Connection, host: str, limits: Limits | None, now: float) -> tuple[str | None, list[str]]:
    """Before a card is made for ``host``: (why not, or None; the ids of that host's cards dropped to
    make room). This host's own cards are never capped."""
    if limits is None or host == THIS_HOST:
        return None, []
    why = refuse_host(conn, host, limits, now)
    if why is not None:
        return why, []
    kept = rows_kept(conn)
    dropped = make_room(conn, host, limits)
    if not dropped and kept >= limits.rows:
        return rows_full(limits, kept), []
    return None, dropped


def count_left_out(conn: Any, host: str, approvals: int | None, cards: int, refused: int, now: float) -> None:
    """Add to what the limits kept out of ``host``: ``cards`` left out or dropped and ``refused`` requests
    (429) since its row's ``since``; ``approvals``, when not None, its pending requests left out now."""
    conn.execute("DELETE FROM fleet_left_out WHERE updated_at < ?", (now - LEFT_OUT_KEPT_S,))
    if conn.execute("SELECT 1 FROM fleet_left_out WHERE host = ?", (host,)).fetchone() is None and \
            conn.execute("SELECT count(*) FROM fleet_left_out").fetchone()[0] >= LEFT_OUT_HOSTS:
        host, approvals = "*", None
    conn.execute(
        "INSERT INTO fleet_left_out (host, approvals, cards, refused, since, updated_at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (host) DO UPDATE SET approvals = CASE WHEN ? = 1 THEN excluded.approvals"
        " ELSE fleet_left_out.approvals END, cards = fleet_left_out.cards + excluded.cards,"
        " refused = fleet_left_out.refused + excluded.refused, updated_at = excluded.updated_at",
        (host, approvals or 0, cards, refused, now, now, int(approvals is not None)))


def left_out_counts(conn: Any, now: float) -> dict[str, dict[str, Any]]:
    """Each host's counts (``approvals`` now, ``cards`` and ``refused`` since ``since``), written in the last day."""
    return {host: {"approvals": int(a), "cards": int(c), "refused": int(r), "since": since}
            for host, a, c, r, since in conn.execute(
                "SELECT host, approvals, cards, refused, since FROM fleet_left_out WHERE updated_at >= ?",
                (now - LEFT_OUT_KEPT_S,))}
