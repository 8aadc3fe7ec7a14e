"""Memory: files the agent writes under its memory directories, indexed for search.

PostToolUse on Write/Edit/MultiEdit of a file under a memory directory of the
workspace (``memory.dirs``, scope ``agent``; ``memory.shared_dirs``, scope
``shared``) indexes it in SQLite FTS5, re-indexes it when it changed, and drops
it when it is gone (its embedding too: features/vectors.py). Stop rescans the session's memory directories (cheap: a
stat per file) so files written by Bash, or deleted, are caught too.
``agent-hook memory reindex`` rebuilds the index from disk.
"""

from __future__ import annotations

import os
import sqlite3
import stat

from agent_hooks.features import files, vectors
from agent_hooks.features.sessions import agent_name
from agent_hooks.features.toolcalls import WRITE_TOOLS

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_hooks.runner import Context

AGENT_SCOPE, SHARED_SCOPE = "agent", "shared"


def settings(config: dict[str, Any]) -> dict[str, Any]:
    return config["memory"]


def _dir_specs(config: dict[str, Any]) -> list[tuple[str, str]]:
    m = settings(config)
    specs = [(d, AGENT_SCOPE) for d in m.get("dirs") or [] if isinstance(d, str) and d]
    specs += [(d, SHARED_SCOPE) for d in m.get("shared_dirs") or [] if isinstance(d, str) and d]
    return specs


def roots(config: dict[str, Any], ws: str) -> list[tuple[str, str]]:
    """(resolved directory, scope) of each memory directory; relative ones are under the workspace.

    A relative directory must stay inside the workspace once resolved (a symlinked
    ``memory`` pointing elsewhere is not indexed); an absolute one (a shared
    directory several agents write to) is trusted because the configuration names it.
    """
    out = []
    for d, scope in _dir_specs(config):
        if os.path.isabs(d):
            real = os.path.realpath(os.path.expanduser(d))
        else:
            real = os.path.realpath(os.path.join(ws, d))
            if not files.inside(real, ws):
                continue
        out.append((real, scope))
    return out


def maybe_memory_path(config: dict[str, Any], file_path: str) -> bool:
    """Cheap test on the raw path before any filesystem or store work."""
    if not file_path.endswith(tuple(settings(config).get("extensions") or ())):
        return False
    for d, _ in _dir_specs(config):
        d = d.strip("/")
        if f"/{d}/" in file_path or file_path.startswith(f"{d}/"):
            return True
    return False


def classify(config: dict[str, Any], ws: str, path: str) -> tuple[str, str] | None:
    """(root, scope) of the memory directory holding the resolved ``path`` (None: not a memory file)."""
    if not path.endswith(tuple(settings(config).get("extensions") or ())):
        return None
    for root, scope in roots(config, ws):
        if path != root and files.inside(path, root):
            return root, scope
    return None


def drop(conn: sqlite3.Connection, path: str) -> bool:
    row = conn.execute("SELECT id FROM memory_docs WHERE path = ?", (path,)).fetchone()
    if not row:
        return False
    conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (row[0],))
    conn.execute("DELETE FROM memory_docs WHERE id = ?", (row[0],))
    vectors.drop_memory(conn, path)
    return True


def index_file(conn: sqlite3.Connection, config: dict[str, Any], root: str, path: str, scope: str, agent: str,
               session_id: str | None, at: float) -> str:
    """Index (or re-index, or drop) one resolved memory file: indexed | unchanged | dropped | skipped."""
    status, text = files.read_text(path, int(settings(config)["max_file_bytes"]))
    if status != files.OK or text is None:
        return "dropped" if drop(conn, path) else "skipped"
    try:
        st = os.lstat(path)
        size, mtime_ns = st.st_size, st.st_mtime_ns
    except OSError:
        size, mtime_ns = len(text), 0
    digest = files.sha256_text(text)
    row = conn.execute("SELECT id, sha256, scope, agent FROM memory_docs WHERE path = ?", (path,)).fetchone()
    name = os.path.basename(path)
    if row and row[1] == digest and row[2] == scope:
        conn.execute("UPDATE memory_docs SET root = ?, size = ?, mtime_ns = ? WHERE id = ?",
                     (root, size, mtime_ns, row[0]))
        return "unchanged"
    if row:
        doc_id = row[0]
        conn.execute(
            "UPDATE memory_docs SET root = ?, name = ?, scope = ?, agent = ?, sha256 = ?, size = ?,"
            " mtime_ns = ?, session_id = ?, indexed_at = ? WHERE id = ?",
            (root, name, scope, agent, digest, size, mtime_ns, session_id, at, doc_id),
        )
        conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (doc_id,))
    else:
        cur = conn.execute(
            "INSERT INTO memory_docs (path, root, name, scope, agent, sha256, size, mtime_ns, session_id,"
            " indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (path, root, name, scope, agent, digest, size, mtime_ns, session_id, at),
        )
        doc_id = int(cur.lastrowid or 0)
    conn.execute(
        "INSERT INTO memory_fts (rowid, name, path, content, scope, agent) VALUES (?, ?, ?, ?, ?, ?)",
        (doc_id, name, path, text, scope, agent),
    )
    return "indexed"


def relevant(payload: Any, config: dict[str, Any]) -> bool:
    """Cheap test, before any query: a Write/Edit/MultiEdit whose path names a memory directory."""
    if payload.tool_name not in WRITE_TOOLS:
        return False
    file_path = payload.tool_input.get("file_path")
    return isinstance(file_path, str) and maybe_memory_path(config, file_path)


def after_tool(conn: sqlite3.Connection, ctx: Context) -> None:
    """PostToolUse: index a Write/Edit/MultiEdit under a memory directory."""
    p = ctx.payload
    if not relevant(p, ctx.config):
        return
    file_path = p.tool_input["file_path"]
    ws = files.workspace(ctx.config, p.cwd)
    if ws is None or "\0" in file_path:
        return
    # Resolved, so a symlink cannot smuggle a file from elsewhere into the index:
    # what counts is where the file really is (inside a memory directory, or not).
    path = os.path.realpath(file_path if os.path.isabs(file_path) else os.path.join(ws, file_path))
    found = classify(ctx.config, ws, path)
    if found is None:
        return
    root, scope = found
    if index_file(conn, ctx.config, root, path, scope, agent_name(ctx.env, ctx.config), p.session_id,
                  ctx.started) != "unchanged":
        # In the resident server its embedding thread picks it up; elsewhere nothing is started here
        # (Stop starts the worker): a memory write costs PostToolUse no more than before.
        vectors.kick()


def walk(config: dict[str, Any], root: str) -> list[tuple[str, int, int]]:
    """(path, size, mtime_ns) of the memory files under ``root``; symlinks are skipped."""
    exts = tuple(settings(config).get("extensions") or ())
    limit = int(settings(config)["max_files"])
    found: list[tuple[str, int, int]] = []
    stack = [root]
    while stack and len(found) < limit:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
            elif stat.S_ISREG(st.st_mode) and entry.name.endswith(exts):
                found.append((entry.path, st.st_size, st.st_mtime_ns))
                if len(found) >= limit:
                    break
    return found


def walk_roots(config: dict[str, Any], ws: str) -> dict[str, list[tuple[str, int, int]]]:
    """root -> its memory files on disk (the I/O part of a scan, done outside any transaction)."""
    return {root: walk(config, root) if os.path.isdir(root) else [] for root, _ in roots(config, ws)}


def scan(conn: sqlite3.Connection, config: dict[str, Any], ws: str, agent: str, session_id: str | None,
         at: float, walked: dict[str, list[tuple[str, int, int]]] | None = None) -> dict[str, int]:
    """Bring the index for a workspace's memory directories in line with the disk."""
    counts = {"indexed": 0, "unchanged": 0, "dropped": 0, "skipped": 0}
    walked = walk_roots(config, ws) if walked is None else walked
    for root, scope in roots(config, ws):
        known = {
            path: (size, mtime_ns, s)
            for path, size, mtime_ns, s in conn.execute(
                "SELECT path, size, mtime_ns, scope FROM memory_docs WHERE root = ?", (root,)
            )
        }
        seen = set()
        for path, size, mtime_ns in walked.get(root, []):
            seen.add(path)
            if known.get(path) == (size, mtime_ns, scope):
                counts["unchanged"] += 1
                continue
            counts[index_file(conn, config, root, path, scope, agent, session_id, at)] += 1
        for path in known.keys() - seen:
            if drop(conn, path):
                counts["dropped"] += 1
    return counts


def before_stop(ctx: Context) -> dict[str, list[tuple[str, int, int]]] | None:
    """Stop, before the write transaction: walk the memory directories (stats only)."""
    ws = files.workspace(ctx.config, ctx.payload.cwd)
    return None if ws is None else walk_roots(ctx.config, ws)


def on_stop(conn: sqlite3.Connection, ctx: Context, walked: dict[str, list[tuple[str, int, int]]] | None) -> None:
    """Stop: catch memory files written or removed other than through Write/Edit (Bash, by hand)."""
    ws = files.workspace(ctx.config, ctx.payload.cwd)
    if ws is None or walked is None:
        return
    for root, _ in roots(ctx.config, ws):
        if walked.get(root) or conn.execute("SELECT 1 FROM memory_docs WHERE root = ? LIMIT 1", (root,)).fetchone():
            scan(conn, ctx.config, ws, agent_name(ctx.env, ctx.config), ctx.payload.session_id, ctx.started, walked)
            return


def fts_query(text: str) -> str:
    """A plain query as FTS5 syntax: every word must match (quoted, so punctuation is literal)."""
    words = [w for w in text.replace('"', " ").split() if w]
    return " ".join(f'"{w}"' for w in words)


def search(conn: sqlite3.Connection, query: str, agent: str | None = None, limit: int = 10,
           raw: bool = False) -> list[dict[str, Any]]:
    """Ranked hits (best first) with snippets; ``agent`` limits to its own and shared documents."""
    match = query if raw else fts_query(query)
    if not match:
        return []
    sql = (
        "SELECT d.path, d.name, d.scope, d.agent, d.root, d.indexed_at,"
        " bm25(memory_fts, 5.0, 2.0, 1.0) AS score,"
        " snippet(memory_fts, 2, '[', ']', '…', 16) AS snippet"
        " FROM memory_fts JOIN memory_docs d ON d.id = memory_fts.rowid WHERE memory_fts MATCH ?"
    )
    args: list[Any] = [match]
    if agent:
        sql += " AND (d.agent = ? OR d.scope = 'shared')"
        args.append(agent)
    sql += " ORDER BY score LIMIT ?"
    args.append(int(limit))
    cols = ("path", "name", "scope", "agent", "root", "indexed_at", "score", "snippet")
    return [dict(zip(cols, row, strict=True)) for row in conn.execute(sql, args)]
