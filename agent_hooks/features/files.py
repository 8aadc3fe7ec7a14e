"""Careful file access for paths that come from payloads or configuration.

A path from a payload is never trusted: it is resolved, must lie inside the
workspace, is opened with ``O_NOFOLLOW`` (a symlink as the last component is
refused) and must be a regular file. Writes go to a temporary file in the same
directory and are renamed over the target, so a reader never sees half a file
and a symlink planted at the target is replaced, not followed.
"""

from __future__ import annotations

import os
import stat
import time

from agent_hooks.hashing import sha256

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

OK, MISSING, UNSAFE, TOO_LARGE, NOT_TEXT = "ok", "missing", "unsafe", "too_large", "not_text"


def sha256_text(text: str) -> str:
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def real_dir(path: str | None) -> str | None:
    """``path`` resolved, when it is an existing directory; else None."""
    if not path or not os.path.isabs(path):
        return None
    real = os.path.realpath(path)
    return real if os.path.isdir(real) else None


def workspace(config: dict[str, Any], cwd: str | None) -> str | None:
    """An agent's workspace, resolved: ``identity_files.workspace`` when set, else the
    session's cwd. Identity files and memory directories live there."""
    configured = config["identity_files"].get("workspace") or ""
    return real_dir(os.path.expanduser(configured) if configured else cwd)


def inside(path: str, directory: str) -> bool:
    """True when the resolved ``path`` is ``directory`` or below it (both already resolved)."""
    try:
        return os.path.commonpath([path, directory]) == directory
    except ValueError:
        return False


def resolve_in(workspace: str, file_path: str) -> str | None:
    """The resolved path of ``file_path`` (absolute, or relative to the workspace) when inside it."""
    if not isinstance(file_path, str) or not file_path or "\0" in file_path:
        return None
    joined = file_path if os.path.isabs(file_path) else os.path.join(workspace, file_path)
    real = os.path.realpath(joined)
    return real if inside(real, workspace) and real != workspace else None


def read_upto(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes from ``fd``'s offset, in 1 MiB reads (a file may grow meanwhile)."""
    chunks = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_text(path: str, max_bytes: int) -> tuple[str, str | None]:
    """(status, text): the regular file at ``path``, never through a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return MISSING, None
    except OSError:
        # ELOOP: the last component is a symlink; anything else we cannot read safely either.
        return (MISSING, None) if not os.path.lexists(path) else (UNSAFE, None)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return UNSAFE, None
        if st.st_size > max_bytes:
            return TOO_LARGE, None
        data = read_upto(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return TOO_LARGE, None
    try:
        return OK, data.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_TEXT, None


def backup_name(path: str, at: float) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(at))
    candidate = f"{path}.bak-{stamp}"
    n = 1
    while os.path.lexists(candidate):
        n += 1
        candidate = f"{path}.bak-{stamp}-{n}"
    return candidate


def write_text(directory: str, name: str, text: str, at: float, backup: bool) -> tuple[str, str | None]:
    """Write ``directory/name`` atomically; returns (status, backup path).

    ``backup`` true renames the existing file to ``name.bak-<UTC time>`` first.
    A target that exists but is not a regular file (a symlink, a directory) is
    left alone and reported as unsafe.
    """
    target = os.path.join(directory, name)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        return UNSAFE, None
    tmp = os.path.join(directory, f".{name}.agent-hooks.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        saved = None
        if backup and st is not None:
            saved = backup_name(target, at)
            os.rename(target, saved)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return OK, saved
