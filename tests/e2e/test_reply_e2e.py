"""Reply from the board, with the real interactive client under tmux: the session is recognised from
tmux's own variables (no launcher variable), waits for its next prompt after its first turn, and a
reply posted to the host's server is typed into its pane; the model receives it as the next prompt."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import httpx
import pytest
from harness import BIN_DIR, E2E
from model_server import last_user_text, text

from support.ports import free_port
from support.waiting import wait_for


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is needed to drive the interactive client")
# What a person may have left in the prompt: nothing, or "!" (the client's shell mode) and half a command.
# Typed after that, the reply and its Enter ran as a shell command on the host (measured, 2.1.332).
@pytest.mark.parametrize("left_at_terminal", ["", "!rm -rf nothing"])
def test_reply_reaches_an_awaiting_session_as_its_next_prompt(e2e: E2E, left_at_terminal: str) -> None:
    e2e.server.set_script([[text("First turn done.")], [text("Got your reply.")]])
    e2e.skip_first_run_screens()
    port = free_port()
    env = e2e.env({"TERM": "xterm-256color", "AGENT_HOOKS__SERVE__PORT": str(port),
                   "AGENT_HOOKS__FORWARD__ENABLED": "false"})
    subprocess.run([str(BIN_DIR / "agent-hook"), "server", "start"], env=env, check=True, capture_output=True,
                   timeout=60)
    socket = f"ah-reply-{os.getpid()}"
    tmux = ["tmux", "-L", socket]
    # A clean environment, plus what tmux gives a pane's process ($TMUX, $TMUX_PANE): nothing of ours says tmux.
    launch = ["sh", "-c", 'exec env -i TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" "$@"', "sh",
              *[f"{k}={v}" for k, v in env.items()], str(e2e.claude), "--settings", str(e2e.settings_path)]
    subprocess.run(tmux + ["new-session", "-d", "-s", "reply-me", "-x", "200", "-y", "50", "-c", str(e2e.workspace),
                           *launch], check=True)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, trust_env=False)
    try:
        def screen() -> str:
            return subprocess.run(tmux + ["capture-pane", "-p", "-t", "reply-me"], capture_output=True,
                                  text=True).stdout

        def on_screen(check, what: str, timeout: float = 30):  # type: ignore[no-untyped-def]
            return wait_for(check, timeout, what, show=lambda: f"\n{screen()}\n{e2e.describe()}", step=0.3)

        on_screen(lambda: "❯" in screen(), "the prompt")
        subprocess.run(tmux + ["send-keys", "-t", "reply-me", "-l", "do the first thing"], check=True)
        time.sleep(0.5)
        subprocess.run(tmux + ["send-keys", "-t", "reply-me", "Enter"], check=True)
        # Its first turn ended (at its first prompt it was awaiting too, with that said).
        [row] = on_screen(lambda: e2e.query("SELECT session_id, tmux_session, tmux_pane FROM sessions"
                                            " WHERE state = 'awaiting' AND waiting_detail IS NULL"),
                          "the session to await its prompt")
        assert row["tmux_session"] == "reply-me" and row["tmux_pane"].startswith("%"), row
        card = on_screen(lambda: next((c for c in http.get("/api/board").json()["cards"]
                                       if c["id"] == row["session_id"] and c["reply"]), None),
                         "the card to offer Reply")
        assert card["tmux_session"] == "reply-me" and card["column"] == "awaiting_review", card

        if left_at_terminal:
            subprocess.run(tmux + ["send-keys", "-t", "reply-me", "-l", left_at_terminal], check=True)
            on_screen(lambda: "rm -rf nothing" in screen(), "the half-typed command")
        reply = "now say you got my reply" if not left_at_terminal else "touch typed-into-the-shell"
        r = http.post(f"/api/sessions/{row['session_id']}/reply", json={"text": reply})
        assert r.status_code == 200 and r.json()["applied"] == "here", r.text
        on_screen(lambda: len(e2e.server.messages("main")) >= 2, "the reply to reach the model")
        assert reply in last_user_text(e2e.server.bodies()[-1]), e2e.describe()
        assert "rm -rf" not in last_user_text(e2e.server.bodies()[-1])  # what was left was cleared, not sent
        assert not (e2e.workspace / "typed-into-the-shell").exists()
        on_screen(lambda: "Got your reply." in screen(), "the model's answer")
    finally:
        http.close()
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        subprocess.run([str(BIN_DIR / "agent-hook"), "server", "stop"], env=env, capture_output=True, timeout=60)
