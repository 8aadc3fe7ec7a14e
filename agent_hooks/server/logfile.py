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


# Libraries whose records below WARNING stay out of server.log. Apprise says "Notifying 1 service(s)." and
# "Sent ... notification." at INFO on every send: a busy fleet's log would hold a line per notification.
# (notify/send.py captures those lines at INFO with Apprise's LogCapture, which lowers the "apprise"
# logger's level while it sends, so setting that level here would not hold: the handler filters instead.)
# A failed send still logs its WARNING here, and its answer is kept in the notification's delivery state.
QUIET_BELOW_WARNING = ("apprise",)


def _not_chatter(record: logging.LogRecord) -> bool:
    if record.levelno >= logging.WARNING:
        return True
    name = record.name
    return not any(name == quiet or name.startswith(f"{quiet}.") for quiet in QUIET_BELOW_WARNING)


def log_to_file(paths: Paths, config: dict[str, Any]) -> None:
    """Send the root logger and stderr to the rotated server.log."""
    ensure_dir(paths.log_dir)
    handler = _RotatingLog(
        local.log_file(paths), maxBytes=int(config["serve"]["log_max_bytes"]), backupCount=1, encoding="utf-8")
    os.chmod(local.log_file(paths), 0o600)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_not_chatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    sys.stderr = _StderrToLog()
