"""Shared fixtures: an isolated AGENT_HOOKS_HOME and HOME for every test, and
helpers that run the installed console scripts as subprocesses."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "fixtures" / "claude-code-2.1.197"
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
}


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every path at tmp_path; the real home directory is never touched."""
    for var in list(os.environ):
        if var.startswith("AGENT_HOOKS") or var in ("OPTIMALOS_SESSION_TMUX", "XDG_DATA_HOME",
                                                     "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
            monkeypatch.delenv(var, raising=False)
    home = tmp_path / "agent-hooks-home"
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    monkeypatch.setenv("AGENT_HOOKS_HOME", str(home))
    monkeypatch.setenv("HOME", str(user_home))
    return home


@pytest.fixture
def hooks_home(isolated_env: Path) -> Path:
    return isolated_env


def fixture_payload(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


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


def agent_hook(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
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
