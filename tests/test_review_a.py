"""Defects found in review of issues 12 (settings), 13 and 19 (wiring); one test each.

Every test runs the installed console scripts as subprocesses against a fresh state directory.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HOOKS", "XDG_"))}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), **extra)
    return env


def _sh(script: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", "-c", script], input=stdin, capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("mode", ["home", "xdg"])
def test_settings_install_creates_our_state_dir_private(tmp_path: Path, mode: str) -> None:
    """`agent-hook settings install` run first (before any hook or init) made the state directory
    (AGENT_HOOKS_HOME, or $XDG_STATE_HOME/agent-hooks) 0755 under umask 022: only the leaf of
    makedirs(locks, 0o700) got 0700. Doctor then warned "unexpected modes" on a fresh install."""
    state = tmp_path / "state-home"
    if mode == "home":
        env = _env(tmp_path, AGENT_HOOKS_HOME=str(state))
        ours = state
    else:
        env = _env(tmp_path, XDG_STATE_HOME=str(state))
        ours = state / "agent-hooks"
    settings = tmp_path / "settings.json"
    proc = _sh(f"umask 022; exec '{BIN}/agent-hook' settings install --settings '{settings}'", env)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(ours.stat().st_mode) == 0o700, oct(ours.stat().st_mode)
