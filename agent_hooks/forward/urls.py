"""Where events may go: loopback unless the user allowed a remote URL (stdlib only)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def url_problem(url: str, allow_remote: bool) -> str | None:
    """Why this URL must not be used, or None. Non-loopback hosts need allow_remote."""
    if any(c <= " " or c == "\x7f" for c in url):
        # urlsplit drops a tab or newline silently; the HTTP client refuses the URL on every send.
        return f"forward.url {url!r} contains whitespace or a control character"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number in 0-65535
    except ValueError as exc:
        return f"invalid forward.url {url!r}: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"forward.url must be an http(s) URL, got {url!r}"
    if allow_remote:
        return None
    host = parts.hostname
    if host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass
    return (f"forward.url {url!r} is not a loopback address; set forward.allow_remote = true "
            "to send events off this host (events stay queued)")
