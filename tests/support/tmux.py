"""A private tmux server for tests (its own socket): panes running `cat`, so what is typed shows up."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest


class Tmux:
    """One tmux server on a socket of its own; ``env(pane)`` is what a process in that pane sees."""

    def __init__(self) -> None:
        if shutil.which("tmux") is None:
            pytest.fail("tmux is not installed (apt-get install tmux)", pytrace=False)
        # A short directory: a unix socket's path is limited to about 100 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="ahtmux-"))
        self.sock = str(self.dir / "s")

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True, check=check,
                              timeout=10)

    def new(self, name: str, command: str = "cat") -> str:
        """A detached session ``name`` running ``command``; its pane id ("%N")."""
        self.run("new-session", "-d", "-s", name, "-x", "120", "-y", "20", command)
        return self.run("display-message", "-p", "-t", name, "#{pane_id}").stdout.strip()

    def env(self, pane: str) -> dict[str, str]:
        pid = self.run("display-message", "-p", "#{pid}").stdout.strip()
        return {"TMUX": f"{self.sock},{pid},0", "TMUX_PANE": pane}

    def capture(self, pane: str) -> str:
        return self.run("capture-pane", "-p", "-t", pane).stdout

    def wait_text(self, pane: str, text: str, timeout: float = 5.0) -> str:
        end = time.time() + timeout
        while time.time() < end:
            shown = self.capture(pane)
            if text in shown:
                return shown
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never showed in pane {pane}: {self.capture(pane)!r}")

    def kill(self, name: str) -> None:
        self.run("kill-session", "-t", name, check=False)

    def close(self) -> None:
        self.run("kill-server", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


# Not in tmux: what a session started outside tmux sees (the test runner may itself run in tmux).
NO_TMUX = {"TMUX": "", "TMUX_PANE": ""}
