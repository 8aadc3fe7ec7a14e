"""Helpers for the user-handler tests: handler directories written on disk, payloads."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any


def write_handler(parent: Path, name: str, events: list[str] | str = "PreToolUse", code: str | None = None,
                  executable: str | None = None, **meta: Any) -> Path:
    """A handler directory ``parent/name``: HOOK.md with ``meta`` and handler.py (``code``) or ``handler``."""
    d = parent / name
    d.mkdir(parents=True, exist_ok=True)
    front = {"name": name, "description": f"test handler {name}", "events": events, **meta}
    lines = ["---"] + [f"{k}: {json.dumps(v)}" for k, v in front.items()] + ["---", "", f"# {name}", ""]
    (d / "HOOK.md").write_text("\n".join(lines))
    if executable is not None:
        exe = d / "handler"
        exe.write_text(textwrap.dedent(executable).lstrip())
        exe.chmod(0o700)
    else:
        (d / "handler.py").write_text(textwrap.dedent(code or "def handle(event):\n    return None\n"))
    return d


def pre_payload(command: str, session_id: str = "sess-h", tool_use_id: str = "toolu_1", cwd: str = "/tmp",
                tool: str = "Bash") -> dict[str, Any]:
    return {"session_id": session_id, "hook_event_name": "PreToolUse", "cwd": cwd, "tool_name": tool,
            "tool_input": {"command": command, "description": "x"}, "tool_use_id": tool_use_id,
            "transcript_path": "", "permission_mode": "default"}


def answer(proc: Any) -> dict[str, Any] | None:
    out = proc.stdout.decode().strip()
    return json.loads(out) if out else None


def specific(proc: Any) -> dict[str, Any]:
    return (answer(proc) or {}).get("hookSpecificOutput", {})


def old_mtimes(root: Path) -> None:
    """Put every file under ``root`` a minute in the past (a stamp that cannot race a rebuild)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames + ["."]:
            p = os.path.join(dirpath, n)
            st = os.stat(p)
            os.utime(p, (st.st_atime - 60, st.st_mtime - 60))
