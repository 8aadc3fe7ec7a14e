"""Shared parts of the forwarding tests: an isolated home, the contract server, hook runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_hooks.forward import outbox
from agent_hooks.paths import Paths

from support.ingest_server import IngestServer
from support.repo import FIXTURES
from support.scripts import BIN

SESSION = "5f0c2d7e-0000-4000-8000-00000000f0a1"


def fixture(name: str, session_id: str = SESSION, **changes: Any) -> dict[str, Any]:
    """A recorded payload, moved to one session id so a sequence forms one session."""
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    data["session_id"] = session_id
    data.update(changes)
    return data


def notification(session_id: str = SESSION) -> dict[str, Any]:
    # 2.1.197 sends Notification with message / notification_type (reference Part A);
    # no recorded fixture exists, so it is built from the Stop fixture's common fields.
    base = fixture("Stop", session_id)
    return {k: base[k] for k in ("session_id", "transcript_path", "cwd")} | {
        "hook_event_name": "Notification",
        "message": "Claude needs your permission to use Bash",
        "notification_type": "permission_prompt",
    }


def log_text(h: Home) -> str:
    try:
        return Path(h.paths.error_log).read_text()
    except FileNotFoundError:
        return ""


def drainers_of(agent_home: str) -> list[int]:
    """Pids of drainer processes running for this AGENT_HOOKS_HOME (hooks start them detached)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            if b"agent_hooks.forward.drain" not in cmd:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"AGENT_HOOKS_HOME={agent_home}".encode() in env:
            pids.append(int(entry))
    return pids


def kill_drainers(agent_home: str) -> None:
    """SIGKILL the drainers this test caused, by pid. A hook's Popen returns only after the
    exec, so every drainer a finished hook started is visible here already."""
    end = time.time() + 5
    while (pids := drainers_of(agent_home)) and time.time() < end:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


class Home:
    """One isolated installation: AGENT_HOOKS_HOME, HOME and the environment for subprocesses."""

    def __init__(self, root: Path, server: IngestServer | None) -> None:
        self.root = root
        self.dir = root / "ah"
        (root / "home").mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("AGENT_HOOKS") and k not in ("OPTIMALOS_SESSION_TMUX",)}
        env.update({
            "HOME": str(root / "home"),
            "AGENT_HOOKS_HOME": str(self.dir),
            "AGENT_HOOKS_TMUX_SESSION": "agent-forward-test",
            "AGENT_HOOKS__FORWARD__IDLE_EXIT_S": "0.5",
            "AGENT_HOOKS__FORWARD__POLL_INTERVAL_S": "0.02",
            "AGENT_HOOKS__FORWARD__BACKOFF_INITIAL_S": "0.05",
            "AGENT_HOOKS__FORWARD__BACKOFF_MAX_S": "0.2",
            "AGENT_HOOKS__FORWARD__TIMEOUT_S": "2",
        })
        if server is not None:
            env["AGENT_HOOKS_INGEST_URL"] = server.url
        self.env = env
        self.paths = Paths(env)
        self.drainers: list[subprocess.Popen[bytes]] = []

    def hook(self, script: str, payload: dict[str, Any], env: dict[str, str] | None = None,
             timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([str(BIN / f"agent-hook-{script}")], input=json.dumps(payload).encode(),
                              capture_output=True, env=env or self.env, timeout=timeout)

    def cli(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "agent-hook"), *args], capture_output=True, text=True,
                              env=env or self.env, timeout=60)

    def queue(self) -> dict[str, Any]:
        r = self.cli("queue", "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def start_drainer(self) -> subprocess.Popen[bytes]:
        p = subprocess.Popen([sys.executable, "-m", "agent_hooks.forward.drain"], env=self.env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.drainers.append(p)
        return p

    def drainer_pid(self) -> int | None:
        if not outbox.drainer_alive(self.paths):
            return None
        try:
            return int((Path(self.paths.lock_dir) / "drain.pid").read_text())
        except (OSError, ValueError):
            return None

    def wait_drainer_gone(self, timeout: float = 15) -> None:
        end = time.time() + timeout
        while time.time() < end:
            if not outbox.drainer_alive(self.paths):
                return
            time.sleep(0.05)
        raise AssertionError("the drainer did not exit")

    def cleanup(self) -> None:
        for p in self.drainers:
            if p.poll() is None:
                p.kill()
                p.wait()
        kill_drainers(str(self.dir))  # the detached ones hooks started


@pytest.fixture
def server() -> Iterator[IngestServer]:
    s = IngestServer().start()
    yield s
    s.stop()


@pytest.fixture
def home(tmp_path: Path, server: IngestServer) -> Iterator[Home]:
    h = Home(tmp_path, server)
    yield h
    h.cleanup()
