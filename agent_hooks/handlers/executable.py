"""Calling an executable handler (any language): the event JSON on its stdin, the result JSON on its stdout.

Apart from run.py so that a hook with in-process handlers only never imports subprocess.
The child runs in a session of its own, so a timeout kills it and everything it started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

# Annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_OUTPUT_BYTES = 1024 * 1024


def call_exec(h: dict[str, Any], event: dict[str, Any], timeout_s: float, env: Any,
              cwd: str | None) -> tuple[Any, str | None]:
    """(result, error) of an executable handler, within ``timeout_s`` (then killed with its process group)."""
    child_env = dict(env)
    child_env.update({"AGENT_HOOKS_HANDLER": h["name"], "AGENT_HOOKS_HANDLER_DIR": h["dir"],
                      "AGENT_HOOKS_NESTED": "1"})
    extra = event["config"].get("env")
    if isinstance(extra, dict):
        child_env.update({str(k): str(v) for k, v in extra.items()})
    workdir = cwd if cwd and os.path.isdir(cwd) else h["dir"]
    # Before the child starts: a config value JSON cannot take (a TOML date) goes as text.
    stdin = json.dumps(event, default=str).encode("utf-8", "surrogatepass")
    try:
        proc = subprocess.Popen([h["entry"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=workdir, env=child_env, start_new_session=True)
    except OSError as exc:
        return None, f"could not start: {exc}"
    try:
        stdout, stderr = proc.communicate(stdin, timeout=max(0.001, timeout_s))
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.communicate(timeout=0.2)
        except (subprocess.TimeoutExpired, OSError, ValueError):
            pass
        return None, f"timed out after {int(timeout_s * 1000)} ms (killed)"
    if proc.returncode != 0:
        tail = " ".join(stderr.decode("utf-8", "replace").split())[-300:]
        return None, f"exited {proc.returncode}" + (f": {tail}" if tail else "")
    if len(stdout) > MAX_OUTPUT_BYTES:
        return None, f"printed {len(stdout)} bytes, over the {MAX_OUTPUT_BYTES}-byte limit"
    text = stdout.decode("utf-8", "replace").strip()
    if not text:
        return None, None
    try:
        return json.loads(text), None
    except ValueError:
        return None, f"printed something that is not JSON: {text[:120]!r}"
