"""This host on a fleet: its name, the fleet token, the headers it sends a command center (stdlib only).

The drainer, the server's subscription and ``agent-hook cancel --server`` all
send the same two headers: ``X-Agent-Hooks-Host`` (so a command center keeps
each session with the host it came from, even when several hosts share an
address) and ``Authorization: Bearer <fleet token>`` when a token is set.
The token is a secret: it lives in a 0600 file (or ``$AGENT_HOOKS_FLEET_TOKEN``),
never in config.toml, which is often readable by others.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from urllib.parse import urlsplit, urlunsplit

from agent_hooks.paths import Paths, ensure_dir

# Annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

HOST_HEADER = "X-Agent-Hooks-Host"
TOKEN_ENV = "AGENT_HOOKS_FLEET_TOKEN"
TOKEN_NAME = "fleet-token"
INGEST_PATH = "/api/hooks/ingest"
_HOST_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,62}")


def host_name(config: dict[str, Any]) -> str:
    """This host's name on a board: ``fleet.host``, else the machine's hostname."""
    return str(config["fleet"].get("host") or "") or socket.gethostname() or "localhost"


def clean_host(value: str | None) -> str | None:
    """A host name from a request header, or None when it is not a plain name."""
    if value and _HOST_OK.fullmatch(value):
        return value
    return None


def token_path(paths: Paths, config: dict[str, Any]) -> str:
    return str(config["fleet"].get("token_file") or "") or os.path.join(paths.config_dir, TOKEN_NAME)


def token(paths: Paths, config: dict[str, Any], env: Mapping[str, str] | None = None) -> str | None:
    """The fleet token, or None when none is set."""
    env = os.environ if env is None else env
    value = (env.get(TOKEN_ENV) or "").strip()
    if value:
        return value
    try:
        with open(token_path(paths, config), encoding="utf-8") as f:
            value = f.read().strip()
    except OSError:
        return None
    return value or None


def token_problem(paths: Paths, config: dict[str, Any]) -> str | None:
    """Why the token file is unsafe (readable by others), or None."""
    path = token_path(paths, config)
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_mode & 0o077:
        return f"{path} is readable by others (mode {st.st_mode & 0o777:o}); chmod 600 it"
    return None


def write_token(paths: Paths, config: dict[str, Any], value: str | None = None) -> str:
    """Write a fleet token (a new random one unless given) to the token file, 0600; return it."""
    value = value or secrets.token_urlsafe(32)
    path = token_path(paths, config)
    ensure_dir(os.path.dirname(path))
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(value + "\n")
    os.replace(tmp, path)
    return value


def client_headers(paths: Paths, config: dict[str, Any], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Headers for every request this host makes to a command center."""
    headers = {HOST_HEADER: host_name(config)}
    value = token(paths, config, env)
    if value:
        headers["Authorization"] = f"Bearer {value}"
    return headers


def center_base(url: str) -> str | None:
    """The command center's base URL from an ingest URL (``forward.url``), or None when it is not one."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    path = parts.path
    if path.endswith(INGEST_PATH):
        path = path[: -len(INGEST_PATH)]
    elif path.rstrip("/"):
        return None  # some other endpoint: not a command center of ours
    return urlunsplit((parts.scheme, parts.netloc, path.rstrip("/"), "", ""))
