"""A populated store for CLI tests: sessions, a task, identity, memory, a summary, an error, dead letters.

Everything goes through the installed executables (hooks and `agent-hook`), as a user's store fills up.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from agent_hooks.features import approvals
from helpers import agent_hook, fixture_payload, run_exe, run_hook

SESSION_A = fixture_payload("Stop.json")["session_id"]  # the fixtures' session (the "tidy notes" one)
# Shares A's first four characters (an ambiguous prefix), and differs from the fifth on.
_OTHER = "9" if SESSION_A[4] != "9" else "8"
SESSION_B = SESSION_A[:4] + _OTHER * 4 + "-0000-4000-8000-000000000001"
SESSION_C = "c0ffee00-0000-4000-8000-000000000002"
APPROVAL_ALLOW = "ap-tier-allow"
APPROVAL_DENY = "ap-tier-deny"
SOUL = "\n".join(f"- soul principle {i}: keep the fleet honest and the store tidy." for i in range(12)) + "\n"


def populate(home: Path, tmp: Path) -> dict[str, Any]:
    """Fill the store under ``home``; what was put there."""
    ws = tmp / "workspace"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "deploy.md").write_text("# Deploy notes\nThe deploy runbook: migrate, then restart the drainer.\n")
    (ws / "memory" / "other.md").write_text("# Other\nNothing about that topic here.\n")
    env_a = {"OPTIMALOS_SESSION_TMUX": "agent-a", "AGENT_HOOKS_AGENT": "ada", "AGENT_HOOKS_TASK_ID": "build-1"}
    for name in ("SessionStart-startup.json", "UserPromptSubmit.json", "PreToolUse-Edit.json",
                 "PostToolUse-Edit.json", "Stop.json"):
        assert run_hook(fixture_payload(name), env=env_a).returncode == 0
    for sid, agent, tmux in ((SESSION_B, "bob", "agent-b"), (SESSION_C, "cy", "agent-c")):
        start = dict(fixture_payload("SessionStart-startup.json"), session_id=sid, cwd=str(ws))
        assert run_hook(start, env={"OPTIMALOS_SESSION_TMUX": tmux, "AGENT_HOOKS_AGENT": agent}).returncode == 0
    end = dict(fixture_payload("SessionEnd.json"), session_id=SESSION_C, cwd=str(ws))
    assert run_hook(end, env={"AGENT_HOOKS_AGENT": "cy"}).returncode == 0
    agent_hook("task", "create", "docs-2", "-d", "Write the docs")
    soul = tmp / "SOUL.md"
    soul.write_text(SOUL)
    agent_hook("identity", "set", "ada", "SOUL.md", "--file", str(soul))
    soul.write_text(SOUL + "- one more principle\n")
    agent_hook("identity", "set", "ada", "SOUL.md", "--file", str(soul))
    agent_hook("memory", "reindex", "--workspace", str(ws), "--agent", "bob")
    run_exe("agent-hook-stop", b"not json")  # one error the hooks failed open on
    # Two dead letters and one queued event, as a failed delivery leaves them.
    conn = sqlite3.connect(home / "store.db")
    for i, state in enumerate(("dead", "dead", "queued")):
        conn.execute("INSERT INTO outbox (event_id, session_key, event, body, created_at, state, attempts, last_error)"
                     " VALUES (?, 'agent-a', 'start', ?, 1000.0, ?, 5, 'HTTP 500')",
                     (f"ev-{i}", json.dumps({"event": "start"}), state))
    # Two permission dialogs still waiting for a person (for approve and deny).
    for aid, command in ((APPROVAL_ALLOW, "make deploy"), (APPROVAL_DENY, "rm -rf build")):
        made = approvals.insert(conn, session_id=SESSION_A, kind="permission", tool_name="Bash",
                                tool_input={"command": command}, at=time.time(), wait_s=3600)
        conn.execute("UPDATE approvals SET id = ? WHERE id = ?", (aid, made))
    conn.commit()
    conn.close()
    return {"workspace": ws, "soul": soul}
