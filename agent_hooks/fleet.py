"""This host on a fleet: its name, its credential, the headers it sends a command center (stdlib only).

A host paired with a command center (``agent-hook fleet join``) keeps its own
credential in ``<config dir>/fleet-credential`` (0600): the center's URL, the
name it was paired as, the credential, and the command centers it goes to
(``centers``). Everything that talks to one of those centers (the drainer,
the server's subscription and reporter, ``agent-hook cancel --server``,
``approvals --server``) sends ``Authorization: Bearer <credential>``, and the
center takes the host's name from it.

Where a credential goes: to the center that issued it, and to the other
command centers named at ``fleet join`` time, never anywhere else. Several
command centers can serve one fleet from one store (one table of credentials);
``fleet join URL`` records, besides URL, the other centers of ``forward.url``'s
list when URL is one of them (or those given with ``--also``). The list is
fixed at pairing: a ``forward.url`` edited later to name another server does
not make it a receiver of this credential (pair again for that). Only the
host's own user can write the list, and that user can read the credential
anyway, so the list gives nobody a secret they did not have.

A host not paired (or talking to another center) sends the shared fleet token
when one is set, ``Authorization: Bearer <fleet token>``: the command center
owner's key. With it the caller acts as the owner, and names its host in the
``X-Agent-Hooks-Host`` header (doctor says to pair such a host). Both secrets
live in 0600 files (the token also in ``$AGENT_HOOKS_FLEET_TOKEN``), never in
config.toml, which is often readable by others.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import stat
import time
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
CREDENTIAL_NAME = "fleet-credential"
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


class SecretError(OSError):
    """A secret's file that is there but is not one: not a regular file, too big, not UTF-8 text, or (when it
    must be private) readable by others. The message starts with the file's path."""


def read_secret(path: str | None, env: Mapping[str, str] | None = None, var: str | None = None, *,
                private: bool = False, max_bytes: int | None = None) -> str | None:
    """A secret as every client reads one (the fleet token: the CLI, the server's check of callers, its
    reporter; the OpenClaw gateway's token): ``$var`` when set (stripped) wins; else the file at ``path``,
    stripped, None when it holds nothing (or no path is given).

    The file is opened without blocking (a FIFO put there must not hold the server's event loop) and checked
    on the opened file, so what is checked is what is read: a regular file, at most ``max_bytes``, UTF-8, and
    with ``private`` not readable by others (:class:`SecretError` says which). A missing file raises
    FileNotFoundError and any other failure its OSError: each caller decides what that means for it.
    """
    value = ((env or {}).get(var) or "").strip() if var else ""
    if value or not path:
        return value or None
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SecretError(f"{path} is not a regular file")
        if private and st.st_mode & 0o077:
            raise SecretError(f"{path} is readable by others (mode {st.st_mode & 0o777:o}); chmod 600 {path}")
        if max_bytes is not None and st.st_size > max_bytes:
            raise SecretError(f"{path} is {st.st_size} bytes: not a token (at most {max_bytes})")
        chunks = []
        while chunk := os.read(fd, 65536 if max_bytes is None else max_bytes + 1):
            chunks.append(chunk)
            if max_bytes is not None:
                break
    finally:
        os.close(fd)
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise SecretError(f"{path} is not UTF-8 text") from None
    return text.strip() or None


def token(paths: Paths, config: dict[str, Any], env: Mapping[str, str] | None = None) -> str | None:
    """The fleet token, or None when none is set (or its file cannot be read)."""
    try:
        return read_secret(token_path(paths, config), os.environ if env is None else env, TOKEN_ENV)
    except OSError:
        return None


def _readable_by_others(path: str) -> str | None:
    """Why a secret's file is unsafe (its group or others may read it), or None (safe, or no file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_mode & 0o077:
        return f"{path} is readable by others (mode {st.st_mode & 0o777:o}); chmod 600 it"
    return None


def token_problem(paths: Paths, config: dict[str, Any]) -> str | None:
    """Why the token file is unsafe (readable by others), or None."""
    return _readable_by_others(token_path(paths, config))


def write_token(paths: Paths, config: dict[str, Any], value: str | None = None) -> str:
    """Write a fleet token (a new random one unless given) to the token file, 0600; return it."""
    value = value or secrets.token_urlsafe(32)
    _write_private(token_path(paths, config), value + "\n")
    return value


def _write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` as a new 0600 file, replacing any old one at once."""
    ensure_dir(os.path.dirname(path))
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def credential_path(paths: Paths) -> str:
    return os.path.join(paths.config_dir, CREDENTIAL_NAME)


def read_credential(paths: Paths) -> dict[str, Any] | None:
    """This host's paired credential ``{"center", "host", "credential", "paired_at", "centers"}``, or None
    (none, or a file that is not one). ``centers`` always lists ``center`` (a file written before there
    were several: that one alone)."""
    try:
        with open(credential_path(paths), encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str) and doc[k]
                                            for k in ("center", "host", "credential")):
        return None
    raw = doc.get("centers")
    listed: list[Any] = raw if isinstance(raw, list) else []
    doc["centers"] = [doc["center"], *(c for c in listed if isinstance(c, str) and c and c != doc["center"])]
    return doc


def write_credential(paths: Paths, center: str, host: str, credential: str, also: list[str] | None = None) -> str:
    """Keep the credential a command center gave this host (0600), for that center and the centers
    ``also`` names (command centers that share its fleet); the file's path."""
    path = credential_path(paths)
    centers = [center, *(c for c in (also or []) if not same_center(c, center))]
    doc = {"center": center, "host": host, "credential": credential, "paired_at": time.time(), "centers": centers}
    _write_private(path, json.dumps(doc, indent=1) + "\n")
    return path


def credential_problem(paths: Paths) -> str | None:
    """Why the credential file is unsafe (readable by others), or None."""
    return _readable_by_others(credential_path(paths))


def credential_stamp(paths: Paths) -> tuple[int, int] | None:
    """(mtime, inode) of the credential file, None when there is none: a long-lived client looks at it
    to send a credential written after it started."""
    try:
        st = os.stat(credential_path(paths))
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ino)


def _origin(url: str) -> tuple[str, str, int, str] | None:
    """(scheme, host, port, path) of a command center's URL, for comparing two; None when it is none."""
    base = center_base(url)
    if base is None:
        return None
    parts = urlsplit(base)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return parts.scheme, (parts.hostname or "").lower(), port, parts.path.rstrip("/")


def same_center(a: str, b: str) -> bool:
    """True when two URLs name the same command center (scheme, host, port and path; an ingest URL
    names its center)."""
    left, right = _origin(a), _origin(b)
    return left is not None and left == right


def credential_for(paths: Paths, url: str | None) -> dict[str, Any] | None:
    """This host's credential when ``url`` names a command center it is for (the one that issued it, or
    one of the centers recorded with it at pairing), else None."""
    cred = read_credential(paths)
    if cred is None or not url or not any(same_center(c, url) for c in cred["centers"]):
        return None
    return cred


def name_on(paths: Paths, config: dict[str, Any], url: str | None) -> str:
    """This host's name on the command center at ``url``: the name it was paired as there, else its own."""
    cred = credential_for(paths, url)
    return str(cred["host"]) if cred else host_name(config)


def client_headers(paths: Paths, config: dict[str, Any], env: Mapping[str, str] | None = None,
                   url: str | None = None) -> dict[str, str]:
    """Headers for every request this host makes to the command center at ``url``: its own credential
    when that center paired it, else the shared fleet token when one is set."""
    cred = credential_for(paths, url)
    if cred is not None:
        return {HOST_HEADER: str(cred["host"]), "Authorization": f"Bearer {cred['credential']}"}
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
