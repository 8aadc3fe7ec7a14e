"""The installed console scripts (the hook executables and `agent-hook`) run as subprocesses, as Claude Code
and a user run them, and what they leave in a home (its store, its error log)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

# The venv's bin directory: the console scripts installed beside this Python.
BIN = Path(sys.executable).parent

EXECUTABLES = {
    "SessionStart": "agent-hook-session-start",
    "PreToolUse": "agent-hook-pre-tool-use",
    "PostToolUse": "agent-hook-post-tool-use",
    "PostToolUseFailure": "agent-hook-post-tool-use-failure",
    "PreCompact": "agent-hook-pre-compact",
    "UserPromptSubmit": "agent-hook-user-prompt-submit",
    "Stop": "agent-hook-stop",
    "SessionEnd": "agent-hook-session-end",
    "Notification": "agent-hook-notification",
    "SubagentStart": "agent-hook-subagent-start",
    "SubagentStop": "agent-hook-subagent-stop",
    "StopFailure": "agent-hook-stop-failure",
    "PermissionRequest": "agent-hook-permission-request",
    "PermissionDenied": "agent-hook-permission-denied",
    "PostCompact": "agent-hook-post-compact",
    "Elicitation": "agent-hook-elicitation",
    "ElicitationResult": "agent-hook-elicitation-result",
}


def script(name: str) -> str:
    """The path of the installed console script ``name``; fails the test when it is not installed."""
    path = BIN / name
    assert path.exists(), f"console script {name} is not installed in {BIN}"
    return str(path)


def run_exe(name: str, stdin: bytes | str | dict[str, Any], env: dict[str, str] | None = None,
            timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    """Run an installed console script with ``stdin`` and the test's environment."""
    if isinstance(stdin, dict):
        stdin = json.dumps(stdin)
    if isinstance(stdin, str):
        stdin = stdin.encode()
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([str(BIN / name)], input=stdin, capture_output=True, env=full_env, timeout=timeout)


def run_hook(payload: dict[str, Any], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run the executable for the payload's own event."""
    return run_exe(EXECUTABLES[payload["hook_event_name"]], payload, env)


def agent_hook(*args: str, env: dict[str, str] | None = None, check: bool = True,
               inherit: bool = True) -> subprocess.CompletedProcess[str]:
    """`agent-hook ARGS` with ``env`` over the test's environment, or with ``env`` alone (``inherit=False``);
    ``check``: a non-zero exit fails the test."""
    full_env = dict(os.environ) if inherit else {}
    full_env.update(env or {})
    proc = subprocess.run([str(BIN / "agent-hook"), *args], capture_output=True, text=True, env=full_env, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"agent-hook {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def store_rows(home: Path, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    conn = sqlite3.connect(home / "store.db")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def error_log(home: Path) -> list[dict[str, Any]]:
    path = home / "logs" / "errors.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def fresh_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The test's environment without anything of ours (AGENT_HOOKS_*, XDG_*), HOME an empty ``tmp``/home:
    a user's shell before agent-hooks is set up, ``extra`` on top. Give it whole to a process (``sh``,
    ``agent_hook(..., inherit=False)``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HOOKS", "XDG_"))}
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), **extra)
    return env


def sh(script: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``/bin/sh -c script`` with exactly ``env``: a command line as a user types it (a umask first, a pipe)."""
    return subprocess.run(["/bin/sh", "-c", script], input=stdin, capture_output=True, text=True, env=env,
                          timeout=120)
