"""Install the real Claude Code client from npm into a cache directory, once.

The version is pinned (:data:`DEFAULT_VERSION`, known to work);
``AGENT_HOOKS_CLAUDE_VERSION`` overrides it, and ``latest`` there means the
newest published version (``npm view``). Installs go to
``$AGENT_HOOKS_CLAUDE_CACHE/claude-code-<version>`` (default: ``<repo>/.cache``),
under a file lock so parallel test processes install it once. ``.ci/run`` runs
this file before pytest; the e2e fixture calls :func:`ensure_client` again,
which then only checks ``claude --version``.

Run as a script: ``python tests/e2e/claude_client.py`` installs and prints the path;
``--resolve`` only prints the version the environment selects.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from agent_hooks.claude_code import PINNED

PACKAGE = "@anthropic-ai/claude-code"
DEFAULT_VERSION = PINNED
# Versions seen to send http hooks with the session's variables as headers (tests/e2e/test_server_e2e.py
# checks the pinned one); the http scenarios run on another version only when the selected one is not here.
HTTP_HOOK_VERSIONS = frozenset({"2.1.197", "2.1.330", "2.1.331", "2.1.332"})
REPO = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 600


class InstallError(Exception):
    """npm ran but the client is not usable."""


def version() -> str:
    """The version this run drives: ``AGENT_HOOKS_CLAUDE_VERSION`` (``latest`` resolved), else the pin."""
    return resolve(os.environ.get("AGENT_HOOKS_CLAUDE_VERSION") or DEFAULT_VERSION)


@functools.cache
def resolve(ver: str) -> str:
    """``latest`` -> the newest published version (asks npm once per process); others as given."""
    if ver != "latest":
        return ver
    npm_bin = npm()
    if npm_bin is None:
        raise InstallError("npm not found: cannot resolve 'latest'")
    proc = subprocess.run([npm_bin, "view", PACKAGE, "version"], capture_output=True, text=True, timeout=120)
    newest = proc.stdout.strip().splitlines()[-1].strip() if proc.stdout.strip() else ""
    if proc.returncode != 0 or not newest:
        raise InstallError(f"npm view {PACKAGE} version exited {proc.returncode}: {proc.stderr.strip()}")
    return newest


def cache_root() -> Path:
    return Path(os.environ.get("AGENT_HOOKS_CLAUDE_CACHE") or REPO / ".cache").resolve()


def npm() -> str | None:
    """The npm executable, or None: the only reason the e2e tier may be skipped."""
    return shutil.which("npm")


def _reported_version(binary: Path) -> str | None:
    if not binary.exists():
        return None
    try:
        proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "DISABLE_TELEMETRY": "1",
                                   "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip().split(" ")[0] or None


def ensure_client(ver: str | None = None, root: Path | None = None) -> Path:
    """The path of a working ``claude`` binary of ``ver``, installing it if needed."""
    from filelock import FileLock

    ver = ver or version()
    root = root or cache_root()
    prefix = root / f"claude-code-{ver}"
    binary = prefix / "node_modules" / ".bin" / "claude"
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"claude-code-{ver}.lock"), timeout=INSTALL_TIMEOUT_S):
        if _reported_version(binary) == ver:
            return binary
        npm_bin = npm()
        if npm_bin is None:
            raise InstallError("npm not found")
        prefix.mkdir(parents=True, exist_ok=True)
        cmd = [npm_bin, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error",
               f"{PACKAGE}@{ver}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        if proc.returncode != 0:
            raise InstallError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        got = _reported_version(binary)
        if got != ver:
            raise InstallError(f"{binary} --version gave {got!r}, expected {ver!r}\n{proc.stderr}")
        return binary


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if npm() is None:
        print("npm not found: the e2e tier will be skipped", file=sys.stderr)
        return 0
    try:
        if "--resolve" in args:
            print(version())
            return 0
        path = ensure_client()
    except InstallError as exc:
        print(f"installing Claude Code failed: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
