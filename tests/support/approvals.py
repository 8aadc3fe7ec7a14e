"""Approval requests for tests: the captured permission dialog, a question built on it, and a hook
executable started in the background that holds its request until it is answered."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from support.repo import fixture_payload
from support.scripts import BIN, EXECUTABLES

PERMISSION = fixture_payload("permission_request_bash.json", "2.1.330")
QUESTIONS = [
    {"question": "Which database should we use?", "header": "Database", "multiSelect": False,
     "options": [{"label": "SQLite", "description": "a file"}, {"label": "Postgres", "description": "a server"}]},
    {"question": "Which checks should run?", "header": "Checks", "multiSelect": True,
     "options": [{"label": "lint"}, {"label": "tests"}, {"label": "types"}]},
]
QUESTION = {**PERMISSION, "tool_name": "AskUserQuestion", "tool_input": {"questions": QUESTIONS},
            "permission_suggestions": []}


class Held:
    """A hook executable started in the background with its payload, holding its request."""

    def __init__(self, payload: dict[str, Any], env: dict[str, str] | None = None) -> None:
        full = {**os.environ, "AGENT_HOOKS__APPROVALS__WAIT_S": "30", **(env or {})}
        self.proc = subprocess.Popen([str(BIN / EXECUTABLES[payload["hook_event_name"]])], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(payload).encode())
        self.proc.stdin.close()
        self.proc.stdin = None  # communicate() must not flush it again

    def answer(self, timeout: float = 40) -> dict[str, Any] | None:
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, err
        return json.loads(out) if out.strip() else None
