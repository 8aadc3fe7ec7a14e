"""Forks: which session a forked session came from.

Claude Code (2.1.214 and later) starts a fork (``--resume ID --fork-session``,
``/fork``, ``/branch``) with SessionStart ``source: "fork"`` and no parent id
in the payload (2.1.330). The fork's transcript copies the parent's records,
and its assistant records keep the id of the session that made the request in
``requestSessionId``: the parent. The transcript is written with the fork's
first turn, after SessionStart (and for a short fork sometimes after its Stop), so
SessionStart marks the session as a fork and tries; the first Stop or SessionEnd that
finds the transcript records the parent.
"""

from __future__ import annotations

import json
import os
import stat

from agent_hooks.features import files, transcript

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

    from agent_hooks.payload import Payload

FORK = "fork"
HEAD_BYTES = 512 * 1024  # the copied records come first; a parent id is in the first assistant line
# What a session id may be made of (no `re`: compiling a pattern costs the hook path ~2 ms).
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-")


def parent_from_transcript(path: Any, session_id: str, env: Any, config: dict[str, Any]) -> str | None:
    """The parent session named in a fork's transcript head, or None (not there yet, or unsafe path)."""
    real = transcript.safe_path(path, env, config) if isinstance(path, str) else None
    if real is None:
        return None
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = files.read_upto(fd, HEAD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    for line in head.split(b"\n"):
        if b'"requestSessionId"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        parent = entry.get("requestSessionId") if isinstance(entry, dict) else None
        if isinstance(parent, str) and parent != session_id and 0 < len(parent) <= 128 and _ID_CHARS.issuperset(parent):
            return parent
    return None


def wanted(conn: sqlite3.Connection, session_id: str) -> bool:
    """True for a fork whose parent is not recorded yet (one primary-key read)."""
    row = conn.execute("SELECT forked_at, parent_session_id FROM sessions WHERE session_id = ?",
                       (session_id,)).fetchone()
    return bool(row and row[0] is not None and row[1] is None)


def prepare(conn: sqlite3.Connection, payload: Payload, env: Any, config: dict[str, Any]) -> str | None:
    """The parent to record for this session, read before the write transaction (file work)."""
    if payload.get("source") == FORK or wanted(conn, payload.session_id):
        return parent_from_transcript(payload.get("transcript_path"), payload.session_id, env, config)
    return None


def record(conn: sqlite3.Connection, payload: Payload, parent: str | None, at: float) -> None:
    """Mark a fork at its SessionStart; record its parent once known (inside the hook's transaction)."""
    if payload.get("source") == FORK:
        conn.execute("UPDATE sessions SET forked_at = coalesce(forked_at, ?) WHERE session_id = ?",
                     (at, payload.session_id))
    if parent:
        conn.execute("UPDATE sessions SET parent_session_id = ? WHERE session_id = ? AND parent_session_id IS NULL",
                     (parent, payload.session_id))
