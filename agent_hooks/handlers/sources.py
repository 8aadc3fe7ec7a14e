"""Where handlers come from: the kinds of source, their precedence, their directories, and stamps.

bundled (in the package) < extra dirs (``handlers.extra_dirs``) < managed
(``<config dir>/hooks``) < workspace (``<workspace>/.agent-hooks/hooks``, only
for a workspace the operator trusts), lowest precedence first. Every hook call
with handlers reads this (registry.py), and so does a rebuild (discovery.py),
so it is its own small module that imports nothing of ours.

Standard library only.
"""

from __future__ import annotations

import os
import sys

# Annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

BUNDLED, EXTRA, MANAGED, WORKSPACE = "bundled", "extra", "managed", "workspace"
PRECEDENCE = (BUNDLED, EXTRA, MANAGED, WORKSPACE)  # lowest first
WORKSPACE_SUBDIR = os.path.join(".agent-hooks", "hooks")
BUNDLED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bundled")


class Source:
    """One place handlers are found: its kind and its directory (as configured)."""

    __slots__ = ("kind", "path", "trusted")

    def __init__(self, kind: str, path: str, trusted: bool = True) -> None:
        self.kind = kind
        self.path = path
        self.trusted = trusted  # False: an untrusted workspace (listed, never run, shadows nothing)

    def as_list(self) -> list[Any]:
        return [self.kind, self.path, self.trusted]


def managed_dir(config_dir: str) -> str:
    """``<config dir>/hooks``: where ``hooks install`` and ``hooks new`` put handlers."""
    return os.path.join(config_dir, "hooks")


def workspace_dir(workspace: str) -> str:
    return os.path.join(workspace, WORKSPACE_SUBDIR)


def is_trusted(workspace: str, trusted: list[Any]) -> bool:
    """True when the resolved ``workspace`` is one the operator listed in ``handlers.trusted_workspaces``."""
    real = os.path.realpath(workspace)
    return any(isinstance(t, str) and t and os.path.realpath(os.path.expanduser(t)) == real for t in trusted)


def sources(hcfg: dict[str, Any], config_dir: str, workspace: str | None, include_bundled: bool = True,
            include_untrusted: bool = False) -> list[Source]:
    """The sources to scan, lowest precedence first (see module docstring)."""
    out = [Source(BUNDLED, BUNDLED_DIR)] if include_bundled else []
    for d in hcfg.get("extra_dirs") or []:
        if isinstance(d, str) and d:
            out.append(Source(EXTRA, os.path.abspath(os.path.expanduser(d))))
    out.append(Source(MANAGED, managed_dir(config_dir)))
    if workspace:
        trusted = is_trusted(workspace, hcfg.get("trusted_workspaces") or [])
        if trusted or include_untrusted:
            out.append(Source(WORKSPACE, workspace_dir(workspace), trusted))
    return out


def stamp(path: str) -> list[int] | None:
    """What must stay the same for a compiled registry to stay valid: inode, mtime, size, and
    mode and owner (a chmod o+w or a chown refuses the handler at once; None: absent)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_mtime_ns, st.st_size, st.st_mode, st.st_uid]


def platform() -> str:
    """The OS name HOOK.md's ``os`` is compared with: linux, darwin, win32."""
    return sys.platform


def workspace_of(env: Mapping[str, str], cwd: str | None) -> str | None:
    """The session's workspace: $CLAUDE_PROJECT_DIR (the project root), else the payload's cwd."""
    ws = env.get("CLAUDE_PROJECT_DIR") or cwd or None
    return ws if ws and os.path.isabs(ws) else None


def current_sources(config: Mapping[str, Any], config_dir: str, workspace: str | None,
                    hot: bool = False) -> list[Source]:
    """The sources for this call. ``hot`` (the hook path) leaves out what cannot run: bundled
    handlers when none is enabled in the config (all are off by default), untrusted workspaces."""
    hcfg = config["handlers"]
    include_bundled = True
    if hot:
        entries = hcfg.get("entries") or {}
        include_bundled = isinstance(entries, dict) and any(
            isinstance(e, dict) and e.get("enabled") is True for e in entries.values())
        if workspace and not hcfg.get("trusted_workspaces"):
            workspace = None  # skip even the realpath: nothing in a workspace can run
    return sources(hcfg, config_dir, workspace, include_bundled=include_bundled, include_untrusted=not hot)
