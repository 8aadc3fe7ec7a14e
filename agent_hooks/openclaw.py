"""The ``[openclaw]`` settings: whether a gateway is configured, its token, and what is wrong with them.

Standard library only and cheap: the server's start-up, doctor and the CLI read
it; the WebSocket client (agent_hooks.server.oc_gateway) is imported only when
``[openclaw] url`` is set. The token comes from ``$AGENT_HOOKS_OPENCLAW_TOKEN``
or the file ``[openclaw] token_file`` names (0600), never from config.toml.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

TOKEN_ENV = "AGENT_HOOKS_OPENCLAW_TOKEN"
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
        return f"openclaw.url must start with ws:// or wss://, got {url!r}"
    if not parts.hostname:
        return f"openclaw.url has no host: {url!r}"
    try:
        parts.port
    except ValueError as exc:
        return f"openclaw.url: {exc}"
    return None


def gateway_host(config: Mapping[str, Any], own_host: str) -> str:
    """The host name OpenClaw cards carry: ``[openclaw] host``, else the url's host (loopback: this host)."""
    named = str(section(config).get("host") or "").strip()
    if named:
        return named
    host = urlsplit(str(section(config).get("url") or "")).hostname or ""
    return own_host if not host or host in LOOPBACK_HOSTS or host.startswith("127.") else host


def token(config: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The gateway token, or SettingError saying why there is none to use."""
    sec = section(config)
    if "token" in sec:
        raise SettingError("openclaw.token is set in config.toml: the gateway token is never read from there;"
                           f" put it in a 0600 file named by openclaw.token_file, or in ${TOKEN_ENV}")
    value = (env.get(TOKEN_ENV) or "").strip()
    if value:
        return value
    path = str(sec.get("token_file") or "").strip()
    if not path:
        raise SettingError(f"no gateway token: set ${TOKEN_ENV} or openclaw.token_file")
    path = os.path.expanduser(path)
    try:
        st = os.stat(path)
        if st.st_mode & 0o077:
            raise SettingError(f"openclaw.token_file {path} is readable by others (mode {st.st_mode & 0o777:o});"
                               f" chmod 600 {path}")
        with open(path, encoding="utf-8") as f:
            value = f.read().strip()
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
        return (f"openclaw.url {url} is ws:// to another host: the gateway token and the agents' commands cross"
                " the network unencrypted; use wss:// (or a tunnel to loopback)")
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
