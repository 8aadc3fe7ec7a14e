"""The CLI's calls to a command center (cli/common.py center_json): every command that talks to one
(cancel, uncancel, approvals, approve, launch --server, fleet join) sends its request with the same
headers and reads the answer the same way. Against a real HTTP server on loopback that answers 500 with
a JSON body that is not an object (as a proxy in front of a center may): each says the center, the status
and what it answered, and none stops on a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.receiver import Receiver
from support.scripts import agent_hook

COMMANDS = {
    "cancel": ["cancel", "--server", "{base}", "s-1", "--reason", "wrong branch"],
    "uncancel": ["uncancel", "--server", "{base}", "s-1"],
    "approvals": ["approvals", "--server", "{base}"],
    "approve": ["approve", "ap-1", "--server", "{base}"],
    "launch": ["launch", "--server", "{base}", "--cwd", "/tmp", "--", "fix it"],
    "join": ["fleet", "join", "{base}", "--code", "ABCD-EFGH"],
}


@pytest.fixture
def proxy() -> Iterator[Receiver]:
    with Receiver(path="/") as rec:
        rec.status = 500
        rec.answer = b'["upstream", "went away"]'
        yield rec


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_center_that_answers_no_json_object_is_named_with_its_status(command: str, proxy: Receiver,
                                                                      hooks_home: Path) -> None:
    base = f"http://127.0.0.1:{proxy.port}"
    args = [a.replace("{base}", base) for a in COMMANDS[command]]
    proc = agent_hook(*args, env={"AGENT_HOOKS_FLEET_TOKEN": "owner-token"}, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{base}: HTTP 500: " in proc.stderr and "went away" in proc.stderr, proc.stderr
    [(headers, _body)] = proxy.raw
    # The owner's token to a center this host was not paired with; a code alone to join one.
    assert headers.get("authorization") == (None if command == "join" else "Bearer owner-token"), headers
