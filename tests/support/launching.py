"""Launching sessions in tests: a private tmux server for a host's server, and a stand-in of the client.

The stand-in (``fake_client``) is what ``[launch] claude`` names in the fast tier: it records what it was
started with (its arguments, directory and environment) in ``<cwd>/launched-<session id>.json``, then
calls our hook executables as the client would (SessionStart, then Stop, with the session id it was given
by ``--session-id``) and stays in its pane. The real client is launched in tests/e2e/test_launch_e2e.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.scripts import BIN

FAKE_CLIENT = """#!{python}
import json, os, subprocess, sys, time
args = sys.argv[1:]
sid = args[args.index("--session-id") + 1]
with open(os.path.join(os.getcwd(), f"launched-{{sid}}.json"), "w") as f:
    json.dump({{"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ)}}, f)
for event, extra in (("SessionStart", {{"source": "startup"}}), ("Stop", {{"stop_hook_active": False}})):
    payload = {{"session_id": sid, "transcript_path": os.getcwd() + "/t.jsonl", "cwd": os.getcwd(),
               "hook_event_name": event, **extra}}
    exe = {bin!r} + "/agent-hook-" + ("session-start" if event == "SessionStart" else "stop")
    subprocess.run([exe], input=json.dumps(payload).encode(), capture_output=True, timeout=30)
time.sleep(120)
"""


def fake_client(directory: Path) -> Path:
    """The client's stand-in, an executable file in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "claude"
    path.write_text(FAKE_CLIENT.format(python=sys.executable, bin=str(BIN)))
    path.chmod(0o755)
    return path


def launched(cwd: Path, session_id: str, timeout: float = 15.0) -> dict[str, Any]:
    """What the stand-in recorded for ``session_id`` in ``cwd`` (waits for it)."""
    path = cwd / f"launched-{session_id}.json"
    end = time.time() + timeout
    while time.time() < end:
        if path.exists():
            try:
                return json.loads(path.read_text())  # type: ignore[no-any-return]
            except ValueError:
                pass  # still being written
        time.sleep(0.05)
    raise AssertionError(f"the client was not started in {cwd} for {session_id}: {sorted(os.listdir(cwd))}")


class TmuxDir:
    """``TMUX_TMPDIR`` for a host's server: its launches go to a tmux server of the test's own."""

    def __init__(self) -> None:
        if shutil.which("tmux") is None:
            raise AssertionError("tmux is not installed (apt-get install tmux)")
        self.dir = tempfile.mkdtemp(prefix="ahl-")  # short: a unix socket's path is limited to ~100 bytes

    @property
    def sock(self) -> str:
        return os.path.join(self.dir, f"tmux-{os.getuid()}", "default")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True, timeout=10,
                              check=False)

    def sessions(self) -> list[str]:
        out = self.run("list-sessions", "-F", "#{session_name}")
        return out.stdout.split() if out.returncode == 0 else []

    def close(self) -> None:
        self.run("kill-server")
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def tmux_dir() -> Iterator[TmuxDir]:
    t = TmuxDir()
    try:
        yield t
    finally:
        t.close()


def launch_env(tmux: TmuxDir, roots: list[Path] | None, client: Path | None = None,
               modes: list[str] | None = None) -> dict[str, str]:
    """A host server's settings for launching: its roots (None: launching off), client and modes."""
    env = {"TMUX_TMPDIR": tmux.dir, "AGENT_HOOKS__LAUNCH__ROOTS": json.dumps([str(r) for r in roots or []])}
    if client is not None:
        env["AGENT_HOOKS__LAUNCH__CLAUDE"] = str(client)
    if modes is not None:
        env["AGENT_HOOKS__LAUNCH__PERMISSION_MODES"] = json.dumps(modes)
    return env
