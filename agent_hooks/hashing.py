"""SHA-256 of canonical JSON: keys sorted at every depth, arrays kept in order.

Two tool calls are identical exactly when their tool names and these hashes
match. (agent-swarm's 32-bit hash collided; an early port dropped nested keys.)
"""

from __future__ import annotations

import json

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    # _sha256 has no stub (a private CPython module): the checker reads hashlib's sha256, the same API.
    from hashlib import sha256
    from typing import Any
else:
    try:  # the builtin module skips hashlib's OpenSSL load (~3 ms on every tool call)
        from _sha256 import sha256
    except ImportError:  # pragma: no cover - builds without it
        from hashlib import sha256


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def digest(value: Any) -> str:
    return sha256(canonical_json(value).encode("utf-8", "surrogatepass")).hexdigest()
