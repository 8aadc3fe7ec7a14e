"""Reply from the board into the real interactive client under tmux, typed as it is: a reply that starts
with "-" and ends with ";" reaches the model unchanged (tmux used to drop a trailing ";", which ends a
tmux command), and the client is recognised as the client (agent_hooks/center/foreground.py: what runs in
the pane's foreground is the npm package's native build), while the same pane running a shell after the
client has exited is refused and nothing is typed there."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import httpx
import pytest
from harness import BIN_DIR, E2E, free_port
from model_server import last_user_text, text

from support import waiting

REPLIES = ("-x run the tests; then stop;", "and one more;")
# A session whose turn ended: awaiting its next prompt, not its first one (which is awaiting too).
AFTER_A_TURN = "SELECT session_id FROM sessions WHERE state = 'awaiting' AND waiting_detail IS NULL"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is needed to drive the interactive client")
def test_replies_reach_the_client_verbatim_and_a_shell_after_it_is_refused(e2e: E2E) -> None:
    e2e.server.set_script([[text("First turn done.")], [text("Got the first reply.")],
                           [text("Got the second reply.")]])
    e2e.skip_first_run_screens()
    port = free_port()
    env = e2e.env({"TERM": "xterm-256color", "AGENT_HOOKS__SERVE__PORT": str(port),
                   "AGENT_HOOKS__FORWARD__ENABLED": "false"})
    subprocess.run([str(BIN_DIR / "agent-hook"), "server", "start"], env=env, check=True, capture_output=True,
                   timeout=60)
    socket = f"ah-verbatim-{os.getpid()}"
    tmux = ["tmux", "-L", socket]
    # The client in the foreground of a shell that stays after it, as a person starts it: when the client
    # exits, the shell has the pane again (and no SessionEnd is sent when it is killed).
    launch = ["sh", "-c", 'env -i TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" "$@"; exec sh', "sh",
              *[f"{k}={v}" for k, v in env.items()], str(e2e.claude), "--settings", str(e2e.settings_path)]
    subprocess.run(tmux + ["new-session", "-d", "-s", "verbatim", "-x", "200", "-y", "50", "-c", str(e2e.workspace),
                           *launch], check=True)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, trust_env=False)
    try:
        def screen() -> str:
            return subprocess.run(tmux + ["capture-pane", "-p", "-t", "verbatim"], capture_output=True,
                                  text=True).stdout

        def wait_for(check, what: str, timeout: float = 30):  # type: ignore[no-untyped-def]
            return waiting.wait_for(check, timeout, what, show=lambda: f"\n{screen()}\n{e2e.describe()}", step=0.3)

        wait_for(lambda: "❯" in screen(), "the prompt never showed")
        subprocess.run(tmux + ["send-keys", "-t", "verbatim", "-l", "do the first thing"], check=True)
        time.sleep(0.5)
        subprocess.run(tmux + ["send-keys", "-t", "verbatim", "Enter"], check=True)
        [row] = wait_for(lambda: e2e.query(AFTER_A_TURN),
                         "the session never awaited its prompt")
        sid = row["session_id"]
        for n, reply in enumerate(REPLIES, start=2):
            wait_for(lambda: e2e.query(AFTER_A_TURN), "not awaiting")
            r = http.post(f"/api/sessions/{sid}/reply", json={"text": reply})
            assert r.status_code == 200 and r.json()["applied"] == "here", r.text
            wait_for(lambda n=n: len(e2e.server.messages("main")) >= n, f"reply {reply!r} never reached the model")
            assert reply in last_user_text(e2e.server.bodies()[-1]), e2e.describe()
            wait_for(lambda n=n: ("Got the first reply." if n == 2 else "Got the second reply.") in screen(),
                     "the model's answer never showed")

        # The client is killed (no SessionEnd): the session still awaits, and the pane is the shell's now.
        wait_for(lambda: e2e.query(AFTER_A_TURN), "not awaiting")
        pid = subprocess.run(tmux + ["display-message", "-p", "-t", "verbatim", "#{pane_pid}"], capture_output=True,
                             text=True, check=True).stdout.strip()
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            [client] = f.read().split()  # the one program the pane's shell runs: the client
        os.kill(int(client), signal.SIGKILL)
        wait_for(lambda: subprocess.run(tmux + ["display-message", "-p", "-t", "verbatim", "#{pane_current_command}"],
                                        capture_output=True, text=True).stdout.strip() in ("sh", "dash"),
                 "the shell never had the pane back")
        marker = e2e.workspace / "typed-into-the-shell"
        r = http.post(f"/api/sessions/{sid}/reply", json={"text": f"touch {marker}"})
        assert r.status_code == 409 and "not Claude Code" in r.json()["error"], r.text
        time.sleep(0.5)
        assert not marker.exists() and "touch" not in screen()
    finally:
        http.close()
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        subprocess.run([str(BIN_DIR / "agent-hook"), "server", "stop"], env=env, capture_output=True, timeout=60)
