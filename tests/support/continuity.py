"""Shared pieces of the continuity tests: an isolated environment and the installed console scripts."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from support.repo import FIXTURES
from support.scripts import script


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """An environment with no agent-hooks settings of the host, state under ``tmp``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS") and k != "CLAUDE_CONFIG_DIR"}
    env["AGENT_HOOKS_HOME"] = str(tmp / "state")
    env["HOME"] = str(tmp / "home")
    (tmp / "home").mkdir(exist_ok=True)
    env.update(extra)
    return env


def place_transcript(tmp: Path, session_id: str, fixture: str = "transcript-sample.jsonl") -> Path:
    """Copy a real transcript where the client would put it (under $HOME/.claude/projects)."""
    dest = tmp / "home" / ".claude" / "projects" / "-home-dev-acme" / f"{session_id}.jsonl"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / fixture, dest)
    return dest


def hook(event_script: str, payload: dict[str, Any], env: dict[str, str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([script(event_script)], input=json.dumps(payload).encode(), env=env,
                          capture_output=True, timeout=timeout)


def cli(args: list[str], env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([script("agent-hook"), *args], env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def store(env: dict[str, str]) -> sqlite3.Connection:
    return sqlite3.connect(os.path.join(env["AGENT_HOOKS_HOME"], "store.db"), isolation_level=None)


def add_task(env: dict[str, str], task_id: str, description: str, progress: str | None = None) -> None:
    conn = store(env)
    now = time.time()
    conn.execute(
        "INSERT INTO tasks (task_id, description, progress, state, created_at, updated_at) VALUES (?, ?, ?, 'open', ?, ?)",
        (task_id, description, progress, now, now),
    )
    conn.close()
