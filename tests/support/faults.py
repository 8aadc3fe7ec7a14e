"""The fault run shared by tests/server/test_server_faults.py and bench/bench_supervisor.py.

A real server (`agent-hook server start`) and the http wiring `agent-hook settings install
--transport http` writes; N sessions call it as Claude Code does (PreToolUse, the tool, PostToolUse,
the model's pause; a new connection per call) while the server's worker is killed with SIGKILL
every few seconds. Each session acts on an answer as the client does: a deny stops the tool; a
call that fails (refused, cut off, timed out) lets the tool run unless the installed PreToolUse
entry says ``"onFailure": "block"``. Counted:

* refused: calls whose connection was refused (nothing listened);
* cut off: calls in flight when their worker died (reset, or no answer);
* answered without a record: a 200 whose call is not in the store at the end (spool replayed);
* records lost: rows seen in the store during the run that are gone, or undone, at the end;
* unguarded: tools that ran although their PreToolUse gave no answer.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from support.ports import free_port
from support.scripts import BIN


def _payload(event: str, session: str, n: int, cwd: str) -> bytes:
    doc: dict[str, Any] = {
        "session_id": session, "transcript_path": f"{cwd}/t.jsonl", "cwd": cwd, "permission_mode": "default",
        "hook_event_name": event, "tool_name": "Bash", "tool_use_id": f"toolu_{session}_{n:05d}",
        "tool_input": {"command": f"echo {session} {n}", "description": "fault run"},
    }
    if event == "PostToolUse":
        doc["tool_response"] = {"stdout": str(n), "stderr": "", "interrupted": False}
        doc["duration_ms"] = 50
    return json.dumps(doc).encode()


def _post(port: int, event: str, body: bytes, timeout: float) -> tuple[str, bytes]:
    """("answered", body) | ("refused", b"") | ("cut off", b"") for one call on a new connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", f"/hooks/{event}", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        return ("answered", data) if resp.status == 200 else ("cut off", b"")
    except ConnectionRefusedError:
        return "refused", b""
    except (OSError, http.client.HTTPException):
        return "cut off", b""
    finally:
        conn.close()


def _denied(body: bytes) -> bool:
    try:
        doc = json.loads(body) if body.strip() else {}
    except ValueError:
        return False
    return (doc.get("hookSpecificOutput") or {}).get("permissionDecision") == "deny"


def _rows(store: Path) -> dict[str, str | None]:
    """tool_use_id -> outcome of every tool call row (empty while the store is missing or busy)."""
    if not store.exists():
        return {}
    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
        try:
            return {r[0]: r[1] for r in conn.execute("SELECT tool_use_id, outcome FROM tool_calls")}
        finally:
            conn.close()
    except sqlite3.Error:
        return {}


def run_faults(root: Path, sessions: int = 20, duration_s: float = 30.0, kill_every_s: float = 2.0,
               fail_closed: bool = False, tool_s: float = 0.05, model_s: float = 0.2) -> dict[str, Any]:
    """One fault run under ``root`` (its own state directory and HOME); the counts (module docstring)."""
    home, user = root / "state", root / "user"
    (user / ".claude").mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
    env.update({"AGENT_HOOKS_HOME": str(home), "HOME": str(user), "AGENT_HOOKS__SERVE__PORT": str(port),
                "AGENT_HOOKS__FORWARD__ENABLED": "false",
                "AGENT_HOOKS__GUARDS__FAIL_CLOSED": "true" if fail_closed else "false"})

    def agent_hook(*args: str) -> str:
        return subprocess.run([str(BIN / "agent-hook"), *args], env=env, check=True, capture_output=True,
                              text=True, timeout=120).stdout

    agent_hook("settings", "install", "--transport", "http")
    settings = json.loads((user / ".claude" / "settings.json").read_text())
    [pre] = [h for g in settings["hooks"]["PreToolUse"] for h in g["hooks"] if h.get("type") == "http"]
    block_on_failure = pre.get("onFailure") == "block"
    timeout = float(pre.get("timeout", 10))
    agent_hook("server", "start")
    store = home / "store.db"
    lock = threading.Lock()
    counts = {"calls": 0, "answered": 0, "refused": 0, "cut_off": 0, "denied": 0, "blocked": 0,
              "tools_run": 0, "unguarded": 0}
    answered_ids: dict[str, set[str]] = {"PreToolUse": set(), "PostToolUse": set()}
    stop = threading.Event()
    seen: dict[str, str | None] = {}

    def note(what: str, n: int = 1) -> None:
        with lock:
            counts[what] += n

    def call(event: str, session: str, n: int) -> tuple[str, bytes]:
        outcome, body = _post(port, event, _payload(event, session, n, str(root)), timeout)
        note("calls")
        note({"answered": "answered", "refused": "refused", "cut off": "cut_off"}[outcome])
        if outcome == "answered":
            with lock:
                answered_ids[event].add(f"toolu_{session}_{n:05d}")
        return outcome, body

    def session_loop(i: int) -> None:
        rnd = random.Random(i)
        session = f"fault{i:02d}"
        n = 0
        while not stop.is_set():
            n += 1
            outcome, body = call("PreToolUse", session, n)
            if outcome == "answered" and _denied(body):
                note("denied")
            elif outcome != "answered" and block_on_failure:
                note("blocked")  # the client blocks the tool: a hook error for the model
            else:
                note("tools_run")
                if outcome != "answered":
                    note("unguarded")
                time.sleep(tool_s * rnd.uniform(0.5, 1.5))
                call("PostToolUse", session, n)
            time.sleep(model_s * rnd.uniform(0.5, 1.5))

    def killer() -> list[int]:
        killed: list[int] = []
        while not stop.wait(kill_every_s):
            try:
                pid = json.loads((home / "server.json").read_text()).get("worker_pid")
            except (OSError, ValueError):
                continue
            if isinstance(pid, int) and pid not in killed:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
        return killed

    def monitor() -> None:
        while not stop.wait(0.5):
            for k, v in _rows(store).items():
                if seen.get(k) in (None, "pending"):
                    seen[k] = v

    killed: list[int] = []
    threads = [threading.Thread(target=session_loop, args=(i,)) for i in range(sessions)]
    threads.append(threading.Thread(target=lambda: killed.extend(killer())))
    threads.append(threading.Thread(target=monitor))
    began = time.monotonic()
    try:
        for t in threads:
            t.start()
        time.sleep(duration_s)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    elapsed = time.monotonic() - began
    try:
        status = json.loads(agent_hook("server", "status", "--json"))
        time.sleep(1.0)  # calls a killed worker left to its thread are committed by now, or spooled
        # Spooled calls (a busy store) are replayed as the next hook or the drainer would.
        from agent_hooks import config as config_mod
        from agent_hooks import spool
        from agent_hooks.paths import Paths

        paths = Paths(env)
        config, _ = config_mod.load_lenient(paths, env)
        spool.replay(paths, config)
        final = _rows(store)
    finally:
        agent_hook("server", "stop")
    no_record = len([i for i in answered_ids["PreToolUse"] if i not in final])
    no_record += len([i for i in answered_ids["PostToolUse"] if final.get(i) in (None, "pending")])
    lost = len([k for k, v in seen.items() if k not in final or (v not in (None, "pending")
                                                                      and final[k] in (None, "pending"))])
    return {**counts, "answered_without_record": no_record, "records_lost": lost, "kills": len(killed),
            "restarts": status.get("restarts"), "up_at_end": status.get("up"), "fail_closed": fail_closed,
            "on_failure_block": block_on_failure, "sessions": sessions, "seconds": round(elapsed, 1),
            "rows": len(final)}
