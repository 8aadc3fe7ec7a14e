"""Paired hosts and devices: one-time pairing codes and the credential each pairing gives (stdlib only).

A command center's owner pairs a host (``agent-hook fleet pair --host NAME``)
or a device, a person's browser (``--device NAME``). Pairing makes a one-time
code that expires in minutes; the host (``agent-hook fleet join``) or the
browser (``/pair``) trades it for a credential of its own:

    ah1.<id>.<secret>

The center keeps only a SHA-256 of the secret and of each code (a credential
and a code are random, 256 and 60 bits: a hash is as good as the thing for
checking, and worthless to whoever reads the store). ``<id>`` names the row;
its hash is compared with :func:`hmac.compare_digest`. A code is found by
comparing its hash with every live code's, each in constant time.

The credential says who the caller is (agent_hooks.server.access): which
host, which device. Re-pairing a name revokes its old credential; revoking
shuts it out at its next request, since every request looks its row up.

Tables (migration ``m018_fleet_credentials``): ``fleet_credentials``,
``fleet_pairing_codes``, and ``fleet_actions``, the record of who answered,
replied and cancelled. Callers hold the transaction, as in
agent_hooks.center.fleetdb.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
from dataclasses import dataclass
from typing import Any

HOST = "host"
DEVICE = "device"
KINDS = (HOST, DEVICE)
PREFIX = "ah1."
# Codes: Crockford's base32 (no I, L, O, U), 12 characters = 60 bits, shown as XXXX-XXXX-XXXX.
CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CODE_LENGTH = 12
# A used or expired code is kept this long, so that a second try is told what happened to it.
CODES_KEPT_S = 7 * 86400.0
# last_seen_at is written at most this often per credential (each request would be a write otherwise).
SEEN_EVERY_S = 30.0
ACTIONS_KEPT = 20_000
_LOOKALIKES = str.maketrans("OIL", "011")
_NAME_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,62}")
_CREDENTIAL = re.compile(r"ah1\.([0-9a-f]{16})\.([A-Za-z0-9_-]{20,100})")


class PairingError(Exception):
    """A code that cannot be used, with the HTTP status to answer and what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Found:
    """What a presented credential is: a live host or device, or why not (``refused``)."""

    kind: str
    name: str
    credential_id: str
    last_seen_at: float | None = None
    refused: str | None = None

    def seen_due(self, now: float) -> bool:
        """True when its last_seen_at is old enough to be written again (see :func:`seen`)."""
        return (self.last_seen_at or 0.0) < now - SEEN_EVERY_S


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def clean_name(value: str | None) -> str | None:
    """A host's or device's name as pairing takes it (letters, digits, ``._:@-``; at most 63), else None."""
    if value and _NAME_OK.fullmatch(value):
        return value
    return None


def is_paired_credential(value: str | None) -> bool:
    """True when ``value`` has the shape of a paired credential (not the shared fleet token)."""
    return value is not None and value.startswith(PREFIX)


def normalize_code(text: str) -> str:
    """A code as typed (any case, spaces and dashes, O for 0, I or L for 1) in its canonical form."""
    raw = re.sub(r"[\s-]+", "", text or "").upper()
    return raw.translate(_LOOKALIKES)


def shown_code(code: str) -> str:
    """XXXX-XXXX-XXXX: easier to read out and type."""
    return "-".join(code[i:i + 4] for i in range(0, len(code), 4))


# -- pairing ---------------------------------------------------------------------------------

def new_code(conn: sqlite3.Connection, kind: str, name: str, ttl_s: float, now: float) -> str:
    """A one-time code that pairs ``kind`` ``name`` until ``now + ttl_s``; only its hash is stored."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    conn.execute("DELETE FROM fleet_pairing_codes WHERE expires_at < ?", (now - CODES_KEPT_S,))
    code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    conn.execute("INSERT INTO fleet_pairing_codes (code_sha256, kind, name, created_at, expires_at)"
                 " VALUES (?, ?, ?, ?, ?)", (sha256(code), kind, name, now, now + ttl_s))
    return shown_code(code)


def _find_code(conn: sqlite3.Connection, code: str) -> dict[str, Any] | None:
    """The code's row, found by comparing hashes in constant time (never a lookup on the secret's hash)."""
    want = sha256(normalize_code(code)).encode()
    found = None
    cur = conn.execute("SELECT code_sha256, kind, name, created_at, expires_at, used_at, used_from"
                       " FROM fleet_pairing_codes")
    cols = [d[0] for d in cur.description]
    for row in cur.fetchall():
        if hmac.compare_digest(str(row[0]).encode(), want):
            found = dict(zip(cols, row, strict=True))
    return found


def redeem(conn: sqlite3.Connection, code: str, kind: str, now: float, address: str) -> tuple[str, str]:
    """Trade a code for a new credential of the ``kind`` it pairs: (name, credential). The code is used
    up; an earlier credential of that name is revoked. Raises :class:`PairingError` (401 unknown, 409
    used or of the other kind, 410 expired)."""
    if not normalize_code(code):
        raise PairingError(400, "no pairing code given")
    row = _find_code(conn, code)
    if row is None:
        raise PairingError(401, "unknown pairing code: check it, or make a new one on the command center"
                                " (agent-hook fleet pair)")
    if row["used_at"] is not None:
        raise PairingError(409, f"this pairing code was already used ({_ago(now, row['used_at'])}, from"
                                f" {row['used_from'] or '?'}): a code pairs once; make a new one"
                                f" (agent-hook fleet pair --{row['kind']} {row['name']})")
    if row["expires_at"] <= now:
        raise PairingError(410, f"this pairing code expired {_ago(now, row['expires_at'])}: make a new one"
                                f" (agent-hook fleet pair --{row['kind']} {row['name']})")
    if row["kind"] != kind:
        raise PairingError(409, "this code pairs a device: open its link in that device's browser"
                           if row["kind"] == DEVICE else
                           "this code pairs a host: run `agent-hook fleet join URL --code CODE` on it")
    used = conn.execute("UPDATE fleet_pairing_codes SET used_at = ?, used_from = ? WHERE code_sha256 = ?"
                        " AND used_at IS NULL", (now, address[:200], row["code_sha256"])).rowcount
    if not used:  # another request took it between our read and our write (the caller holds the transaction)
        raise PairingError(409, "this pairing code was already used: a code pairs once")
    conn.execute("UPDATE fleet_credentials SET revoked_at = ? WHERE kind = ? AND name = ? AND revoked_at IS NULL",
                 (now, row["kind"], row["name"]))
    cid, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    conn.execute("INSERT INTO fleet_credentials (id, kind, name, secret_sha256, paired_at, paired_from)"
                 " VALUES (?, ?, ?, ?, ?, ?)", (cid, row["kind"], row["name"], sha256(secret), now, address[:200]))
    return row["name"], f"{PREFIX}{cid}.{secret}"


def _ago(now: float, then: float) -> str:
    s = max(0, int(now - then))
    return f"{s} s ago" if s < 120 else (f"{s // 60} min ago" if s < 7200 else f"{s // 3600} h ago")


# -- who a credential is ----------------------------------------------------------------------

def verify(conn: sqlite3.Connection, presented: str) -> Found | None:
    """The host or device a presented credential is (``refused`` set when it was revoked), or None when
    it is no credential of ours."""
    m = _CREDENTIAL.fullmatch(presented or "")
    if m is None:
        return None
    row = conn.execute("SELECT kind, name, secret_sha256, revoked_at, last_seen_at FROM fleet_credentials WHERE id = ?",
                       (m.group(1),)).fetchone()
    if row is None or not hmac.compare_digest(str(row[2]).encode(), sha256(m.group(2)).encode()):
        return None
    if row[3] is not None:
        return Found(row[0], row[1], m.group(1), row[4], refused=f"the credential of {row[0]} {row[1]!r} was"
                                                                  " revoked: pair it again (agent-hook fleet pair)")
    return Found(row[0], row[1], m.group(1), row[4])


def seen(conn: sqlite3.Connection, credential_id: str, now: float, address: str) -> None:
    """Note that a credential was used (at most every SEEN_EVERY_S)."""
    conn.execute("UPDATE fleet_credentials SET last_seen_at = ?, last_address = ? WHERE id = ?"
                 " AND coalesce(last_seen_at, 0) < ?", (now, address[:200], credential_id, now - SEEN_EVERY_S))


def listing(conn: sqlite3.Connection, kind: str, with_revoked: bool = False) -> list[dict[str, Any]]:
    """Paired hosts or devices, by name: when paired, from where, when last seen; revoked ones on request."""
    where = "" if with_revoked else " AND revoked_at IS NULL"
    cur = conn.execute("SELECT name, paired_at, paired_from, last_seen_at, last_address, revoked_at"
                       f" FROM fleet_credentials WHERE kind = ?{where} ORDER BY name, paired_at", (kind,))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def revoke(conn: sqlite3.Connection, kind: str, name: str, now: float) -> int:
    """Revoke ``name``'s live credential and its unused codes; how many of either there were."""
    n = conn.execute("UPDATE fleet_credentials SET revoked_at = ? WHERE kind = ? AND name = ? AND revoked_at IS NULL",
                     (now, kind, name)).rowcount
    n += conn.execute("UPDATE fleet_pairing_codes SET expires_at = ? WHERE kind = ? AND name = ? AND used_at IS NULL"
                      " AND expires_at > ?", (now, kind, name, now)).rowcount
    return n


def shared_token_hosts(conn: sqlite3.Connection, now: float, within_s: float = 86400.0) -> list[str]:
    """Hosts that polled for their controls with the shared fleet token in the last ``within_s``: they
    act as the owner here, and anyone with the token can speak for them (doctor says so)."""
    return [r[0] for r in conn.execute("SELECT host FROM fleet_hosts WHERE auth = 'fleet token' AND last_seen_at >= ?"
                                       " ORDER BY host", (now - within_s,))]


# -- who did what -----------------------------------------------------------------------------

def record_action(conn: sqlite3.Connection, *, at: float, action: str, target: str, by_kind: str, by_name: str,
                  by_address: str, status: int, card: str | None = None, host: str | None = None,
                  note: str | None = None) -> None:
    """One answer, reply or cancel, with who did it as its credential said (kept: the newest ACTIONS_KEPT)."""
    row_id = int(conn.execute(
        "INSERT INTO fleet_actions (at, action, target, card, host, status, by_kind, by_name, by_address, note)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (at, action, target[:200], card, host, status, by_kind, by_name[:200], by_address[:200],
         (note or None) and note[:200])).fetchone()[0] or 0)
    if row_id % 1000 == 0:
        conn.execute("DELETE FROM fleet_actions WHERE id <= ?", (row_id - ACTIONS_KEPT,))


def actions_for(conn: sqlite3.Connection, keys: list[str], limit: int = 50) -> list[dict[str, Any]]:
    """The newest actions on a card (by its card id, session id or an approval of it)."""
    keys = [k for k in keys if k]
    if not keys:
        return []
    marks = ", ".join("?" * len(keys))
    cur = conn.execute(f"SELECT at, action, target, host, status, by_kind, by_name, note FROM fleet_actions"
                       f" WHERE card IN ({marks}) ORDER BY id DESC LIMIT ?", (*keys, limit))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
