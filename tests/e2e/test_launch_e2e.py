"""Two hosts on one machine: the command center (A) launches the real interactive client on host B (its own
store, name and server). B starts it in tmux, in a directory of its [launch] roots, with the task set for
our hooks and the prompt as the client's argument; the session writes a file there, and its card, with its
task and host, reaches A's board under the id A gave it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import httpx
import pytest
from harness import BIN_DIR, E2E
from model_server import last_user_text, text, tool_use

from support.ports import free_port
from support.waiting import wait_for


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is needed to run the interactive client")
def test_the_center_launches_a_session_on_another_host_and_its_card_reaches_the_board(e2e: E2E) -> None:
    target = e2e.workspace / "written-by-the-launched-session.txt"
    e2e.server.set_script([[tool_use("Write", {"file_path": str(target), "content": "launched from A\n"})],
                           [text("Wrote it.")]])
    e2e.skip_first_run_screens()
    # A launched client gets no --settings: our hooks are where a user has them, in ~/.claude/settings.json.
    (e2e.home / ".claude").mkdir(exist_ok=True)
    (e2e.home / ".claude" / "settings.json").write_text(json.dumps(e2e.settings, indent=1))
    tmux_dir = tempfile.mkdtemp(prefix="ahe-")  # B's tmux server, the test's own (a short socket path)
    port_a, port_b = free_port(), free_port()
    env_a = {**e2e.env(), "AGENT_HOOKS_HOME": str(e2e.root / "host-a"), "AGENT_HOOKS__SERVE__PORT": str(port_a),
             "AGENT_HOOKS__FLEET__HOST": "host-a", "AGENT_HOOKS__FORWARD__ENABLED": "false"}
    env_b = e2e.env({"TERM": "xterm-256color", "TMUX_TMPDIR": tmux_dir, "AGENT_HOOKS__SERVE__PORT": str(port_b),
                     "AGENT_HOOKS__FLEET__HOST": "host-b", "AGENT_HOOKS__FORWARD__ENABLED": "true",
                     "AGENT_HOOKS_INGEST_URL": f"http://127.0.0.1:{port_a}/api/hooks/ingest",
                     "AGENT_HOOKS__LAUNCH__ROOTS": json.dumps([str(e2e.workspace)]),
                     "AGENT_HOOKS__LAUNCH__CLAUDE": str(e2e.claude)})
    agent_hook = str(BIN_DIR / "agent-hook")
    for env in (env_a, env_b):
        subprocess.run([agent_hook, "server", "start"], env=env, check=True, capture_output=True, timeout=60)
    tmux = ["tmux", "-S", os.path.join(tmux_dir, f"tmux-{os.getuid()}", "default")]
    a = httpx.Client(base_url=f"http://127.0.0.1:{port_a}", timeout=30, trust_env=False)
    try:
        def screen() -> str:
            return subprocess.run(tmux + ["capture-pane", "-p", "-t", "agent-e2e"], capture_output=True,
                                  text=True).stdout

        def soon(check, what: str, timeout: float = 60):  # type: ignore[no-untyped-def]
            return wait_for(check, timeout, what, show=lambda: f"\n{screen()}\n{e2e.describe()}", step=0.2)

        soon(lambda: any(h["host"] == "host-b" and h["roots"] for h in a.get("/api/launch").json()["hosts"]),
             "B to subscribe to A and say what it may launch", 30)
        r = a.post("/api/sessions", json={"host": "host-b", "cwd": str(e2e.workspace), "task_id": "T-launch",
                                          "label": "e2e", "permission_mode": "acceptEdits",
                                          "prompt": "write the file, then say so"})
        assert r.status_code == 201, r.text
        doc = r.json()
        assert doc["host"] == "host-b" and doc["tmux_session"] == "agent-e2e", doc
        soon(lambda: target.exists(), "the launched session to write its file")
        assert target.read_text() == "launched from A\n"
        assert "write the file, then say so" in last_user_text(e2e.server.bodies()[0]), e2e.describe()
        soon(lambda: "Wrote it." in screen(), "the model's last answer on screen")
        card = soon(lambda: next((c for c in a.get("/api/board").json()["cards"]
                                  if c["id"] == doc["id"] and c["tool_calls"] >= 1 and c["launch"]["state"] == "started"
                                  and c["own_state"] == "awaiting"), None),
                    "the session's card on A's board, after its tool call")
        assert card["host"] == "host-b" and card["task_id"] == "T-launch" and card["label"] == "e2e", card
        assert card["tmux_session"] == "agent-e2e" and card["reply"], card  # it can be replied to like any other
        # B's own record: the session the client ran under the id A chose, in the tmux session it named.
        row = json.loads(subprocess.run([agent_hook, "session", "show", doc["id"], "--json"], env=env_b,
                                        capture_output=True, text=True, timeout=60, check=True).stdout)
        assert row["tmux_session"] == "agent-e2e" and row["task_id"] == "T-launch", row
    finally:
        a.close()
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        for env in (env_b, env_a):
            subprocess.run([agent_hook, "server", "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(tmux_dir, ignore_errors=True)
