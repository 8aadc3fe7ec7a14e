"""server.log for a detached server: rotated, with stderr and fd 2 kept on the current file.

Apart from server/process.py so that the CLI's `server status|start|stop`, which import
process.py, do not import logging.handlers (~5 ms of CPU) for what only `run` does.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import threading
from typing import Any

from agent_hooks.paths import Paths, ensure_dir
from agent_hooks.server import local


class _RotatingLog(logging.handlers.RotatingFileHandler):
    """The rotated server.log, with fd 2 kept on the current file (a crash's traceback lands
    there, not in server.log.1 or, after the next rotation, in an unlinked file)."""

    def _open(self) -> Any:
        stream = super()._open()
        try:
            os.dup2(stream.fileno(), 2)
        except OSError:
            pass
        return stream


class _StderrToLog:
    """sys.stderr of a logging server: each line (a bad input's, a traceback's) is a log record,
    so it counts towards the rotation instead of growing a file nobody rotates."""

    def __init__(self) -> None:
        self._logger = logging.getLogger("agent_hooks.server.stderr")
        self._busy = threading.local()

    def write(self, text: str) -> int:
        if getattr(self._busy, "on", False):  # logging reporting its own failure: straight to fd 2
            return sys.__stderr__.write(text) if sys.__stderr__ else len(text)
        self._busy.on = True
        try:
            for line in text.splitlines():
                if line.strip():
                    self._logger.warning(line)
        finally:
            self._busy.on = False
        return len(text)

    def flush(self) -> None:
        pass


def log_to_file(paths: Paths, config: dict[str, Any]) -> None:
    """Send the root logger and stderr to the rotated server.log."""
    ensure_dir(paths.log_dir)
    handler = _RotatingLog(
        local.log_file(paths), maxBytes=int(config["serve"]["log_max_bytes"]), backupCount=1, encoding="utf-8")
    os.chmod(local.log_file(paths), 0o600)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    sys.stderr = _StderrToLog()
