"""Detached embedder: ``python -m agent_hooks.features.embed_worker store``.

Started by Stop (features/vectors.py) when a memory file or a session summary
has no current vector and no resident server holds the model. It loads the
model once, embeds what is stale in batches (each written in its own short
transaction, so hooks never wait long for the store's lock), prunes vectors
whose file or summary is gone, and goes round until nothing is stale. One
worker per host at a time (a lock file); a second leaves the work to the first.
"""

from __future__ import annotations

import time
from typing import Any

from agent_hooks.features import detach, vectors
from agent_hooks.paths import Paths
from agent_hooks.store import Store

EVENT = "EmbedWorker"
# Saved after each batch: at ~15 texts a second (two loaded cores) a batch of 64 is a few seconds of work.
BATCH = 64
# Bounded, so a worker never runs forever while files keep changing; the next Stop starts another.
MAX_BATCHES = 400


def refresh(store: Store, model: Any, max_batches: int = MAX_BATCHES) -> dict[str, int]:
    """Embed every stale memory file and summary with ``model``; prune the vectors of gone ones."""
    counts = {"embedded": 0, "pruned": 0}
    for _ in range(max_batches):
        todo = vectors.stale(store.conn, BATCH)
        if not todo:
            break
        matrix = model.embed([text for _, _, _, text in todo])
        # float16: half the bytes a search reads, and cosines unchanged to the third decimal.
        items = [(kind, key, digest, matrix[i].astype("<f2").tobytes())
                 for i, (kind, key, digest, _) in enumerate(todo)]
        with store.write() as conn:
            vectors.save(conn, items, time.time())
        counts["embedded"] += len(items)
    with store.write() as conn:
        counts["pruned"] = vectors.prune(conn)
    return counts


def _work(_key: str, env: Any, paths: Paths, config: dict[str, Any]) -> int:
    from agent_hooks.features import embedder
    from agent_hooks.log import log_error

    if not vectors.enabled(config):
        return 0
    try:
        model = embedder.load(config)
    except embedder.Unavailable as exc:
        # Search falls back to words alone; doctor shows why from the error log.
        log_error(paths, EVENT, "model", f"memory search by meaning is unavailable: {exc}")
        return 0
    store = Store(paths.store, int(config["runtime"]["busy_timeout_ms"]))
    try:
        refresh(store, model)
    finally:
        store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    return detach.worker_main(argv, "agent_hooks.features.embed_worker", "embed", EVENT, _work)


if __name__ == "__main__":
    raise SystemExit(main())
