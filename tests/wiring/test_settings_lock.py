"""The settings file's lock: one writer at a time, a clear error past its wait, 0600."""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

import pytest

from agent_hooks.wiring import settings_file
from agent_hooks.wiring.merge import SettingsError


def test_a_held_lock_is_waited_for_then_refused_with_a_reason(hooks_home: Path) -> None:
    settings = str(hooks_home / "settings.json")
    lock = settings_file._lock(settings)
    with lock:
        assert stat.S_IMODE(os.stat(lock.lock_path).st_mode) == 0o600
        fd = os.open(lock.lock_path, os.O_RDWR)
        try:  # another process's view: the lock is held
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        with pytest.raises(SettingsError, match="held .* for 0 s"):
            with settings_file._lock(settings, timeout_s=0.2):
                pass
    with settings_file._lock(settings):  # released: taken again at once
        pass
