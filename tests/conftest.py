from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    """Every test gets its own AGENT_HOOKS_HOME and HOME: nothing touches the real home."""
    home = tmp_path / "agent-hooks-home"
    home.mkdir()
    monkeypatch.setenv("AGENT_HOOKS_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("AGENT_HOOKS_TASK_ID", "AGENT_HOOKS_TMUX_SESSION", "OPTIMALOS_SESSION_TMUX",
                "AGENT_HOOKS_AGENT", "AGENT_HOOKS_ROLE"):
        monkeypatch.delenv(var, raising=False)
    return home
