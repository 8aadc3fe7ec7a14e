"""Cleanup at Stop: configured commands (e.g. stop processes the agent started) with results recorded.

Decision: the commands run DETACHED, in a worker started by Stop
(``python -m agent_hooks.features.cleanup SESSION_ID``), one after another,
each killed with its process group after ``cleanup.timeout_s``. Stop itself
only spawns the worker (a few ms), so no command, however slow, can push Stop
past its deadline or hold the agent; the worker writes one ``cleanup_runs``
row per command (exit code, timed out, output tail, duration).

A command is an argv list or a shell string (run with ``/bin/sh -c``). It
runs in the session's cwd (when that is a directory) with
``AGENT_HOOKS_SESSION_ID``, ``AGENT_HOOKS_SESSION_CWD`` and
``AGENT_HOOKS_NESTED=1`` added to the environment.
"""

from __future__ import annotations

import json
import os
import time

from agent_hooks.features import detach
from agent_hooks.payload import Payload

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MODULE = "agent_hooks.features.cleanup"
TAIL_CHARS = 2000


def after_stop(payload: Payload, env: Any, config: dict[str, Any]) -> None:
    """Start the cleanup worker when commands are configured (never waits for it)."""
    if config["cleanup"]["commands"] and not detach.nested(env):
        detach.spawn(MODULE, [payload.session_id], env)


def command_text(command: list[str] | str) -> str:
    return command if isinstance(command, str) else json.dumps(command)


def run_all(conn: Any, session_id: str, cwd: str | None, env: Any, config: dict[str, Any]) -> list[dict[str, Any]]:
    """Run every configured command in order and record each result; returns the results."""
    child_env = dict(env)
    child_env.update({"AGENT_HOOKS_SESSION_ID": session_id, "AGENT_HOOKS_SESSION_CWD": cwd or "",
                      detach.NESTED_VAR: "1"})
    results = []
    for command in config["cleanup"]["commands"]:
        if not isinstance(command, (str, list)) or not command:
            continue
        started = time.time()
        res = detach.run_bounded(command if isinstance(command, str) else [str(c) for c in command],
                                 float(config["cleanup"]["timeout_s"]), env=child_env, cwd=cwd,
                                 tail_chars=TAIL_CHARS)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "INSERT INTO cleanup_runs (session_id, command, exit_code, timed_out, output_tail, duration_ms,"
                " started_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, command_text(command), res["exit_code"], int(res["timed_out"]), res["output_tail"],
                 res["duration_ms"], started),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        results.append({"command": command_text(command), **res})
    return results


def _work(session_id: str, env: Any, paths: Any, config: dict[str, Any]) -> int:
    from agent_hooks.log import log_error
    from agent_hooks.store import Store

    store = Store(paths.store, int(config["runtime"]["busy_timeout_ms"]))
    try:
        row = store.conn.execute("SELECT cwd FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        cwd = row[0] if row and row[0] and os.path.isdir(row[0]) else None
        results = run_all(store.conn, session_id, cwd, env, config)
    finally:
        store.close()
    for res in results:
        if res["exit_code"] != 0:
            why = "timed out" if res["timed_out"] else f"exit {res['exit_code']}"
            log_error(paths, "Cleanup", "cleanup", f"{res['command']}: {why}", session_id)
    return 0


def main(argv: list[str] | None = None) -> int:
    # One cleanup at a time per session: Stop fires every turn, and a slow command
    # must not run twice side by side; a Stop that finds one running leaves it the work.
    return detach.worker_main(argv, MODULE, "cleanup", "Cleanup", _work)


if __name__ == "__main__":
    raise SystemExit(main())
