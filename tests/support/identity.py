"""Helpers for the identity and memory tests: the installed console scripts, run as Claude Code runs them."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from support.scripts import script


class Rig:
    """One isolated installation: AGENT_HOOKS_HOME and HOME in tmp, a workspace, an agent name."""

    def __init__(self, tmp: Path, agent: str = "ada") -> None:
        self.tmp = tmp
        self.home = tmp / "hooks-home"
        self.ws = tmp / "ws"
        self.ws.mkdir()
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp / "user-home"),
            "AGENT_HOOKS_HOME": str(self.home),
            "AGENT_HOOKS_AGENT": agent,
        }
        self.agent = agent

    def hook(self, event: str, session: str = "s1", **fields: Any) -> dict[str, Any] | None:
        """Run the event's console script with a payload shaped like 2.1.197's; its parsed stdout."""
        names = {"SessionStart": "session-start", "PostToolUse": "post-tool-use", "Stop": "stop",
                 "SessionEnd": "session-end", "PreToolUse": "pre-tool-use"}
        payload: dict[str, Any] = {
            "session_id": session,
            "transcript_path": str(self.tmp / f"{session}.jsonl"),
            "cwd": str(self.ws),
            "hook_event_name": event,
        }
        if event == "SessionStart":
            payload["source"] = "startup"
        if event == "Stop":
            payload.update(stop_hook_active=False, last_assistant_message="done")
        payload.update(fields)
        proc = subprocess.run([script(f"agent-hook-{names[event]}")], input=json.dumps(payload).encode(),
                              env=self.env, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()
        assert b"internal error" not in proc.stderr, proc.stderr.decode()
        out = proc.stdout.decode().strip()
        return json.loads(out) if out else None

    def tool(self, tool: str, path: Path | str, session: str = "s1", **tool_input: Any) -> dict[str, Any] | None:
        """PostToolUse for a file tool whose effect the test already put on disk."""
        n = getattr(self, "_n", 0) + 1
        self._n = n
        return self.hook("PostToolUse", session=session, tool_name=tool,
                         tool_input={"file_path": str(path), **tool_input},
                         tool_response={"filePath": str(path)}, tool_use_id=f"toolu_{n:04d}", duration_ms=3)

    def cli(self, *args: str, input: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([script("agent-hook"), *args], env=self.env, capture_output=True, text=True,
                              input=input, timeout=60)
        if ok:
            assert proc.returncode == 0, proc.stderr
        return proc

    def set(self, name: str, content: str, agent: str | None = None) -> None:
        src = self.tmp / f"set-{name}"
        src.write_text(content)
        self.cli("identity", "set", agent or self.agent, name, "--file", str(src))

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.home / "store.db")

    def versions(self, name: str, agent: str | None = None) -> list[tuple[int, str, str]]:
        with self.db() as conn:
            return conn.execute(
                "SELECT version, source, content FROM identity_versions WHERE agent = ? AND name = ? ORDER BY version",
                (agent or self.agent, name),
            ).fetchall()

    def errors(self) -> list[tuple[str, str]]:
        with self.db() as conn:
            return conn.execute("SELECT kind, message FROM errors").fetchall()


def context(out: dict[str, Any] | None) -> str:
    if not out:
        return ""
    return out.get("hookSpecificOutput", {}).get("additionalContext", "")


def profile(word: str, n: int = 60) -> str:
    """A realistic identity file: long enough to pass the 500-character minimum."""
    return f"# {word}\n\n" + "\n".join(f"- {word} principle {i}: keep promises and write things down." for i in range(n)) + "\n"
