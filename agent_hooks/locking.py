"""An exclusive lock on a file, held across one edit: fcntl.flock, standard library only.

What filelock did for us (flock on a 0600 lock file, a bounded wait), without its import:
about 35 ms of CPU for every `settings` and `hooks` command and every doctor run.
"""

from __future__ import annotations

import os


class FlockFile:
    """``with FlockFile(path):`` holds an exclusive flock on ``path`` (created 0600, whatever the
    umask), waiting up to ``timeout_s``; past that it raises ``error`` with a message that names
    the lock."""

    def __init__(self, path: str, timeout_s: float = 10.0, error: type[Exception] = TimeoutError) -> None:
        self.lock_path = path
        self.timeout_s = timeout_s
        self.error = error
        self.fd = -1

    def __enter__(self) -> FlockFile:
        import fcntl
        import time

        self.fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.fchmod(self.fd, 0o600)
        except OSError:  # not ours to change (another user's file we may still lock)
            pass
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(self.fd)
                    raise self.error(f"another agent-hook command has held {self.lock_path} for "
                                     f"{self.timeout_s:.0f} s; wait for it to finish, then re-run") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # releases the flock
