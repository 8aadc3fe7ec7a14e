"""The http transport's entries: Claude Code POSTs every event but SessionStart to our resident server.

``agent-hook settings install --transport http`` writes, for each event of
:func:`http_events`, an http entry to ``http://127.0.0.1:<serve.port>/hooks/<Event>``
whose headers carry the session's variables (``$NAME`` with ``allowedEnvVars``;
an unset one arrives empty, which the server reads as unset). SessionStart
stays a command entry (:data:`COMMAND_ONLY`); its launcher runs
``agent-hook-session-start --serve``, which starts the server when a connect
probe fails (or replaces a stale one) before the session's first tool call.
So a session starts one process of ours, however many tool calls and turns it has.
No secret is written: the server checks the caller's uid on the loopback
connection (agent_hooks/server/peer.py), so a world-readable settings.json
gives nobody else a way in.
"""

from __future__ import annotations

from typing import Any

from agent_hooks.server.local import HOST, SESSION_ENV, header_for
from agent_hooks.wiring.table import HOOKS

TRANSPORTS = ("command", "http")
# Claude Code runs no http hook on SessionStart (2.1.197 and 2.1.332 send none; the binary lists
# SessionStart and Setup as command-only), and it is SessionStart that starts the server anyway.
COMMAND_ONLY = ("SessionStart",)
# Claude Code ignores onFailure on these (2.1.330 and 2.1.332 end the turn; 2.1.332 logs 'onFailure:
# "block" is ignored on Stop'): an http Stop cannot hold a persisting worker while the server is down,
# so strict guards keep it a command hook.
NO_BLOCK_ON_FAILURE = ("Stop",)
# Under strict guards (guards.fail_closed) these entries carry onFailure "block": a call the server cannot
# answer blocks the tool (PreToolUse) or the prompt (UserPromptSubmit) instead of letting it through.
BLOCK_ON_FAILURE = ("PreToolUse", "UserPromptSubmit")
# The argument SessionStart gets when the http transport is wired.
SERVE_ARG = "--serve"


def http_events(cfg: dict[str, Any]) -> tuple[str, ...]:
    """The events the http transport sends to the server, in the event table's order."""
    keep = COMMAND_ONLY + (NO_BLOCK_ON_FAILURE if strict(cfg) else ())
    return tuple(h.event for h in HOOKS if h.event not in keep)


def strict(cfg: dict[str, Any]) -> bool:
    """Strict guards (``guards.fail_closed``, docs/server.md)."""
    return cfg["guards"]["fail_closed"] is True


def url_for(port: int, event: str) -> str:
    return f"http://{HOST}:{port}/hooks/{event}"


def http_entry(event: str, port: int, timeout_s: int, block_on_failure: bool = False) -> dict[str, Any]:
    """Our http entry for ``event``; ``block_on_failure``: the client blocks when it cannot get an answer."""
    entry: dict[str, Any] = {
        "type": "http",
        "url": url_for(port, event),
        "timeout": timeout_s,
        "headers": {header_for(var): f"${{{var}}}" for var in SESSION_ENV},
        "allowedEnvVars": list(SESSION_ENV),
    }
    if block_on_failure:
        entry["onFailure"] = "block"
    return entry


def port_of(url: str) -> int | None:
    """The port of one of our hook URLs (None when it has none)."""
    import urllib.parse

    try:
        return urllib.parse.urlsplit(url).port
    except ValueError:
        return None
