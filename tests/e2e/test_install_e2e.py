"""install.sh under the real client: no --settings flag, the user's settings.json does the wiring."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from harness import E2E, HOOK_EXECUTABLES, REPO
from model_server import text, tool_use

from agent_hooks.wiring.entries import command_for


@pytest.mark.slow
def test_after_install_sh_the_client_runs_our_hooks_without_settings_flag(e2e: E2E) -> None:
    env = e2e.env()
    env.update({k: v for k, v in os.environ.items() if k.startswith("PIP_")})
    proc = subprocess.run(["bash", str(REPO / "install.sh"), "--venv"], capture_output=True, text=True,
                          env=env, cwd=e2e.workspace, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bin_dir = e2e.agent_home / "venv" / "bin"
    settings = json.loads((e2e.home / ".claude" / "settings.json").read_text())
    for event, exe in HOOK_EXECUTABLES.items():
        (group,) = settings["hooks"][event]
        # Through the launcher (docs/settings.md): the venv's executable, or exit 0 when it is gone.
        assert group["hooks"][0]["command"] == command_for(str(bin_dir), exe, event)

    e2e.server.set_script([
        [tool_use("Bash", {"command": "echo wired", "description": "say wired"}, id="toolu_install")],
        [text("Wired.")],
    ])
    run = e2e.run("Check the wiring.", settings_flag=False)
    assert run.ok, e2e.describe()
    (session,) = e2e.query("SELECT * FROM sessions")
    assert session["session_id"] == run.session_id
    assert session["state"] == "ended" and session["tool_calls"] == 1
    assert session["cwd"] == str(e2e.workspace)
    (call,) = e2e.query("SELECT tool_use_id, outcome FROM tool_calls")
    assert call == {"tool_use_id": "toolu_install", "outcome": "success"}
    events = [r["event"] for r in e2e.query("SELECT event FROM session_events ORDER BY id")]
    assert events == ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"], events
    assert e2e.errors() == []
    assert "--settings" not in e2e.last_cmd, "no settings file was handed to the client"
