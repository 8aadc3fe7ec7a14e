"""Run area: every executable run as Claude Code would, in a scratch store, timed."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from typing import Any

from agent_hooks import config as config_mod
from agent_hooks.checks import FAIL, OK, WARN, Check, Context, check
from agent_hooks.paths import Paths
from agent_hooks.wiring.table import HOOKS


@check("run", order=90)
def synthetic_run(ctx: Context) -> list[Check]:
    """The synthetic session (skipped with --no-run)."""
    if not ctx.synthetic:
        return []
    return check_synthetic(ctx.wired, ctx.bin_dir, ctx.cfg)


def sample_payloads(session_id: str, cwd: str) -> list[dict[str, Any]]:
    """One realistic payload per event, in the order of a session (shapes from Claude Code 2.1.197)."""
    common: dict[str, Any] = {"session_id": session_id, "transcript_path": os.path.join(cwd, f"{session_id}.jsonl"),
                              "cwd": cwd}
    tool = {**common, "permission_mode": "default", "prompt_id": "doctor-prompt", "tool_name": "Bash"}
    ok_call = {"command": "echo doctor", "description": "doctor's synthetic call"}
    bad_call = {"command": "exit 3", "description": "doctor's failing call"}
    return [
        {**common, "hook_event_name": "SessionStart", "source": "startup", "model": "claude-sonnet-4-5"},
        {**common, "hook_event_name": "UserPromptSubmit", "permission_mode": "default",
         "prompt": "agent-hook doctor: synthetic prompt"},
        {**tool, "hook_event_name": "PreToolUse", "tool_input": ok_call, "tool_use_id": "toolu_doctor_1"},
        {**tool, "hook_event_name": "PostToolUse", "tool_input": ok_call, "tool_use_id": "toolu_doctor_1",
         "tool_response": {"stdout": "doctor", "stderr": "", "interrupted": False, "isImage": False},
         "duration_ms": 5},
        {**tool, "hook_event_name": "PreToolUse", "tool_input": bad_call, "tool_use_id": "toolu_doctor_2"},
        {**tool, "hook_event_name": "PostToolUseFailure", "tool_input": bad_call, "tool_use_id": "toolu_doctor_2",
         "error": "Exit code 3", "is_interrupt": False, "duration_ms": 4},
        {**common, "hook_event_name": "Notification", "message": "Claude needs your permission to use Bash",
         "title": "Permission needed", "notification_type": "permission_prompt"},
        {**common, "hook_event_name": "PreCompact", "trigger": "manual", "custom_instructions": ""},
        {**common, "hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "Done."},
    ] + newer_payloads(common, ok_call) + [
        {**common, "hook_event_name": "SessionEnd", "reason": "other"},
    ]


def newer_payloads(common: dict[str, Any], call: dict[str, Any]) -> list[dict[str, Any]]:
    """Events of newer clients (shapes captured from 2.1.330, tests/fixtures/claude-code-2.1.330)."""
    agent = {**common, "agent_id": "adoctor0000000001", "agent_type": "general-purpose"}
    return [
        {**common, "hook_event_name": "PermissionRequest", "permission_mode": "default", "tool_name": "Bash",
         "tool_input": call, "permission_suggestions": []},
        {**common, "hook_event_name": "PermissionDenied", "tool_name": "Bash", "tool_input": call},
        {**agent, "hook_event_name": "SubagentStart"},
        {**agent, "hook_event_name": "SubagentStop", "stop_hook_active": False, "last_assistant_message": "Done."},
        {**common, "hook_event_name": "PostCompact", "trigger": "manual", "compact_summary": "Summary."},
        {**common, "hook_event_name": "StopFailure", "error": "rate_limit",
         "last_assistant_message": "API Error: Request rejected (429)"},
        # Captured from 2.1.332 (tests/fixtures/claude-code-2.1.332).
        {**common, "hook_event_name": "Elicitation", "mcp_server_name": "doctor", "message": "Which one?",
         "mode": "form", "requested_schema": {"type": "object", "properties": {}}},
        {**common, "hook_event_name": "ElicitationResult", "mcp_server_name": "doctor", "mode": "form",
         "action": "cancel"},
    ]


def _scratch_env(scratch: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AGENT_HOOKS") and k not in ("OPTIMALOS_SESSION_TMUX",)}
    env["AGENT_HOOKS_HOME"] = scratch
    env["CLAUDE_PROJECT_DIR"] = scratch
    # The scratch run must not send synthetic events to the user's command center.
    if "enabled" in config_mod.DEFAULTS.get("forward", {}):
        env["AGENT_HOOKS__FORWARD__ENABLED"] = "false"
    # Nor start a resident server for the scratch store (SessionStart --serve would).
    env["AGENT_HOOKS__SERVE__AUTOSTART"] = "false"
    # The scratch PermissionRequest would otherwise hold its made-up dialog open for a person
    # (docs/approvals.md) and time out: the run checks the hooks, not that wait.
    env["AGENT_HOOKS__APPROVALS__WAIT_S"] = "0"
    for var in ("AGENT_HOOKS_DEADLINE_MS", "AGENT_HOOKS_BUSY_TIMEOUT_MS"):
        if var in os.environ:
            env[var] = os.environ[var]
    return env


def _time_run(argv: list[str], stdin: bytes, env: dict[str, str], cwd: str, limit_s: float) -> tuple[float, Any]:
    started = time.perf_counter()
    try:
        proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, timeout=limit_s)
    except subprocess.TimeoutExpired:
        return (time.perf_counter() - started) * 1000, None
    return (time.perf_counter() - started) * 1000, proc


def check_synthetic(wired: dict[str, list[str]], bin_dir: str, cfg: dict[str, Any]) -> list[Check]:
    """Run every executable, as Claude Code would (``sh -c`` on the wired command), in a scratch store."""
    budget = float(cfg["doctor"]["latency_budget_ms"])
    deadline = float(cfg["runtime"]["deadline_ms"])
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="agent-hooks-doctor-") as scratch:
        os.chmod(scratch, 0o700)
        env = _scratch_env(scratch)
        scratch_paths = Paths(env)
        # Migrate first, so the timings are of ordinary calls, not of the store's creation.
        from agent_hooks.store import bring_current

        bring_current(scratch_paths.store)
        base_ms, _ = _time_run([sys.executable, "-c", "import json, sqlite3"], b"", env, scratch, 30)
        session_id = f"doctor-{os.getpid()}-{int(time.time())}"
        calls = 0
        timings: dict[str, list[float]] = {}
        failures = 0
        for payload in sample_payloads(session_id, scratch):
            event = payload["hook_event_name"]
            exe = next(x for e, x, _ in HOOKS if e == event)
            # An http entry is the server's to check (checks/server.py); its executable is the fallback run here.
            commands = [c for c in wired.get(event, []) if not c.startswith("http")] or [os.path.join(bin_dir, exe)]
            for command in commands:
                calls += 1
                log_size = _size(scratch_paths.error_log)
                ms, proc = _time_run(["/bin/sh", "-c", command], json.dumps(payload).encode(), env, scratch,
                                     deadline / 1000 + 5)
                timings.setdefault(exe, []).append(ms)
                problem = _judge(proc, scratch_paths.error_log, log_size, event)
                if problem:
                    failures += 1
                    checks.append(Check("run", FAIL, f"{exe} ({event}): {problem}", _fix_for(command, problem),
                                        {"command": command, "ms": round(ms, 1)}))
                elif ms > deadline:
                    checks.append(Check("run", FAIL, f"{exe} ({event}): {ms:.0f} ms, over the {deadline:.0f} ms "
                                        "deadline", "a slow disk or a locked store: check the store lines above",
                                        {"ms": round(ms, 1)}))
                elif ms > budget:
                    checks.append(Check("run", WARN, f"{exe} ({event}): {ms:.0f} ms, over the {budget:.0f} ms "
                                        "budget", "a busy machine, or a slow import on the hook path; "
                                        "see bench/ for the measurement", {"ms": round(ms, 1)}))
        per_exe = {exe: round(max(ms), 1) for exe, ms in timings.items()}
        slowest = max(per_exe.values()) if per_exe else 0
        text = ", ".join(f"{exe.removeprefix('agent-hook-')} {ms:.0f}" for exe, ms in per_exe.items())
        checks.insert(0, Check("run", OK if not failures else FAIL,
                               f"synthetic run: {calls - failures}/{calls} calls ok in a scratch store; ms: {text} "
                               f"(python baseline {base_ms:.0f} ms, budget {budget:.0f} ms)",
                               "" if not failures else "see the lines below",
                               {"ms": per_exe, "baseline_ms": round(base_ms, 1), "budget_ms": budget,
                                "slowest_ms": slowest}))
        conn = sqlite3.connect(scratch_paths.store)
        try:
            row = conn.execute("SELECT hook_calls, state FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        finally:
            conn.close()
        if row and row[0] == calls and row[1] == "ended":
            checks.insert(1, Check("run", OK, f"the scratch store shows the session: {row[0]} hook calls, {row[1]}"))
        else:
            checks.insert(1, Check("run", FAIL, f"the scratch store does not show the session as expected "
                                   f"(row: {row}, expected {calls} calls, ended)",
                                   "see the error log lines above; re-run install.sh"))
    return checks


def _fix_for(command: str, problem: str) -> str:
    """How to fix or reproduce a failed call: by hand, on the executable itself (not the launcher's text,
    where a pipe would feed only its first assignment)."""
    if "install_missing" in problem:
        return ("re-run install.sh: the installation these settings run is gone (or, to unwire: "
                "agent-hook settings uninstall)")
    import shlex

    from agent_hooks.wiring.entries import handler_words

    words = handler_words({"command": command}) or [command]
    return f"run it by hand: echo '<payload>' | {shlex.join(words)}; see the error log"


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _judge(proc: Any, error_log: str, log_size: int, event: str | None = None) -> str | None:
    if proc is None:
        return "did not finish (killed after its deadline + 5 s)"
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        return f"exit {proc.returncode}" + (f": {err[-1][:200]}" if err else "")
    out = proc.stdout.strip()
    # PreCompact speaks plain stdout (the goal reminder); only its block answer is JSON.
    if out and not (event == "PreCompact" and not out.startswith(b"{")):
        try:
            json.loads(out)
        except ValueError:
            return f"stdout is not one JSON object: {out[:120]!r}"
    if _size(error_log) > log_size:
        try:
            with open(error_log, encoding="utf-8", errors="replace") as f:
                f.seek(log_size)
                entry = json.loads(f.read().splitlines()[0])
            return f"failed open: {entry.get('kind')}: {str(entry.get('message'))[:200]}"
        except (OSError, ValueError, IndexError):
            return "wrote to the error log"
    return None
