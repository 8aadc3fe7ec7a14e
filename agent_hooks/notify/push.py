"""Web Push to the board's subscribed devices: the server's VAPID key pair and the subscriptions.

* The key pair is made once, on first use, and kept in ``<config dir>/push-vapid.pem`` (0600; two
  processes making it at once keep the first). Its public half, as the browser's
  ``applicationServerKey`` wants it (the uncompressed P-256 point, base64url), is what
  ``GET /api/push/key`` gives.
* A subscription is the browser's PushSubscription (``endpoint``, ``keys.p256dh``, ``keys.auth``),
  checked here, kept in ``push_subscriptions`` with the device (or the owner) that subscribed.
  Each is a channel of the outbox (``push:<digest of the endpoint>``); a push service that answers
  404 or 410 ends it.
"""

from __future__ import annotations

import base64
import os
import sqlite3
from typing import Any
from urllib.parse import urlsplit

from agent_hooks.notify import rules
from agent_hooks.paths import Paths, ensure_dir

KEY_FILE = "push-vapid.pem"
# The VAPID "sub" claim when [notify] push_contact is not set: a push service may write to it about this
# sender. Some (Apple's) refuse a contact that cannot be reached: set push_contact to yours.
CONTACT = "mailto:agent-hooks@localhost"


def contact(config: dict[str, Any]) -> str:
    """The VAPID contact: ``[notify] push_contact`` (a ``mailto:`` or ``https:`` URL), else :data:`CONTACT`."""
    value = str(config["notify"].get("push_contact") or "").strip()
    return value if value.startswith(("mailto:", "https://")) else CONTACT
MAX_ENDPOINT_CHARS = 2048
COLUMNS = ("channel", "endpoint", "p256dh", "auth", "device", "created_at", "last_ok_at", "last_error")


class Invalid(ValueError):
    """A subscription that cannot be used: HTTP 400, saying why."""


def key_path(paths: Paths) -> str:
    return os.path.join(paths.config_dir, KEY_FILE)


def vapid(paths: Paths) -> Any:
    """The server's VAPID key pair (py_vapid), made and written 0600 the first time."""
    from py_vapid import Vapid

    path = key_path(paths)
    try:
        with open(path, "rb") as f:
            return Vapid.from_pem(f.read())
    except FileNotFoundError:
        pass
    made = Vapid()
    made.generate_keys()
    ensure_dir(os.path.dirname(path))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: theirs is the key
        with open(path, "rb") as f:
            return Vapid.from_pem(f.read())
    with os.fdopen(fd, "wb") as f:
        f.write(made.private_pem())
    return made


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def public_key(key: Any) -> str:
    """The browser's ``applicationServerKey``: the public key's uncompressed point, base64url."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return b64url(key.public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint))


def check(body: Any) -> dict[str, str]:
    """A PushSubscription's JSON as the browser gives it, checked: endpoint, p256dh, auth; else Invalid."""
    if not isinstance(body, dict):
        raise Invalid('expected a PushSubscription: {"endpoint": URL, "keys": {"p256dh": KEY, "auth": SECRET}}')
    endpoint = body.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint or len(endpoint) > MAX_ENDPOINT_CHARS:
        raise Invalid(f"endpoint must be the push service's URL (at most {MAX_ENDPOINT_CHARS} characters)")
    parts = urlsplit(endpoint)
    from agent_hooks.server.access import is_loopback

    if not parts.hostname or not (parts.scheme == "https" or (parts.scheme == "http" and is_loopback(parts.hostname))):
        raise Invalid("endpoint must be an https:// URL (http:// only on loopback)")
    if parts.username or parts.password:
        raise Invalid("endpoint must not carry a user name or password")
    keys = body.get("keys")
    if not isinstance(keys, dict):
        raise Invalid("keys must be an object with p256dh and auth (base64url)")
    out: dict[str, str] = {"endpoint": endpoint}
    for name, size in (("p256dh", 65), ("auth", 16)):
        value = keys.get(name)
        try:
            raw = unb64url(value) if isinstance(value, str) and len(value) < 200 else b""
        except ValueError:
            raw = b""
        if len(raw) != size or (name == "p256dh" and raw[0] != 4):
            raise Invalid(f"keys.{name} must be base64url of {size} bytes"
                          + (" (an uncompressed P-256 point)" if name == "p256dh" else ""))
        out[name] = str(value)
    return out


def subscribe(conn: sqlite3.Connection, sub: dict[str, str], device: str, at: float) -> tuple[str, bool]:
    """Keep a subscription (a new one, or new keys for a known endpoint); its channel and whether it is new."""
    channel = rules.push_key(sub["endpoint"])
    new = conn.execute("SELECT 1 FROM push_subscriptions WHERE channel = ?", (channel,)).fetchone() is None
    conn.execute("INSERT INTO push_subscriptions (channel, endpoint, p256dh, auth, device, created_at) VALUES"
                 " (?, ?, ?, ?, ?, ?) ON CONFLICT (channel) DO UPDATE SET p256dh = excluded.p256dh,"
                 " auth = excluded.auth, device = excluded.device, last_error = NULL",
                 (channel, sub["endpoint"], sub["p256dh"], sub["auth"], device[:200], at))
    return channel, new


def unsubscribe(conn: sqlite3.Connection, endpoint: str) -> bool:
    channel = rules.push_key(endpoint)
    gone = conn.execute("DELETE FROM push_subscriptions WHERE channel = ?", (channel,)).rowcount > 0
    # Whatever was still due for it goes with it.
    conn.execute("UPDATE notify_outbox SET next_at = NULL, state = CASE WHEN sends = 0 THEN 'cancelled' ELSE state"
                 " END WHERE channel = ? AND next_at IS NOT NULL", (channel,))
    return gone


def subscriptions(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    cur = conn.execute("SELECT " + ", ".join(COLUMNS) + " FROM push_subscriptions ORDER BY created_at")
    return [dict(zip(COLUMNS, r, strict=True)) for r in cur.fetchall()]


def get(conn: sqlite3.Connection, channel: str) -> dict[str, Any] | None:
    cur = conn.execute("SELECT " + ", ".join(COLUMNS) + " FROM push_subscriptions WHERE channel = ?", (channel,))
    row = cur.fetchone()
    return dict(zip(COLUMNS, row, strict=True)) if row else None


def channel_name(sub: dict[str, Any]) -> str:
    host = urlsplit(sub["endpoint"]).hostname or "?"
    return f"push {sub.get('device') or 'device'} ({host})"[:80]


def noted(conn: sqlite3.Connection, channel: str, at: float, error: str | None) -> None:
    if error is None:
        conn.execute("UPDATE push_subscriptions SET last_ok_at = ?, last_error = NULL WHERE channel = ?", (at, channel))
    else:
        conn.execute("UPDATE push_subscriptions SET last_error = ? WHERE channel = ?", (error[:500], channel))
