"""Helpers for the guards tests: run the installed console scripts on fixture payloads."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from typing import Any

from support.repo import FIXTURES
from support.scripts import script


def fixture(name: str) -> dict[str, Any]:
    """A payload the real client 2.1.197 sent (the shared fixtures, as they are)."""
    return json.loads((FIXTURES / f"{name}.json").read_text())


def hook(event_script: str, payload: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """Run one hook executable; its stdout parsed (None when it printed nothing)."""
    proc = subprocess.run(
        [script(f"agent-hook-{event_script}")], input=json.dumps(payload).encode(),
        capture_output=True, env={**os.environ, **(env or {})}, timeout=30,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode().strip()
    return json.loads(out) if out else None


def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([script("agent-hook"), *args], capture_output=True, text=True, timeout=30)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def pre(session_id: str, tool_use_id: str, tool_input: dict[str, Any], tool_name: str = "Bash",
        env: dict[str, str] | None = None) -> dict[str, Any] | None:
    payload = copy.deepcopy(fixture("PreToolUse-Bash"))
    payload.update(session_id=session_id, tool_use_id=tool_use_id, tool_name=tool_name, tool_input=tool_input)
    return hook("pre-tool-use", payload, env)


def post(session_id: str, tool_use_id: str, tool_input: dict[str, Any], stdout: str, ok: bool = True,
         env: dict[str, str] | None = None) -> None:
    if ok:
        payload = copy.deepcopy(fixture("PostToolUse-Bash"))
        payload["tool_response"]["stdout"] = stdout
    else:
        payload = copy.deepcopy(fixture("PostToolUseFailure-Bash"))
        payload["error"] = stdout
    payload.update(session_id=session_id, tool_use_id=tool_use_id, tool_input=tool_input)
    assert hook("post-tool-use" if ok else "post-tool-use-failure", payload, env) is None


def context_of(out: dict[str, Any] | None) -> str | None:
    return (out or {}).get("hookSpecificOutput", {}).get("additionalContext")


def denial_of(out: dict[str, Any] | None) -> str | None:
    spec = (out or {}).get("hookSpecificOutput", {})
    return spec.get("permissionDecisionReason") if spec.get("permissionDecision") == "deny" else None
