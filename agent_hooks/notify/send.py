"""Sending one notification: through Apprise (a channel's URL) or Web Push (a subscribed device).

Both libraries are imported here, on the first send, by the resident server's sender thread or by
`agent-hook notify test`: never by a hook. Each send answers ``(ok, what the channel answered)``;
``gone`` on a push means the subscription is over (the push service said 404 or 410).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from agent_hooks.notify.text import Message, masked

ANSWER_CHARS = 500


@dataclass
class Sent:
    ok: bool
    answer: str
    gone: bool = False


def _clean(text: str, url: str | None = None) -> str:
    """An answer to keep and show: one line each, the channel's URL (it may hold a token) masked."""
    from agent_hooks.openclaw.settings import mask

    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    out = masked(" | ".join(lines))
    return mask(out, url)[:ANSWER_CHARS] if url else out[:ANSWER_CHARS]


def apprise_send(url: str, msg: Message, timeout_s: float) -> Sent:
    """One notification through Apprise; what it logged while sending is the channel's answer."""
    try:
        import apprise
    except ImportError:
        return Sent(False, "apprise is not installed: pip install apprise (agent-hooks depends on it)")
    bundle = apprise.Apprise()
    try:
        added = bundle.add(url)
    except Exception as exc:  # noqa: BLE001 - a plugin's own parser may raise on a bad URL
        return Sent(False, _clean(f"Apprise refused the URL: {type(exc).__name__}: {exc}", url))
    if not added:
        return Sent(False, "Apprise does not understand this URL (see https://github.com/caronc/apprise/wiki)")
    for plugin in bundle:  # the plugins' own timeouts (4 s by default, or the URL's rto / cto): ours at most
        plugin.socket_read_timeout = min(float(getattr(plugin, "socket_read_timeout", timeout_s)), timeout_s)
        plugin.socket_connect_timeout = min(float(getattr(plugin, "socket_connect_timeout", timeout_s)), timeout_s)
    with apprise.LogCapture(level=logging.INFO) as logs:
        try:
            ok = bool(bundle.notify(title=msg.title, body=msg.body))
        except Exception as exc:  # noqa: BLE001 - a plugin that raises is a failed send, said
            ok = False
            logging.getLogger("apprise").error("%s: %s", type(exc).__name__, exc)
        said = logs.getvalue() if hasattr(logs, "getvalue") else ""
    lines = [line.split(" - ", 2)[-1] for line in said.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("Notifying ")]  # "Notifying 1 service(s).": no answer
    answer = _clean("\n".join(lines), url) or ("sent" if ok else "not sent (Apprise said nothing more)")
    return Sent(ok, answer)


def push_send(subscription: dict[str, Any], msg: Message, vapid: Any, contact: str, timeout_s: float) -> Sent:
    """One Web Push message (aes128gcm, VAPID-signed) to a subscribed device: JSON title, body, url, tag."""
    from pywebpush import WebPushException, webpush

    info = {"endpoint": subscription["endpoint"], "keys": {"p256dh": subscription["p256dh"],
                                                            "auth": subscription["auth"]}}
    data = json.dumps({"title": msg.title, "body": msg.body, "url": msg.url, "tag": msg.tag})
    try:
        response = webpush(info, data=data, vapid_private_key=vapid, vapid_claims={"sub": contact},
                           timeout=timeout_s, ttl=3600, headers={"Urgency": "high"})
    except WebPushException as exc:
        status = exc.response.status_code if exc.response is not None else None
        body = (exc.response.text[:200] if exc.response is not None else "") or str(exc)
        return Sent(False, _clean(f"HTTP {status}: {body}" if status else body), gone=status in (404, 410))
    except Exception as exc:  # noqa: BLE001 - requests' connection errors, a bad key: a failed send, said
        return Sent(False, _clean(f"{type(exc).__name__}: {exc}"))
    status = getattr(response, "status_code", None)
    return Sent(True, f"HTTP {status}" if status else "sent")
