"""The resident server's embedding thread: memory files and session summaries embedded off the hook path.

While the server runs, the hooks it answers wake this thread (features/vectors.py
``kick``) after a memory write or a Stop, instead of starting a detached worker.
The model is loaded on the first wake-up (about 0.3 s, on this thread, never on
a request) and kept: ``memory search`` in this process and SessionStart's recall
use the same one. A model that cannot be loaded is reported once in the error
log; search then ranks by words alone.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from starlette.routing import BaseRoute

from agent_hooks.features import vectors
from agent_hooks.log import log_error
from agent_hooks.server.app import ServerState
from agent_hooks.store import Store

EVENT = "server"
DEBOUNCE_S = 0.25


class Embedder:
    """One daemon thread; :meth:`kick` wakes it, it embeds until nothing is stale, then waits again."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.wake = threading.Event()
        self.stopping = False
        self.model: Any = None
        self.unavailable: str | None = None
        self.runs = 0
        self.thread = threading.Thread(target=self._run, name="agent-hooks-embed", daemon=True)

    def kick(self) -> None:
        self.wake.set()

    def _load(self) -> Any:
        from agent_hooks.features import embedder, recall

        if self.model is None and self.unavailable is None:
            try:
                self.model = embedder.load(self.state.config)
                recall.use_model(self.model)
            except embedder.Unavailable as exc:
                self.unavailable = str(exc)
                log_error(self.state.paths, EVENT, "model", f"memory search by meaning is unavailable: {exc}")
        return self.model

    def _run(self) -> None:
        while True:
            self.wake.wait()
            if self.stopping:
                return
            # A hook kicks from inside its write transaction: give it time to commit, and let a burst
            # of writes (an agent saving several notes) become one pass. A commit later still (a busy
            # store) is picked up at the session's next Stop, which kicks again.
            time.sleep(DEBOUNCE_S)
            self.wake.clear()
            try:
                if not vectors.enabled(self.state.config) or self._load() is None:
                    continue
                from agent_hooks.features.embed_worker import refresh

                store = Store(self.state.paths.store, int(self.state.config["runtime"]["busy_timeout_ms"]))
                try:
                    refresh(store, self.model)
                finally:
                    store.close()
                self.runs += 1
            except Exception as exc:  # noqa: BLE001 - the thread must live on; the next kick tries again
                import traceback

                log_error(self.state.paths, EVENT, "error", f"embeddings: {type(exc).__name__}: {exc}",
                          trace=traceback.format_exc())


def routes(state: ServerState) -> list[BaseRoute]:
    return []


async def startup(state: ServerState) -> None:
    emb = Embedder(state)
    state.embedder = emb
    emb.thread.start()
    vectors.set_runner(emb.kick)


async def shutdown(state: ServerState) -> None:
    emb = state.embedder
    if emb is None:
        return
    vectors.set_runner(None)
    emb.stopping = True
    emb.wake.set()
