"""What a handler works with: :class:`Context` (the payload, configuration, store, environment).

Its own module, below both transports (runner.py, server/hooks.py through
dispatch.py) and the spool's replayer, which all build one: each imports it
from here, and it imports nothing of theirs, so no circle runs through it.

Standard library only: the executables import this on every tool call.
"""

from __future__ import annotations

import time

from agent_hooks.store import Store

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_hooks.paths import Paths
    from agent_hooks.payload import Payload
    from agent_hooks.spool import CommitGate


class Context:
    """What a handler works with: the payload, configuration, store and environment.

    ``store`` may be handed in (the server keeps one connection per worker
    thread); otherwise the first use opens one.
    """

    __slots__ = ("payload", "config", "paths", "env", "started", "_store", "gate", "replayed", "replay_answer")

    def __init__(self, payload: Payload, config: dict[str, Any], paths: Paths, env: Any,
                 store: Store | None = None, gate: CommitGate | None = None) -> None:
        self.payload = payload
        self.config = config
        self.paths = paths
        self.env = env
        self.started = time.time()
        self._store = store
        self.gate = gate  # the write commits through it (see agent_hooks.spool)
        self.replayed = False  # True when the spool replays a call answered fail-open earlier
        self.replay_answer: str | None = None  # "deny": it was answered with strict guards' deny instead
        if store is not None:
            store.gate = gate

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.paths.store, self.config["runtime"]["busy_timeout_ms"])
            self._store.gate = self.gate
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
