"""A populated store for CLI tests: sessions, a task, identity, memory, a summary, an error, dead letters.

Everything goes through the installed executables (hooks and `agent-hook`), as a user's store fills up.
Filling one takes about fifteen processes (seconds on a busy machine), so each test process fills
one template and every test gets its own copy of it (see ``populate``).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_hooks.features import approvals

from support.repo import fixture_payload
from support.scripts import agent_hook, run_exe, run_hook

SESSION_A = fixture_payload("Stop.json")["session_id"]  # the fixtures' session (the "tidy notes" one)
# Shares A's first four characters (an ambiguous prefix), and differs from the fifth on.
_OTHER = "9" if SESSION_A[4] != "9" else "8"
SESSION_B = SESSION_A[:4] + _OTHER * 4 + "-0000-4000-8000-000000000001"
SESSION_C = "c0ffee00-0000-4000-8000-000000000002"
APPROVAL_ALLOW = "ap-tier-allow"
APPROVAL_DENY = "ap-tier-deny"
SOUL = "\n".join(f"- soul principle {i}: keep the fleet honest and the store tidy." for i in range(12)) + "\n"


# A template older than this is filled again: its sessions' times must stay recent (live, not stalled).
TEMPLATE_MAX_AGE_S = 120.0
_template: dict[str, Any] = {}


def populate(home: Path, tmp: Path) -> dict[str, Any]:
    """Give ``home`` (the test's AGENT_HOOKS_HOME) and the test's HOME a filled store; what was put there.

    The store, logs and HOME are copies of a template this process filled with ``fill``: private
    to the test, byte for byte what the executables wrote. The workspace and SOUL.md the store
    names stay the template's (the tests only read them).
    """
    tpl = _template.get("dirs")
    if tpl is None or time.monotonic() - _template["at"] > TEMPLATE_MAX_AGE_S:
        root = Path(tempfile.mkdtemp(prefix="agent-hooks-populated-"))
        atexit.register(shutil.rmtree, root, True)
        tpl_home, tpl_user = root / "agent-hooks-home", root / "user-home"
        tpl_user.mkdir()
        made = fill(tpl_home, root, {"AGENT_HOOKS_HOME": str(tpl_home), "HOME": str(tpl_user)})
        _template.update(dirs=(tpl_home, tpl_user), made=made, at=time.monotonic())
        tpl = _template["dirs"]
    tpl_home, tpl_user = tpl
    shutil.copytree(tpl_home, home, symlinks=True, dirs_exist_ok=True)
    shutil.copytree(tpl_user, Path(os.environ["HOME"]), symlinks=True, dirs_exist_ok=True)
    return dict(_template["made"])


def fill(home: Path, tmp: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Fill the store under ``home`` through the executables, run with ``env`` over the test's
    environment (it must name ``home`` as AGENT_HOOKS_HOME); what was put there."""
    base = dict(env or {})
    ws = tmp / "workspace"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "deploy.md").write_text("# Deploy notes\nThe deploy runbook: migrate, then restart the drainer.\n")
    (ws / "memory" / "other.md").write_text("# Other\nNothing about that topic here.\n")
    env_a = {"OPTIMALOS_SESSION_TMUX": "agent-a", "AGENT_HOOKS_AGENT": "ada", "AGENT_HOOKS_TASK_ID": "build-1"}
    for name in ("SessionStart-startup.json", "UserPromptSubmit.json", "PreToolUse-Edit.json",
                 "PostToolUse-Edit.json", "Stop.json"):
        assert run_hook(fixture_payload(name), env={**base, **env_a}).returncode == 0
    for sid, agent, tmux in ((SESSION_B, "bob", "agent-b"), (SESSION_C, "cy", "agent-c")):
        start = dict(fixture_payload("SessionStart-startup.json"), session_id=sid, cwd=str(ws))
        assert run_hook(start, env={**base, "OPTIMALOS_SESSION_TMUX": tmux, "AGENT_HOOKS_AGENT": agent}).returncode == 0
    end = dict(fixture_payload("SessionEnd.json"), session_id=SESSION_C, cwd=str(ws))
    assert run_hook(end, env={**base, "AGENT_HOOKS_AGENT": "cy"}).returncode == 0
    agent_hook("task", "create", "docs-2", "-d", "Write the docs", env=base)
    soul = tmp / "SOUL.md"
    soul.write_text(SOUL)
    agent_hook("identity", "set", "ada", "SOUL.md", "--file", str(soul), env=base)
    soul.write_text(SOUL + "- one more principle\n")
    agent_hook("identity", "set", "ada", "SOUL.md", "--file", str(soul), env=base)
    agent_hook("memory", "reindex", "--workspace", str(ws), "--agent", "bob", env=base)
    run_exe("agent-hook-stop", b"not json", env=base)  # one error the hooks failed open on
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
