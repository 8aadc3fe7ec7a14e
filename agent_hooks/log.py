"""Writing the hooks' trace: one JSON line per failure in the error log (or the notice log).

The lowest room of the hook path: the transports (runner.py, dispatch.py, the
server), the spool, detached workers and features all log through
:func:`log_error`, and this module imports nothing of ours but paths.py, so
any of them can import it without a circle. Reading the log back (status,
doctor, ``agent-hook errors``) is agent_hooks.errorlog.

Standard library only: the executables import this on every tool call.
"""

from __future__ import annotations

import json
import os
import time

from agent_hooks.paths import Paths, ensure_dir

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_LOG_BYTES = 1024 * 1024
MAX_LINE_CHARS = 2000


def log_error(paths: Paths, event: str, kind: str, message: str, session_id: str | None = None,
              trace: str | None = None, config: dict[str, Any] | None = None, path: str | None = None) -> None:
    """Append one JSON line to the error log (or ``path``), rotated before it would pass ``errors.max_log_bytes``.

    The message and traceback are clipped first, so one line cannot outgrow the
    rotation (a 3 MB line once sat past the 1 MiB mark). Never raises.
    """
    try:
        limits = (config or {}).get("errors") or {}
        max_bytes = int(limits.get("max_log_bytes", MAX_LOG_BYTES))
        max_chars = int(limits.get("max_line_chars", MAX_LINE_CHARS))
        ensure_dir(paths.log_dir)
        path = path or paths.error_log
        entry = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "ts": time.time(),
            "event": str(event)[:100],
            "kind": kind,
            "session_id": None if session_id is None else str(session_id)[:256],
            "message": _clip(message, max_chars),
            "pid": os.getpid(),
        }
        if trace:
            entry["traceback"] = _clip(trace, 4 * max_chars, keep_end=True)
        line = json.dumps(entry) + "\n"  # ASCII: a lone surrogate cannot fail the write
        try:
            if os.path.getsize(path) + len(line) > max_bytes:
                os.replace(path, path + ".1")
        except OSError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(line)
    except Exception:  # noqa: BLE001 - the log is the last resort; it must not raise
        pass


def _clip(text: object, limit: int, keep_end: bool = False) -> str:
    """At most ``limit`` chars; a traceback keeps its end, where the error is."""
    text = str(text)
    if len(text) <= limit:
        return text
    note = f"[… {len(text) - limit} chars clipped]"
    return note + text[-limit:] if keep_end else text[:limit] + note
