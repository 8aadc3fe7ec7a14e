"""A private tmux server for tests (its own socket): panes running a stand-in of the client, so what is typed shows up.

A reply is typed only into a pane whose foreground program is the Claude Code client, recognised by the
file the kernel runs (agent_hooks/center/foreground.py), not by the name a process gives itself. The
stand-in is a copy of `cat` at the path where npm installs the client's native build
(``node_modules/@anthropic-ai/claude-code/bin/claude.exe``): the rule takes it for the client by the same
check that takes the real one (its file's place), and it shows what is typed, as `cat` does. The fast tier
cannot install the real client; the e2e tier types into it (tests/e2e/test_reply_e2e.py and
test_reply_verbatim_e2e.py)."""

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
        self.client = self.dir / "node_modules" / "@anthropic-ai" / "claude-code" / "bin" / "claude.exe"
        self.client.parent.mkdir(parents=True)
        cat = shutil.which("cat")
        assert cat is not None
        shutil.copy2(cat, self.client)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True, check=check,
                              timeout=10)

    def new(self, name: str, command: str | None = None) -> str:
        """A detached session ``name`` running ``command`` (the client's stand-in by default); its pane id ("%N")."""
        self.run("new-session", "-d", "-s", name, "-x", "120", "-y", "20", command or str(self.client))
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
