"""Two hosts on one machine, the real interactive client under tmux on host B: its permission dialog is
listed on host A, the command center, and allowed from A's API; the tool runs on B."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import httpx
import pytest
from harness import BIN_DIR, E2E
from model_server import text, tool_use

from support.ports import free_port
from support.waiting import wait_for


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is needed to drive the interactive client")
def test_a_dialog_on_b_is_allowed_from_a_and_the_tool_runs(e2e: E2E) -> None:
    e2e.server.set_script([[tool_use("Bash", {"command": "touch allowed-from-a.txt", "description": "touch"})],
                           [text("Touched it.")]])
    e2e.skip_first_run_screens()
    port_a, port_b = free_port(), free_port()
    env_a = {**e2e.env(), "AGENT_HOOKS_HOME": str(e2e.root / "host-a"), "AGENT_HOOKS__SERVE__PORT": str(port_a),
             "AGENT_HOOKS__FLEET__HOST": "host-a", "AGENT_HOOKS__FORWARD__ENABLED": "false"}
    env_b = e2e.env({"TERM": "xterm-256color", "AGENT_HOOKS__SERVE__PORT": str(port_b),
                     "AGENT_HOOKS__FLEET__HOST": "host-b", "AGENT_HOOKS__FORWARD__ENABLED": "true",
                     "AGENT_HOOKS_INGEST_URL": f"http://127.0.0.1:{port_a}/api/hooks/ingest",
                     "AGENT_HOOKS__APPROVALS__WAIT_S": "60"})
    agent_hook = str(BIN_DIR / "agent-hook")
    for env in (env_a, env_b):
        subprocess.run([agent_hook, "server", "start"], env=env, check=True, capture_output=True, timeout=60)
    socket = f"ah-fleet-{os.getpid()}"
    tmux = ["tmux", "-L", socket]
    launch = ["sh", "-c", 'exec env -i TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" "$@"', "sh",
              *[f"{k}={v}" for k, v in env_b.items()], str(e2e.claude), "--settings", str(e2e.settings_path),
              "--permission-mode", "default"]
    subprocess.run(tmux + ["new-session", "-d", "-s", "agent-b", "-x", "200", "-y", "50", "-c", str(e2e.workspace),
                           *launch], check=True)
    a = httpx.Client(base_url=f"http://127.0.0.1:{port_a}", timeout=10, trust_env=False)
    try:
        def screen() -> str:
            return subprocess.run(tmux + ["capture-pane", "-p", "-t", "agent-b"], capture_output=True,
                                  text=True).stdout

        def on_screen(check, what: str, timeout: float = 30):  # type: ignore[no-untyped-def]
            return wait_for(check, timeout, what, show=lambda: f"\n{screen()}\n{e2e.describe()}", step=0.1)

        on_screen(lambda: "❯" in screen(), "the prompt")
        subprocess.run(tmux + ["send-keys", "-t", "agent-b", "-l", "touch the file"], check=True)
        time.sleep(0.5)
        subprocess.run(tmux + ["send-keys", "-t", "agent-b", "Enter"], check=True)
        on_screen(lambda: "Do you want to proceed?" in screen(), "the dialog")
        [row] = on_screen(lambda: a.get("/api/approvals").json()["approvals"], "A to list B's request")
        assert row["host"] == "host-b" and row["tool_input"]["command"] == "touch allowed-from-a.txt", row
        assert not (e2e.workspace / "allowed-from-a.txt").exists()
        r = a.post(f"/api/approvals/{row['id']}", json={"decision": "allow", "via": "board"})
        assert r.status_code == 200 and r.json()["applied"] == "answered", r.text
        on_screen(lambda: (e2e.workspace / "allowed-from-a.txt").exists(), "the tool to run on B")
        on_screen(lambda: "Touched it." in screen(), "the model's answer")
        assert a.get("/api/approvals").json()["approvals"] == []
        late = a.post(f"/api/approvals/{row['id']}", json={"decision": "deny"})
        assert late.status_code == 409 and "already answered" in late.json()["error"], late.text
    finally:
        a.close()
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        for env in (env_b, env_a):
            subprocess.run([agent_hook, "server", "stop"], env=env, capture_output=True, timeout=60)
