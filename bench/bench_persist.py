"""Persistence and waiting states on the hook path (issue 17, issue 19 item 2).

Median wall time of the installed executables, alternating, for:

* PostToolUse in a session without a task (the common case: one extra primary-key read);
* PostToolUse in a session with a task whose context is below the notice threshold (it reads the
  transcript's last 64 KiB each call until the notice is given);
* Stop without a task, and Stop holding a persisting task (store reads + transcript tail);
* PermissionRequest and StopFailure (the new observers);
* and the floor: ``python -c "import json, sqlite3"``.

    .venv/bin/python bench/bench_persist.py [--runs 40] [--transcript-kib 2048]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def timed(argv: list[str], stdin: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, input=stdin, capture_output=True, env=env, check=True)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--transcript-kib", type=int, default=2048, help="Size of the task session's transcript.")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "HOME": str(home), "AGENT_HOOKS_HOME": str(Path(tmp) / "ah"),
               "AGENT_HOOKS__FORWARD__ENABLED": "false",
               # The measured Stop holds every time: a budget that does not run out.
               "AGENT_HOOKS__PERSIST__MAX_CONTINUATIONS": "100000", "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "0"}
        projects = home / ".claude" / "projects" / "-bench"
        projects.mkdir(parents=True)
        transcript = projects / "task.jsonl"
        filler = json.dumps({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "content": "x" * 4000}]}})
        usage = json.dumps({"type": "assistant", "message": {"model": "claude-opus-5-5", "content": [],
                                                             "usage": {"input_tokens": 20_000, "output_tokens": 5}}})
        lines = [filler] * (args.transcript_kib * 1024 // len(filler)) + [usage]
        transcript.write_text("\n".join(lines) + "\n")

        def common(sid: str, event: str, **extra: object) -> dict[str, object]:
            return {"session_id": sid, "hook_event_name": event, "cwd": tmp,
                    "transcript_path": str(projects / f"{sid}.jsonl"), **extra}

        task_env = {**env, "AGENT_HOOKS_TASK_ID": "T-bench"}
        for sid, e in (("plain", env), ("task", task_env)):
            subprocess.run([str(BIN / "agent-hook-session-start")], input=json.dumps(
                common(sid, "SessionStart", source="startup")).encode(), env=e, check=True, capture_output=True)
        subprocess.run([str(BIN / "agent-hook"), "task", "create", "T-bench", "--description", "bench", "--persist"],
                       env=env, check=True, capture_output=True)
        (projects / "plain.jsonl").write_text(usage + "\n")

        def post(sid: str) -> bytes:
            return json.dumps(common(sid, "PostToolUse", tool_name="Bash", tool_input={"command": "ls"},
                                     tool_response={"stdout": ""}, tool_use_id=f"t{time.monotonic_ns()}")).encode()

        cases = {
            "floor (python -c 'import json, sqlite3')": ([sys.executable, "-c", "import json, sqlite3"], lambda: b"", env),
            "PostToolUse, no task": ([str(BIN / "agent-hook-post-tool-use")], lambda: post("plain"), env),
            "PostToolUse, task, below notice (reads 64 KiB)": ([str(BIN / "agent-hook-post-tool-use")],
                                                               lambda: post("task"), task_env),
            "Stop, no task": ([str(BIN / "agent-hook-stop")], lambda: json.dumps(
                common("plain", "Stop", stop_hook_active=False)).encode(), env),
            "Stop, task persists: held": ([str(BIN / "agent-hook-stop")], lambda: json.dumps(
                common("task", "Stop", stop_hook_active=False)).encode(), task_env),
            "PermissionRequest": ([str(BIN / "agent-hook-permission-request")], lambda: json.dumps(
                common("plain", "PermissionRequest", tool_name="Bash", tool_input={"command": "ls"})).encode(), env),
            "StopFailure": ([str(BIN / "agent-hook-stop-failure")], lambda: json.dumps(
                common("plain", "StopFailure", error="rate_limit")).encode(), env),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, (argv, data, e) in cases.items():
                times[name].append(timed(argv, data(), e))
        floor = statistics.median(times[next(iter(cases))])
        print(f"runs: {args.runs}, task transcript: {transcript.stat().st_size // 1024} KiB")
        for name, values in times.items():
            med = statistics.median(values)
            print(f"{name:52} median {med:6.1f} ms  ({med / floor:4.2f}x floor)")


if __name__ == "__main__":
    main()
