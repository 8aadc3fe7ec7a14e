"""Backups we leave beside a file we rewrite (``settings.json.bak-agent-hooks-<UTC time>[-n]``): keep a few.

One small function so every writer of settings files (the CLI today, the
settings domain module tomorrow) prunes the same way: call :func:`prune`
right after writing a new backup.
"""

from __future__ import annotations

import os

MARKER = ".bak-agent-hooks-"


def backups(path: str, marker: str = MARKER) -> list[str]:
    """The backups of ``path``, oldest first (by modification time, then name)."""
    directory, base = os.path.split(path)
    prefix = base + marker
    found = []
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return []
    for name in names:
        if name.startswith(prefix):
            full = os.path.join(directory, name)
            try:
                found.append((os.lstat(full).st_mtime_ns, name, full))
            except OSError:
                continue
    return [full for _, _, full in sorted(found)]


def prune(path: str, keep: int, marker: str = MARKER) -> list[str]:
    """Delete all but the newest ``keep`` backups of ``path``; the paths deleted.

    Only regular files named like our backups are touched: never the file
    itself, another tool's backups, or a symlink's target.
    """
    old = backups(path, marker)
    removed = []
    for full in old[: max(0, len(old) - max(keep, 1))]:
        try:
            if os.path.isfile(full) and not os.path.islink(full):
                os.unlink(full)
                removed.append(full)
        except OSError:
            continue
    return removed
