"""The e2e harness: one test's world around the real client, wired by ``agent-hook settings install``.

See conftest.py for the fixtures that build it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from model_server import ModelServer

from support.ports import free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# The venv's bin dir (not resolved: the venv's python is a symlink out of it).
BIN_DIR = Path(os.path.abspath(os.path.dirname(sys.executable)))

# Our executable for every event Claude Code hooks we handle.
HOOK_EXECUTABLES = {
    "SessionStart": "agent-hook-session-start",
    "UserPromptSubmit": "agent-hook-user-prompt-submit",
    "PreToolUse": "agent-hook-pre-tool-use",
    "PostToolUse": "agent-hook-post-tool-use",
    "PostToolUseFailure": "agent-hook-post-tool-use-failure",
    "PreCompact": "agent-hook-pre-compact",
    "Stop": "agent-hook-stop",
    "SessionEnd": "agent-hook-session-end",
    "Notification": "agent-hook-notification",
    "SubagentStart": "agent-hook-subagent-start",
    "SubagentStop": "agent-hook-subagent-stop",
    "StopFailure": "agent-hook-stop-failure",
    "PermissionRequest": "agent-hook-permission-request",
    "PermissionDenied": "agent-hook-permission-denied",
    "PostCompact": "agent-hook-post-compact",
}
DEFAULT_TOOLS = ("Bash", "Write", "Edit", "Read")
# Our two transports (docs/server.md). A module runs its scenarios over both with
# `pytestmark = pytest.mark.parametrize("transport", TRANSPORTS, indirect=True)` (the e2e fixture reads it).
TRANSPORTS = ["command", "http"]
RUN_TIMEOUT_S = 60


def install_settings(path: Path, env: dict[str, str], bin_dir: Path = BIN_DIR,
                     transport: str = "command") -> dict[str, Any]:
    """The project's own wiring: ``agent-hook settings install --settings PATH``, as a user runs it.

    Returns the settings it wrote. The e2e tier drives the client with these, so a
    matcher or an event that ``settings install`` gets wrong shows up here too.
    """
    proc = subprocess.run([str(bin_dir / "agent-hook"), "settings", "install", "--settings", str(path),
                           "--bin-dir", str(bin_dir), "--transport", transport],
                          capture_output=True, text=True, env=env, timeout=60)
    if proc.returncode != 0:
        raise AssertionError(f"agent-hook settings install exited {proc.returncode}: {proc.stdout}{proc.stderr}")
    return json.loads(path.read_text(encoding="utf-8"))


def hook_commands(settings: dict[str, Any]) -> dict[str, list[str]]:
    """event -> the commands wired for it (to check the wiring itself)."""
    out: dict[str, list[str]] = {}
    for event, groups in settings.get("hooks", {}).items():
        for group in groups:
            for hook in group.get("hooks", []):
                if hook.get("type") == "command":
                    out.setdefault(event, []).append(hook["command"])
    return out


class ClaudeRun:
    """One ``claude -p`` run: unpacks as (returncode, result, stdout, stderr)."""

    __slots__ = ("returncode", "result", "stdout", "stderr", "seconds")

    def __init__(self, returncode: int, result: dict[str, Any] | None, stdout: str, stderr: str,
                 seconds: float) -> None:
        self.returncode = returncode
        self.result = result
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds

    def __iter__(self) -> Iterator[Any]:
        return iter((self.returncode, self.result, self.stdout, self.stderr))

    def __repr__(self) -> str:
        return f"ClaudeRun(rc={self.returncode}, {self.seconds:.1f}s, result={(self.result or {}).get('result')!r})"

    @property
    def session_id(self) -> str | None:
        return (self.result or {}).get("session_id")

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and bool(self.result) and self.result.get("is_error") is False


class E2E:
    """One test's world: directories, model server, hook settings and the client."""

    def __init__(self, claude: Path, server: ModelServer, root: Path, transport: str = "command") -> None:
        self.claude = claude
        self.transport = transport
        self.server = server
        self.root = root
        self.home = root / "home"
        self.agent_home = root / "agent-hooks"
        self.workspace = root / "workspace"
        for d in (self.home, self.agent_home, self.workspace):
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.settings_path = root / "settings.json"
        self.runs: list[ClaudeRun] = []
        self.last_cmd: list[str] = []
        # http: the frequent events go to our resident server (SessionStart starts it on this port).
        self.port = free_port() if transport == "http" else None
        # What `settings install --transport T` wrote; tests may add their own hooks after ours (add_hook).
        self.settings = install_settings(self.settings_path, self.env(), transport=transport)

    def skip_first_run_screens(self) -> None:
        """Write the client's own state as after a person's first run (onboarded, the test key approved,
        this workspace trusted): an interactive client under tmux would otherwise stop at those screens."""
        (self.home / ".claude.json").write_text(json.dumps({
            "hasCompletedOnboarding": True, "numStartups": 3, "theme": "dark",
            "customApiKeyResponses": {"approved": ["test"], "rejected": []},
            "projects": {str(self.workspace): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}}}))

    def close(self) -> None:
        """Stop this test's resident server, if the http transport started one."""
        if self.port:
            subprocess.run([str(BIN_DIR / "agent-hook"), "server", "stop"], env={**os.environ, **self.env()},
                           capture_output=True, timeout=60)

    # -- wiring ----------------------------------------------------------------------
    @property
    def store_path(self) -> Path:
        return self.agent_home / "store.db"

    @property
    def error_log_path(self) -> Path:
        return self.agent_home / "logs" / "errors.log"

    def add_hook(self, event: str, command: str, matcher: str | None = None) -> None:
        """Wire one more command for ``event``, after ours (e.g. a test-only hook)."""
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
        if matcher is not None:
            group["matcher"] = matcher
        self.settings.setdefault("hooks", {}).setdefault(event, []).append(group)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """A clean environment: nothing of the real home, no inherited Claude/agent-hooks variables."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self.home),
            "TMPDIR": str(self.root),
            "ANTHROPIC_API_KEY": "test",
            "ANTHROPIC_BASE_URL": self.server.url,
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "NO_PROXY": "127.0.0.1,localhost",
            "AGENT_HOOKS_HOME": str(self.agent_home),
        }
        if self.port:
            env["AGENT_HOOKS__SERVE__PORT"] = str(self.port)
        env.update(extra or {})
        return env

    # -- running the client ----------------------------------------------------------
    def run(self, prompt: str, resume: str | None = None, allowed_tools: tuple[str, ...] | list[str] = DEFAULT_TOOLS,
            env_extra: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT_S,
            extra_args: list[str] | None = None, settings_flag: bool = True) -> ClaudeRun:
        """``claude -p PROMPT --settings FILE --allowedTools ... --output-format json`` in the workspace.

        ``settings_flag=False`` leaves ``--settings`` out: the client then finds hooks only
        where a user has them (``$HOME/.claude/settings.json``, the project's files).
        """
        cmd = [str(self.claude), "-p", prompt]
        if settings_flag:
            self.settings_path.write_text(json.dumps(self.settings, indent=1), encoding="utf-8")
            cmd += ["--settings", str(self.settings_path)]
        cmd += ["--allowedTools", " ".join(allowed_tools), "--output-format", "json"]
        if resume:
            cmd += ["--resume", resume]
        cmd += list(extra_args or [])
        self.last_cmd = cmd
        started = time.monotonic()
        proc = subprocess.run(cmd, cwd=self.workspace, env=self.env(env_extra), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        try:
            result = json.loads(proc.stdout)
        except ValueError:
            result = None
        run = ClaudeRun(proc.returncode, result, proc.stdout, proc.stderr, time.monotonic() - started)
        self.runs.append(run)
        return run

    def compact(self, session_id: str, instructions: str = "", **kwargs: Any) -> ClaudeRun:
        """A manual ``/compact`` on a session (it needs a few turns of history)."""
        return self.run(f"/compact {instructions}".rstrip(), resume=session_id, **kwargs)

    # -- reading what our hooks recorded ---------------------------------------------
    def query(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        """Rows of a read-only query on the store, as dicts."""
        conn = sqlite3.connect(f"file:{self.store_path}?mode=ro", uri=True)
        try:
            conn.row_factory = sqlite3.Row
            return [dict(r) for r in conn.execute(sql, args).fetchall()]
        finally:
            conn.close()

    def errors(self) -> list[dict[str, Any]]:
        """The JSON lines of $AGENT_HOOKS_HOME/logs/errors.log."""
        if not self.error_log_path.exists():
            return []
        return [json.loads(line) for line in self.error_log_path.read_text().splitlines() if line.strip()]

    def describe(self) -> str:
        """What happened, for assertion messages."""
        lines = [f"runs: {[(r.returncode, (r.result or {}).get('result'), r.stderr[-300:]) for r in self.runs]}",
                 f"requests: {self.server.requests}", f"errors.log: {self.errors()}"]
        return "\n".join(lines)
