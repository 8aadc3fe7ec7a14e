"""Memory search by words and by meaning, fused: ``memory search`` and SessionStart's recall.

Two rankings of the same documents (memory files and session summaries):
FTS5 (bm25, every word must match) and cosine similarity of their embeddings
to the query's (features/embedder.py). They are merged by weighted
reciprocal rank fusion::

    score = fts_weight / (rrf_k + fts_rank) + 1 / (rrf_k + vector_rank)

with a missing rank contributing nothing. With ``fts_weight`` 2 and 50
candidates a side, any hit that has the query's words scores above every hit
found by meaning alone (2/110 > 1/61): exact words still win. Without the
model (not installed, broken files) the ranking is FTS5's alone and
:func:`search` says why in its notice; it never fails for that.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_hooks.features import memory as mem
from agent_hooks.features import summary as summaries
from agent_hooks.features import vectors

# One model per process: the CLI loads it once; the resident server hands in the one it holds.
_model: Any = None
_model_error: str | None = None


def model(config: dict[str, Any]) -> Any:
    """The loaded model, loaded on first use (None: unavailable; :func:`model_error` says why)."""
    global _model, _model_error
    if _model is None and _model_error is None:
        from agent_hooks.features import embedder

        try:
            _model = embedder.load(config)
        except embedder.Unavailable as exc:
            _model_error = str(exc)
    return _model


def model_error() -> str | None:
    return _model_error


def use_model(loaded: Any) -> None:
    """Hand in a model loaded elsewhere (the resident server's)."""
    global _model, _model_error
    _model, _model_error = loaded, None


def _fts(conn: sqlite3.Connection, query: str, agent: str | None, n: int, raw: bool) -> list[dict[str, Any]]:
    hits = mem.search(conn, query, agent, n, raw)
    for h in hits:
        h["kind"] = "memory"
        h["key"] = h["path"]
        h["bm25"] = -h.pop("score")  # bm25 is lower-is-better; shown higher-is-better
    if not raw:
        # All words, as for files: an any-word match would outrank every hit found by meaning.
        for h in summaries.search(conn, query, n, any_word=False):
            if agent and h["agent"] != agent:
                continue
            h["key"] = h["session_id"]
            h["bm25"] = h.pop("score")
            hits.append(h)
    hits.sort(key=lambda h: h["bm25"], reverse=True)
    return hits[:n]


# The last corpus matrix built, reused while the store's fingerprint is unchanged (the server, SessionStart
# and repeated searches in one process): rebuilding it reads every vector (~25 ms at 5,000 files).
_corpus_cache: dict[str, Any] = {}


def _corpus(conn: sqlite3.Connection, config: dict[str, Any], model_: Any) -> dict[str, Any]:
    """Every current vector as one matrix: ``keys`` [(kind, key)], ``owners`` [(agent, scope)],
    ``matrix`` (n x dim, unit rows), ``notice``. Texts not embedded yet are embedded here (in memory).

    One read of each table: which texts are stale follows from the rows read anyway (a separate
    stale query cost ~10 ms more at 5,000 files)."""
    import numpy as np

    global _corpus_cache
    fp = vectors.fingerprint(conn)
    cached = _corpus_cache  # one read: another thread (the server's pool) may replace it meanwhile
    if cached.get("fp") == fp and cached.get("model") is model_:
        return cached
    docs = {path: (doc_id, digest, agent, scope) for doc_id, path, digest, agent, scope in
            conn.execute("SELECT id, path, sha256, agent, scope FROM memory_docs")}
    sess = {sid: (agent, text or "") for sid, agent, text in
            conn.execute("SELECT session_id, agent, summary FROM session_summaries")}
    sess_sha = {sid: vectors.sha256(text) for sid, (_, text) in sess.items()}
    width = model_.dim * 2  # float16
    keys: list[tuple[str, str]] = []
    owners: list[tuple[str | None, str]] = []
    blobs: list[bytes] = []
    for kind, key, digest, blob in conn.execute(
            "SELECT kind, key, sha256, vector FROM memory_vectors WHERE model = ?", (vectors.MODEL_ID,)):
        if len(blob) != width:
            continue
        if kind == vectors.MEMORY:
            doc = docs.get(key)
            if doc is None or doc[1] != digest:
                continue
            owners.append((doc[2], doc[3]))
        elif sess_sha.get(key) == digest:
            owners.append((sess[key][0], mem.AGENT_SCOPE))
        else:
            continue
        keys.append((kind, key))
        blobs.append(blob)
    have = set(keys)
    todo = [(vectors.MEMORY, path) for path in docs if (vectors.MEMORY, path) not in have]
    todo += [(vectors.SESSION, sid) for sid in sess if (vectors.SESSION, sid) not in have]
    cap = int(config["memory"]["embed_on_search_max"])
    notice = None
    if len(todo) > cap:
        notice = f"{len(todo)} texts are not embedded yet, {cap} were for this search: run `agent-hook memory reindex`"
        todo = todo[:cap]
    texts = []
    for kind, key in todo:
        if kind == vectors.MEMORY:
            row = conn.execute("SELECT name, content FROM memory_fts WHERE rowid = ?", (docs[key][0],)).fetchone()
            texts.append(vectors.memory_text(row[0], row[1] or "") if row else "")
            owners.append((docs[key][2], docs[key][3]))
        else:
            texts.append(sess[key][1])
            owners.append((sess[key][0], mem.AGENT_SCOPE))
        keys.append((kind, key))
    matrix = np.frombuffer(b"".join(blobs), dtype="<f2").reshape(len(blobs), model_.dim).astype(np.float32)
    if texts:
        matrix = np.vstack([matrix, model_.embed(texts)])
    # Replaced whole, never changed in place: a reader holds either the old corpus or the new one.
    corpus = {"fp": fp, "model": model_, "keys": keys, "owners": owners, "matrix": matrix, "notice": notice}
    _corpus_cache = corpus
    return corpus


def _by_meaning(conn: sqlite3.Connection, config: dict[str, Any], query: str, agent: str | None,
                model_: Any, n: int) -> tuple[list[tuple[str, str, float]], str | None]:
    """Up to ``n`` (kind, key, similarity), best first, and a notice when some texts had to be left out."""
    import numpy as np

    corpus = _corpus(conn, config, model_)
    keys, matrix = corpus["keys"], corpus["matrix"]
    if not keys:
        return [], corpus["notice"]
    sims = matrix @ model_.embed([query])[0]
    if agent:
        allowed = np.fromiter((a == agent or scope == mem.SHARED_SCOPE for a, scope in corpus["owners"]),
                              dtype=bool, count=len(keys))
        sims = np.where(allowed, sims, -np.inf)
    floor = float(config["memory"]["min_similarity"])
    n = min(n, len(keys))
    top = np.argpartition(-sims, n - 1)[:n] if n < len(keys) else np.arange(len(keys))
    top = top[np.argsort(-sims[top], kind="stable")]
    return [(keys[i][0], keys[i][1], float(sims[i])) for i in top if sims[i] >= floor], corpus["notice"]


def _hit_for(conn: sqlite3.Connection, kind: str, key: str) -> dict[str, Any] | None:
    """The display fields of a hit found by meaning alone (no FTS snippet: the text's start)."""
    if kind == vectors.MEMORY:
        row = conn.execute(
            "SELECT d.path, d.name, d.scope, d.agent, d.root, d.indexed_at, f.content FROM memory_docs d"
            " JOIN memory_fts f ON f.rowid = d.id WHERE d.path = ?", (key,)).fetchone()
        if row is None:
            return None
        cols = ("path", "name", "scope", "agent", "root", "indexed_at")
        hit = dict(zip(cols, row[:6], strict=True))
        hit.update(kind=vectors.MEMORY, key=key, snippet=_start(row[6]), bm25=None)
        return hit
    row = conn.execute(
        "SELECT ss.agent, ss.task_id, ss.source, ss.at, s.transcript_path, ss.summary FROM session_summaries ss"
        " LEFT JOIN sessions s ON s.session_id = ss.session_id WHERE ss.session_id = ?", (key,)).fetchone()
    if row is None:
        return None
    agent, task, source, at, path, text = row
    name = f"session {key[:8]}" + (f" ({agent})" if agent else "") + (f" task {task}" if task else "")
    return {"name": name, "path": path, "snippet": _start(text), "kind": vectors.SESSION, "session_id": key,
            "agent": agent, "task_id": task, "source": source, "at": at, "key": key, "bm25": None}


def _start(text: str | None, chars: int = 160) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= chars else flat[: chars - 1] + "…"


def search(conn: sqlite3.Connection, config: dict[str, Any], query: str, agent: str | None = None,
           limit: int = 10, raw: bool = False, by_meaning: bool = True) -> tuple[list[dict[str, Any]], str | None]:
    """Hits best first, each with ``fts_rank``, ``vector_rank`` (1-based, None when not ranked there),
    ``similarity`` and the fused ``score``; and a notice (None, or why meaning was left out).

    ``raw`` (FTS5 syntax) ranks by words alone. A bad FTS5 query raises sqlite3.OperationalError.
    """
    m = config["memory"]
    n = max(int(m["candidates"]), limit)
    k, w_fts = float(m["rrf_k"]), float(m["fts_weight"])
    words = _fts(conn, query, agent, n, raw)
    meaning: list[tuple[str, str, float]] = []
    notice = None
    if by_meaning and not raw and vectors.enabled(config) and query.strip():
        model_ = model(config)
        if model_ is None:
            notice = f"ranking by words only: {model_error()}"
        else:
            meaning, notice = _by_meaning(conn, config, query, agent, model_, n)
    hits: dict[tuple[str, str], dict[str, Any]] = {}
    for rank, h in enumerate(words, 1):
        h.update(fts_rank=rank, vector_rank=None, similarity=None, score=w_fts / (k + rank))
        hits[(h["kind"], h["key"])] = h
    # The relevance floor for hits found by meaning alone: close enough to the query (min_similarity,
    # applied in _by_meaning) and to the best hit of this search. Memory files and session summaries
    # alike: a summary is ranked, and left out, like any other text.
    relative = float(m.get("relative_similarity") or 0.0) * (meaning[0][2] if meaning else 0.0)
    for rank, (kind, key, sim) in enumerate(meaning, 1):
        hit = hits.get((kind, key))
        if hit is None:
            if sim < relative:
                continue
            hit = _hit_for(conn, kind, key)
            if hit is None:
                continue
            hit.update(fts_rank=None, score=0.0)
            hits[(kind, key)] = hit
        hit["vector_rank"], hit["similarity"] = rank, round(sim, 4)
        hit["score"] += 1.0 / (k + rank)
    ranked = sorted(hits.values(), key=lambda h: h["score"], reverse=True)[:limit]
    for h in ranked:
        h.pop("key", None)
    return ranked, notice


def task_text(conn: sqlite3.Connection, session_id: str | None, env: Any) -> str:
    """What the session is about at its start: its task's description, else its first prompt (a resume)."""
    from agent_hooks.features.sessions import task_id

    tid = task_id(env)
    if tid:
        row = conn.execute("SELECT description FROM tasks WHERE task_id = ?", (tid,)).fetchone()
        if row and row[0]:
            return str(row[0])
    if session_id:
        row = conn.execute("SELECT first_prompt FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        if row and row[0]:
            return str(row[0])
    return ""


def session_start_block(conn: sqlite3.Connection, session_id: str | None, env: Any, config: dict[str, Any],
                        agent: str | None) -> str:
    """SessionStart's context: the agent's memories most relevant to its task, within the size budget."""
    m = config["memory"]
    if not m.get("session_start_recall"):
        return ""
    task = task_text(conn, session_id, env)
    if not task.strip():
        return ""
    hits, _ = search(conn, config, task, agent, int(m["session_start_hits"]))
    budget = int(m["session_start_max_chars"])
    head = "Memories that may bear on this task (agent-hook memory search finds more):"
    lines = [head]
    used = len(head)
    for h in hits:
        where = h["path"] if h["kind"] == vectors.MEMORY else h["name"]
        line = f"- {where}: {' '.join(str(h['snippet']).split())}"
        if used + len(line) + 1 > budget:
            line = line[: max(0, budget - used - 2)] + "…"
            if len(line) > 20:
                lines.append(line)
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines) if len(lines) > 1 else ""
