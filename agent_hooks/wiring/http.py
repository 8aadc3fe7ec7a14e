"""The http transport's entries: Claude Code POSTs the frequent events to our resident server.

``agent-hook settings install --transport http`` writes, for each event in
:data:`HTTP_EVENTS`, an http entry to ``http://127.0.0.1:<serve.port>/hooks/<Event>``
whose headers carry the session's variables (``$NAME`` with ``allowedEnvVars``;
an unset one arrives empty, which the server reads as unset). Every other
event stays a command entry; SessionStart's launcher runs
``agent-hook-session-start --serve``, which starts the server when a connect
probe fails (or replaces a stale one) before the session's first tool call.
No secret is written: the server checks the caller's uid on the loopback
connection (agent_hooks/server/peer.py), so a world-readable settings.json
gives nobody else a way in.
"""

from __future__ import annotations

from typing import Any

from agent_hooks.server.local import HOST, SESSION_ENV, header_for

TRANSPORTS = ("command", "http")
# The events on the path of every tool call; the rest are rare and stay command hooks.
# PermissionRequest too: the server holds it open for an answer (docs/approvals.md) without a process per dialog.
HTTP_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest")
# The argument SessionStart gets when the http transport is wired.
SERVE_ARG = "--serve"


def url_for(port: int, event: str) -> str:
    return f"http://{HOST}:{port}/hooks/{event}"


def http_entry(event: str, port: int, timeout_s: int) -> dict[str, Any]:
    """Our http entry for ``event``."""
    return {
        "type": "http",
        "url": url_for(port, event),
        "timeout": timeout_s,
        "headers": {header_for(var): f"${{{var}}}" for var in SESSION_ENV},
        "allowedEnvVars": list(SESSION_ENV),
    }


def port_of(url: str) -> int | None:
    """The port of one of our hook URLs (None when it has none)."""
    import urllib.parse

    try:
        return urllib.parse.urlsplit(url).port
    except ValueError:
        return None
