"""The Claude Code versions this package is tested against, and the one installed.

The one place that names tested versions: the e2e tier pins :data:`PINNED`,
CI also runs it against the newest published client, ``tests/fixtures`` holds a
capture of every version in :data:`TESTED`, and ``doctor`` warns when the
``claude`` on PATH is newer than :data:`NEWEST_TESTED`. Raise it after the
e2e tier passed on a newer client and its payloads were captured
(``python tests/e2e/capture_fixtures.py <version>``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

PINNED = "2.1.197"
NEWEST_TESTED = "2.1.332"
TESTED = (PINNED, "2.1.330", "2.1.331", NEWEST_TESTED)

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse(text: str) -> tuple[int, int, int] | None:
    """``"2.1.330 (Claude Code)"`` -> ``(2, 1, 330)``; None when there is no version in it."""
    m = _VERSION.search(text or "")
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def newer_than_tested(version: str) -> bool:
    """Whether ``version`` is past :data:`NEWEST_TESTED` (unparsable: no)."""
    got, newest = parse(version), parse(NEWEST_TESTED)
    return bool(got and newest and got > newest)


def installed(path_env: str | None = None, timeout_s: float = 15) -> tuple[str | None, str | None]:
    """(path, version) of the ``claude`` on PATH; (None, None) if absent, (path, None) if it gave no version."""
    exe = shutil.which("claude", path=path_env if path_env is not None else os.environ.get("PATH"))
    if exe is None:
        return None, None
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL,
                              env={**os.environ, "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
                                   "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    except (OSError, subprocess.TimeoutExpired):
        return exe, None
    found = parse(proc.stdout) if proc.returncode == 0 else None
    return exe, ".".join(map(str, found)) if found else None
