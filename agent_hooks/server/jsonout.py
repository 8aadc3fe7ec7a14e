"""The JSON the server sends: strict (no NaN, no Infinity), and never a 500 because of a value.

JSON has no infinity. ``json.dumps`` writes ``Infinity`` by default, which a browser's
``JSON.parse`` refuses (the board's WebSocket then fails on every message), and Starlette's
``JSONResponse`` refuses it with a ValueError (a 500). The routes check every number a caller
sends (agent_hooks.center.numbers), but a store written by an older version may still hold one.
So every answer, REST or WebSocket, is written by :func:`dumps`: strict, and should a non-finite
number still be there, it goes out as null and the server's log says so (once per process).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

from starlette.responses import JSONResponse as _StarletteJSON

log = logging.getLogger("agent_hooks.server")
_said = False


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, Infinity) replaced by None, dicts and lists walked."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(content: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """``content`` as strict, compact UTF-8 JSON (as Starlette's JSONResponse renders it); a non-finite
    number becomes null, said once in the log."""
    try:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"),
                          default=default)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise  # a circular structure: a bug, not a stored value
        global _said
        if not _said:
            _said = True
            log.warning("an answer held a non-finite number (a value stored by an older version?): sent as null")
        text = json.dumps(finite(content), ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"),
                          default=default)
    return text.encode("utf-8")


class JSONResponse(_StarletteJSON):
    """Starlette's JSONResponse, rendered by :func:`dumps`: the routes' one way to answer in JSON."""

    def render(self, content: Any) -> bytes:
        return dumps(content)
