"""A permission dialog of the real interactive client reaches a JSON webhook channel (docs/notifications.md).

The client (2.1.332, under tmux, as tests/e2e/test_approvals_e2e.py drives it) asks about a Bash call;
its PermissionRequest hook (the command transport) holds the request in the store, and this host's
resident server tells the channel: within 3 s of the request, naming the command; again every
renotify_s while nobody answers; and never after the answer (here `agent-hook approve`).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator

import claude_client
import pytest
from harness import E2E
from model_server import text, tool_use
from test_approvals_e2e import INTERACTIVE_VERSION, Terminal, cli, pending

from support.center import Center
from support.receiver import Receiver
from support.waiting import wait_for

COMMAND = "touch notified.txt"


@pytest.fixture
def terminal(e2e: E2E) -> Iterator[Terminal]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is needed to drive the interactive client")
    try:
        claude = claude_client.ensure_client(INTERACTIVE_VERSION)
    except claude_client.InstallError as exc:
        pytest.skip(f"PermissionRequest racing the dialog was measured on Claude Code {INTERACTIVE_VERSION}: {exc}")
    term = Terminal(e2e, claude)
    try:
        yield term
    finally:
        term.close()


def test_a_dialog_reaches_the_channel_within_3s_again_while_waiting_and_never_after(e2e: E2E,
                                                                                   terminal: Terminal) -> None:
    with Receiver() as receiver:
        channels = json.dumps([{"url": receiver.url, "name": "webhook"}])
        center = Center(e2e.agent_home, env={"HOME": str(e2e.home), "AGENT_HOOKS__NOTIFY__CHANNELS": channels,
                                             "AGENT_HOOKS__NOTIFY__RENOTIFY_S": "3",
                                             "AGENT_HOOKS__FLEET__HOST": "e2e-host"}).start()
        try:
            e2e.server.set_script([[tool_use("Bash", {"command": COMMAND, "description": "make it"})],
                                   [text("made it")]])
            terminal.prompt("make the file")
            terminal.wait_for("Do you want to proceed?")
            [row] = wait_for(lambda: pending(e2e), 10, what="the request listed", step=0.05)
            [first] = receiver.wait(1, timeout=5)
            took = receiver.times[0] - row["created_at"]
            assert took < 3.0, f"the channel got it {took:.2f} s after the request"
            assert COMMAND in first["message"] and "e2e-host" in first["title"], first
            assert f"#request={row['id']}" in first["message"]

            second = receiver.wait(2, timeout=8)[1]
            assert second["title"].startswith("Reminder 1:") and COMMAND in second["message"]

            assert "allowed" in cli(e2e, "approve", row["id"]).stdout
            wait_for(lambda: (e2e.workspace / "notified.txt").exists(), 15, what="the tool to run", step=0.1)
            terminal.wait_for("made it")
            told = len(receiver.bodies())
            time.sleep(4.0)  # past the next renotify
            assert len(receiver.bodies()) == told, receiver.bodies()
            [shown] = json.loads(cli(e2e, "approvals", "--all", "--json").stdout)["approvals"]
            assert shown["notifications"][0]["state"] == "sent" and shown["notifications"][0]["sends"] == told
        finally:
            center.stop()
