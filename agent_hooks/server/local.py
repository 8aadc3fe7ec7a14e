"""What the executables and the CLI know about the server without importing it (stdlib only).

SessionStart uses this on the hook path: a connect probe, the server file, the
build id. Starlette and uvicorn are never imported here.
"""

from __future__ import annotations

import json
import os
import socket

from agent_hooks import __version__
from agent_hooks.paths import Paths

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HOST = "127.0.0.1"
# The route Claude Code's http hooks POST to (the event is read from the body).
HOOK_PATH = "/hooks"

# Variables the executables read from the session's environment. Over http they
# travel as headers (the hook entry's `headers` + `allowedEnvVars`); an empty
# header means unset. Nothing else from a request can reach a handler's env.
SESSION_ENV: tuple[str, ...] = (
    "AGENT_HOOKS_TASK_ID",
    "OPTIMALOS_SESSION_TMUX",
    "AGENT_HOOKS_TMUX_SESSION",
    "AGENT_HOOKS_AGENT",
    "AGENT_HOOKS_ROLE",
    "AGENT_HOOKS_NESTED",
    "CLAUDE_CONFIG_DIR",
)
HEADER_PREFIX = "x-agent-hooks-env-"


def header_for(var: str) -> str:
    """The header that carries ``var``: X-Agent-Hooks-Env-AGENT-HOOKS-TASK-ID."""
    return "X-Agent-Hooks-Env-" + var.replace("_", "-")


_HEADER_VARS = {HEADER_PREFIX + var.lower().replace("_", "-"): var for var in SESSION_ENV}


def request_env(base: dict[str, str], headers: Any) -> dict[str, str]:
    """The environment one request's handlers see: the server's own, without any
    session variable, plus the session variables the request carried (non-empty)."""
    env = {k: v for k, v in base.items() if k not in SESSION_ENV}
    for name, value in headers.items():
        var = _HEADER_VARS.get(name.lower())
        if var and value:
            env[var] = value
    return env


def server_file(paths: Paths) -> str:
    """pid, port, version and build of the running server (written by it, 0600)."""
    return os.path.join(paths.data_dir, "server.json")


def lock_file(paths: Paths) -> str:
    """Held (flock) by the one server of this store while it runs."""
    return os.path.join(paths.data_dir, "server.lock")


def log_file(paths: Paths) -> str:
    return os.path.join(paths.log_dir, "server.log")


def read_info(paths: Paths) -> dict[str, Any] | None:
    """The server file's content, or None when absent or unreadable."""
    try:
        with open(server_file(paths), encoding="utf-8") as f:
            info = json.load(f)
        return info if isinstance(info, dict) else None
    except (OSError, ValueError):
        return None


def answers(port: int, timeout: float = 0.2) -> bool:
    """True when something accepts a connection on the loopback port."""
    try:
        socket.create_connection((HOST, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def build_id() -> str:
    """The installed package's identity: version plus a digest of its source files'
    sizes and mtimes, so an upgrade (or an edited checkout) shows as a new build."""
    import zlib

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts: list[str] = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    stack.append(e.path)
            elif e.name.endswith(".py"):
                st = e.stat()
                parts.append(f"{e.path[len(root):]}:{st.st_size}:{st.st_mtime_ns}")
    return f"{__version__}+{zlib.crc32(chr(10).join(parts).encode()):08x}"
