"""What a session costs in processes of ours, counted through the real client.

Every command hook of ours is run through a wrapper that logs its event as it starts (the way the
per-session cost was first counted); http hooks start nothing. A 5-call session over the http
transport starts exactly one process of ours, SessionStart (it makes sure the server runs), while
the server answers everything else; over the command transport the same session starts fourteen.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
from harness import E2E, TRANSPORTS
from model_server import text, tool_use

from agent_hooks.wiring.entries import is_ours

from support.waiting import wait_for

pytestmark = pytest.mark.parametrize("transport", TRANSPORTS, indirect=True)

CALLS = 5
# The tmux variable would turn forwarding on; nothing listens for it here.
NO_FORWARD = {"AGENT_HOOKS__FORWARD__ENABLED": "false"}
LOGGED = """#!/bin/sh
# One line per start of a command hook of ours, then the hook itself.
echo "$HOOK_EVENT" >> "$HOOK_LOG"
exec "$@"
"""


def logged(e2e: E2E, log: Path) -> None:
    """Run every command hook of ours through the logging wrapper."""
    wrapper = e2e.root / "logged-hook"
    wrapper.write_text(LOGGED)
    wrapper.chmod(0o700)
    for event, groups in e2e.settings["hooks"].items():
        for group in groups:
            for h in group["hooks"]:
                if is_ours(h) and h.get("type", "command") == "command":
                    h["command"] = (f"HOOK_EVENT={event} HOOK_LOG={shlex.quote(str(log))} "
                                    f"{shlex.quote(str(wrapper))} sh -c {shlex.quote(h['command'])}")


def detached(home: Path) -> list[str]:
    """Our processes of this store alive now, the resident server's two aside: ``python -m agent_hooks.X``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if f"AGENT_HOOKS_HOME={home}".encode() not in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                continue
        except OSError:
            continue
        if b"-m" in cmd[:-1] and cmd[cmd.index(b"-m") + 1].startswith(b"agent_hooks."):
            module = cmd[cmd.index(b"-m") + 1].decode()
            if module != "agent_hooks.server":
                found.append(module)
    return found


def server_pid(e2e: E2E) -> int | None:
    try:
        return int(json.loads((e2e.agent_home / "server.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def test_a_five_call_session_starts_one_process_of_ours_over_http(e2e: E2E) -> None:
    log = e2e.root / "hook-starts.log"
    logged(e2e, log)
    # A session before: the server is up (over http its SessionStart started it), as on any host after its first.
    e2e.server.set_script([[text("Ready.")]])
    assert e2e.run("Get ready.", env_extra=NO_FORWARD).ok, e2e.describe()
    before = server_pid(e2e)
    assert (before is not None) == (e2e.transport == "http")
    wait_for(lambda: not detached(e2e.agent_home), 10, "no process of ours left from the first session",
             show=lambda: detached(e2e.agent_home))
    log.unlink()

    script: list[Any] = [[tool_use("Bash", {"command": f"echo {n} > f{n}.txt", "description": f"step {n}"},
                                   id=f"toolu_step{n}")] for n in range(CALLS)]
    e2e.server.set_script([*script, [text("All five done.")]])
    run = e2e.run("Run five steps.", env_extra=NO_FORWARD)
    assert run.ok and run.result["result"] == "All five done.", e2e.describe()

    started = log.read_text().split()
    if e2e.transport == "http":
        assert started == ["SessionStart"], started
        assert server_pid(e2e) == before, "the server was running: nothing was started for this session"
    else:  # the same session, every hook a process: SessionStart, the prompt, 5 x (Pre, Post), Stop, SessionEnd
        assert sorted(started) == sorted(["SessionStart", "UserPromptSubmit", *["PreToolUse", "PostToolUse"] * CALLS,
                                          "Stop", "SessionEnd"]), started
    assert detached(e2e.agent_home) == []
    # What the server answered is recorded as the executables record it: the hooks ran, as http hooks.
    sid = run.session_id

    def recorded() -> list[str]:
        return [r["event"] for r in e2e.query("SELECT event FROM session_events WHERE session_id = ? ORDER BY id", sid)]

    wait_for(lambda: "SessionEnd" in recorded(), 10, "the session's end recorded", show=recorded)
    assert {"SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"} <= set(recorded()), recorded()
    calls = e2e.query("SELECT outcome FROM tool_calls WHERE session_id = ?", sid)
    assert calls == [{"outcome": "success"}] * CALLS, calls
    (session,) = e2e.query("SELECT state FROM sessions WHERE session_id = ?", sid)
    assert session["state"] == "ended"
    assert e2e.errors() == []
