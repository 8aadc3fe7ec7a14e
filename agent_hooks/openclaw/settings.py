"""The ``[openclaw]`` settings: whether a gateway is configured, its token, and what is wrong with them.

Standard library only and cheap: the server's start-up, doctor and the CLI read
it; the WebSocket client (agent_hooks.openclaw.gateway) is imported only when
``[openclaw] url`` is set. The token comes from ``$AGENT_HOOKS_OPENCLAW_TOKEN``
or the file ``[openclaw] token_file`` names (0600), never from config.toml.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agent_hooks import fleet

TOKEN_ENV = "AGENT_HOOKS_OPENCLAW_TOKEN"
MAX_TOKEN_BYTES = 4096  # a token file larger than this is the wrong file
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


class SettingError(ValueError):
    """A setting that keeps the server from connecting; the message says what to change."""


def section(config: Mapping[str, Any]) -> dict[str, Any]:
    value = config.get("openclaw")
    return value if isinstance(value, dict) else {}


def configured(config: Mapping[str, Any]) -> bool:
    """True when ``[openclaw] url`` names a gateway (nothing is attempted otherwise)."""
    return bool(str(section(config).get("url") or "").strip())


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a gateway's WebSocket address, or None."""
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss"):
        return f"openclaw.url must start with ws:// or wss://, got {shown_url(url)!r}"
    if not parts.hostname:
        return f"openclaw.url has no host: {shown_url(url)!r}"
    if parts.username is not None or parts.password is not None:
        # A credential in the url would be shown wherever the url is (status, doctor, the board, logs).
        return (f"openclaw.url carries a user name or password ({shown_url(url)}): remove it; the gateway token"
                f" goes in the 0600 file named by openclaw.token_file, or in ${TOKEN_ENV}")
    try:
        _ = parts.port  # reading it is the check: a port out of range or not a number raises
    except ValueError as exc:
        return f"openclaw.url: {exc}"
    return None


def shown_url(url: str) -> str:
    """``url`` as status, doctor, the board and the log may show it: any user name or password, query or
    fragment replaced by ``***`` (the gateway's address stays; what might be a credential goes)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", "***" if parts.fragment else ""))


def gateway_host(config: Mapping[str, Any], own_host: str) -> str:
    """The host name OpenClaw cards carry: ``[openclaw] host``, else the url's host (loopback: this host)."""
    named = str(section(config).get("host") or "").strip()
    if named:
        return named
    host = urlsplit(str(section(config).get("url") or "")).hostname or ""
    return own_host if not host or host in LOOPBACK_HOSTS or host.startswith("127.") else host


# A stretch of text this long that is also in the token is masked, wherever it stands: a gateway may quote
# part of the token (cut by itself, or by a close frame's 123 bytes).
MASK_SHORTEST = 8


def mask(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` masked (``***``): the whole of it, and every stretch of MASK_SHORTEST or more
    characters it shares with it. Call it before any cut: a cut first leaves the part of the secret before
    the cut, which no longer matches the whole. (str.find per piece of the secret: a long error costs
    milliseconds, not a character-by-character loop.)"""
    if not secret or not text:
        return text
    text = text.replace(secret, "***")
    if len(secret) < MASK_SHORTEST:
        return text
    spans: list[tuple[int, int]] = []
    for piece in {secret[i:i + MASK_SHORTEST] for i in range(len(secret) - MASK_SHORTEST + 1)}:
        at = text.find(piece)
        while at != -1:
            spans.append((at, at + MASK_SHORTEST))
            at = text.find(piece, at + 1)
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    shown = 0
    start, end = spans[0]
    for a, b in spans[1:] + [(len(text) + 1, len(text) + 1)]:
        if a <= end:  # overlapping pieces of one quote: one stretch
            end = max(end, b)
            continue
        out += [text[shown:start], "***"]
        shown, (start, end) = end, (a, b)
    out.append(text[shown:])
    return "".join(out)


def token(config: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The gateway token, or SettingError saying why there is none to use."""
    sec = section(config)
    if "token" in sec:
        raise SettingError("openclaw.token is set in config.toml: the gateway token is never read from there;"
                           f" put it in a 0600 file named by openclaw.token_file, or in ${TOKEN_ENV}")
    value = fleet.read_secret(None, env, TOKEN_ENV)
    if value:
        return value
    path = str(sec.get("token_file") or "").strip()
    if not path:
        raise SettingError(f"no gateway token: set ${TOKEN_ENV} or openclaw.token_file")
    path = os.path.expanduser(path)
    try:
        value = fleet.read_secret(path, private=True, max_bytes=MAX_TOKEN_BYTES)
    except fleet.SecretError as exc:  # not a regular file, too big, readable by others: its message names it
        raise SettingError(f"openclaw.token_file {exc}") from None
    except OSError as exc:
        raise SettingError(f"openclaw.token_file {path}: {exc.strerror or exc}") from None
    if not value:
        raise SettingError(f"openclaw.token_file {path} is empty")
    return value


def problems(config: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """What keeps the server from connecting to the configured gateway ([] when none is configured)."""
    if not configured(config):
        return ["openclaw.token is set in config.toml and is ignored"] if "token" in section(config) else []
    out = []
    bad = url_problem(str(section(config)["url"]).strip())
    if bad:
        out.append(bad)
    try:
        token(config, env)
    except SettingError as exc:
        out.append(str(exc))
    return out


def cleartext_problem(config: Mapping[str, Any]) -> str | None:
    """A warning when the token would cross the network unencrypted (ws:// to another host), else None."""
    url = str(section(config).get("url") or "").strip()
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "ws" and host and host not in LOOPBACK_HOSTS and not host.startswith("127."):
        return (f"openclaw.url {shown_url(url)} is ws:// to another host: the gateway token and the agents' commands"
                " cross the network unencrypted; use wss:// (or a tunnel to loopback)")
    return None


def scopes(config: Mapping[str, Any]) -> list[str]:
    """The operator scopes asked for: reading events always. Aborting runs (``cancel``): operator.write,
    and operator.admin, since the gateway lets only a run's requester or an admin abort it. Exec
    approvals (``approvals``): operator.approvals, and operator.admin, since the gateway shows a request
    only to the connection that made it or to an admin. Nothing more than the features turned on need."""
    sec = section(config)
    out = ["operator.read"]
    if sec.get("cancel") is True:
        out.append("operator.write")
    if sec.get("approvals") is True:
        out.append("operator.approvals")
    if sec.get("cancel") is True or sec.get("approvals") is True:
        out.append("operator.admin")
    return out


def caps(config: Mapping[str, Any]) -> list[str]:
    """What the client says it can take: tool events, and exec approvals when it answers them."""
    return ["tool-events", "exec-approvals"] if section(config).get("approvals") is True else ["tool-events"]
