"""A real OpenClaw gateway for the e2e tier, in a temporary HOME, driven by the scripted model.

:class:`OpenClawGateway` writes ``~/.openclaw/openclaw.json`` (local mode, loopback, token auth,
a custom provider ``fake`` whose base URL is the e2e tier's Anthropic-style model server), starts
``openclaw gateway --port P`` in its own process group, waits until it logs that it is ready,
runs agent turns with ``openclaw agent`` and stops it (the whole group: the gateway spawns
helpers). Starting takes seconds, so the tests share one gateway per module.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from openclaw_client import Gateway

from support.ports import free_port

ANSI = re.compile(r"\x1b\[[0-9;]*m")
READY_S = 180.0  # two shared cores: seen from 6 s to 30 s


def config(port: int, token: str, model_url: str, log_file: Path, exec_mode: str | None = None,
           agents: dict[str, Any] | None = None) -> dict[str, Any]:
    """The gateway's openclaw.json: the issue's example, plus a log file inside HOME and no fetches
    from the internet; ``exec_mode``
    sets ``tools.exec.mode`` for every agent ("ask": each command waits for an operator's answer),
    ``agents`` the per-agent entries (``{"gated": {"tools": {"exec": {"mode": "ask"}}}}``)."""
    cfg: dict[str, Any] = {
        "gateway": {"mode": "local", "bind": "loopback", "port": port, "auth": {"mode": "token", "token": token}},
        "models": {"providers": {"fake": {
            "baseUrl": model_url, "api": "anthropic-messages", "apiKey": "x",
            "models": [{"id": "claude-sonnet-4-5", "name": "scripted", "contextWindow": 200000, "maxTokens": 8192}],
        }}},
        "agents": {"defaults": {"model": {"primary": "fake/claude-sonnet-4-5"}, "skipBootstrap": True}},
        "logging": {"file": str(log_file)},
        # Loopback only: no update check, no remote model catalog (both fetch from the internet).
        "update": {"checkOnStart": False},
    }
    cfg["models"]["catalogRefresh"] = {"enabled": False}
    if exec_mode:
        cfg["tools"] = {"exec": {"mode": exec_mode}}
    if agents:
        cfg["agents"]["entries"] = agents
    return cfg


class OpenClawGateway:
    """One gateway process (restartable) with its HOME under ``root``."""

    def __init__(self, gateway: Gateway, root: Path, model_url: str, exec_mode: str | None = None,
                 agents: dict[str, Any] | None = None) -> None:
        import json

        self.gateway = gateway
        self.root = root
        self.home = root / "home"
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.stdout_path = root / "gateway.out"
        (self.home / ".openclaw").mkdir(parents=True, exist_ok=True)
        self.config_path = self.home / ".openclaw" / "openclaw.json"
        self.config_path.write_text(json.dumps(
            config(self.port, self.token, model_url, self.home / "openclaw.log", exec_mode, agents), indent=2))
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = self.gateway.env()
        # TMPDIR too: the gateway keeps lock files under the temporary directory.
        tmp = self.root / "tmp"
        tmp.mkdir(mode=0o700, exist_ok=True)
        env.update({"HOME": str(self.home), "TMPDIR": str(tmp), "NO_COLOR": "1", "FORCE_COLOR": "0",
                    "OPENCLAW_NO_AUTO_UPDATE": "1"})
        env.update(extra or {})
        return env

    # -- process ---------------------------------------------------------------------------
    def start(self, timeout: float = READY_S) -> OpenClawGateway:
        """Start the gateway and wait until it logs ``[gateway] ready``."""
        assert self.proc is None, "already running"
        offset = self.stdout_path.stat().st_size if self.stdout_path.exists() else 0
        out = self.stdout_path.open("ab")
        self.proc = subprocess.Popen([str(self.gateway.openclaw), "gateway", "--port", str(self.port)],
                                     env=self.env(), cwd=self.home, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._ready_since(offset):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"openclaw gateway exited {self.proc.returncode}:\n{self.log_tail()}")
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"openclaw gateway not ready within {timeout} s:\n{self.log_tail()}")

    def _ready_since(self, offset: int) -> bool:
        with self.stdout_path.open("rb") as f:
            f.seek(offset)
            text = ANSI.sub("", f.read().decode(errors="replace"))
        return any(line.rstrip().endswith("[gateway] ready") for line in text.splitlines())

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to the gateway's process group (it announces ``shutdown`` to operators), then
        SIGKILL to whatever is left of the group."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # helpers that outlived the gateway
        except ProcessLookupError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return ANSI.sub("", self.stdout_path.read_text(errors="replace"))[-chars:]
        except OSError:
            return ""

    # -- agent turns -----------------------------------------------------------------------
    def agent(self, message: str, session_key: str) -> subprocess.Popen[str]:
        """Start ``openclaw agent`` (one turn through this gateway) in the session
        ``agent:<agent id>:<name>``; the caller waits for it (:func:`finish`)."""
        agent_id = session_key.split(":")[1]  # the CLI refuses an --agent the key does not name
        return subprocess.Popen([str(self.gateway.openclaw), "agent", "--agent", agent_id, "--session-key",
                                 session_key, "--message", message, "--json"],
                                env=self.env(), cwd=self.home, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True, start_new_session=True)


def finish(proc: subprocess.Popen[str], timeout: float = 120.0) -> tuple[int, str, str]:
    """Wait for an ``openclaw agent`` process; kill its group when it overruns."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        raise AssertionError(f"openclaw agent ran over {timeout} s:\n{out[-2000:]}\n{err[-2000:]}") from None
    return proc.returncode, out, err
