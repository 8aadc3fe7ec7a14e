"""Is the workspace still the directory SessionStart wrote into?

Stop and SessionEnd sync identity files from the paths SessionStart recorded.
If the workspace directory itself was replaced meanwhile (``mv ws ws.real &&
ln -s outside ws``, or a fresh directory in its place), those paths now name
someone else's files, and syncing them would make them the agent's current
version. SessionStart records the resolved directory's device and inode; the
sync is refused when the path no longer resolves to itself or names another
directory.
"""

from __future__ import annotations

import os
import sqlite3


def record(conn: sqlite3.Connection, session_id: str, directory: str, at: float) -> None:
    """Remember ``directory`` (already resolved) as the session's workspace, with its device and inode."""
    try:
        st = os.stat(directory)
    except OSError:
        return
    conn.execute(
        "INSERT INTO identity_workspaces (session_id, path, dev, ino, at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (session_id) DO UPDATE SET path = excluded.path, dev = excluded.dev,"
        " ino = excluded.ino, at = excluded.at",
        (session_id, directory, st.st_dev, st.st_ino, at),
    )


def problem(conn: sqlite3.Connection, session_id: str) -> tuple[str, str] | None:
    """None when the recorded workspace is still itself; else (message, trace of what changed)."""
    row = conn.execute("SELECT path, dev, ino FROM identity_workspaces WHERE session_id = ?",
                       (session_id,)).fetchone()
    if row is None:
        return None
    path, dev, ino = row
    st: os.stat_result | None
    try:
        st = os.lstat(path)
        real = os.path.realpath(path)
        now = f"realpath {real}, device {st.st_dev}, inode {st.st_ino}, symlink {os.path.islink(path)}"
    except OSError as exc:
        st, real, now = None, None, f"cannot be read: {exc}"
    if st is not None and real == path and (st.st_dev, st.st_ino) == (dev, ino):
        return None
    message = (f"workspace {path} was replaced since SessionStart (moved, swapped for a symlink or another"
               f" directory); identity files were not synced from it")
    trace = f"recorded at SessionStart: {path}, device {dev}, inode {ino}\nnow: {now}"
    return message, trace


def forget(conn: sqlite3.Connection, session_id: str | None = None, before: float | None = None) -> None:
    """Drop a session's record (SessionEnd), or every record older than ``before``."""
    if session_id is not None:
        conn.execute("DELETE FROM identity_workspaces WHERE session_id = ?", (session_id,))
    if before is not None:
        conn.execute("DELETE FROM identity_workspaces WHERE at < ?", (before,))
