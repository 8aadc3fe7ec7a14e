"""Make docs/board.png: a command center with a few sessions, photographed by headless Chromium.

Local sessions are made by the installed hook executables (so their cards come from the store);
other hosts' sessions arrive through /api/hooks/ingest with the X-Agent-Hooks-Host header, as our
forwarders send them, and one host reports its sessions and a pending request as its server would
(/api/fleet/report). Three PermissionRequest executables hold requests, so the "Needs you" strip
shows. Needs Debian's chromium.

    .venv/bin/python docs/board_screenshot.py [--out docs/board.png]
    .venv/bin/python docs/board_screenshot.py --phone [--out docs/board_phone.png]

``--phone`` photographs the board as a phone shows it, 390 × 844 CSS pixels (drawn at twice that), with
two requests pending: a command and another host's question.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
MAP = '{"SessionStart": "start", "PostToolUse": "tool_use", "UserPromptSubmit": "running", "Stop": "to_review"}'


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--phone", action="store_true", help="390 x 844, two requests pending")
    args = ap.parse_args()
    out = args.out or str(Path(__file__).with_name("board_phone.png" if args.phone else "board.png"))
    home = Path(tempfile.mkdtemp(prefix="board-demo-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "AGENT_HOOKS_HOME": str(home / "ah"), "HOME": str(home), "AGENT_HOOKS__SERVE__PORT": str(port),
           "AGENT_HOOKS__FORWARD__ENABLED": "false", "AGENT_HOOKS__FORWARD__EVENT_MAP": MAP,
           "AGENT_HOOKS__FLEET__HOST": "build-01"}
    base = f"http://127.0.0.1:{port}"

    def hook(event: str, sid: str, extra_env: dict[str, str], **fields: object) -> None:
        exe = {"SessionStart": "session-start", "PreToolUse": "pre-tool-use", "PostToolUse": "post-tool-use",
               "Stop": "stop", "UserPromptSubmit": "user-prompt-submit"}[event]
        body = {"session_id": sid, "transcript_path": str(home / "t.jsonl"), "cwd": str(home / "repo"),
                "hook_event_name": event, **fields}
        subprocess.run([str(BIN / f"agent-hook-{exe}")], input=json.dumps(body).encode(), env={**env, **extra_env},
                       capture_output=True, check=True)

    def cli(*words: str) -> None:
        subprocess.run([str(BIN / "agent-hook"), *words], env=env, capture_output=True, check=True)

    def post(path: str, body: dict[str, object], host: str, method: str = "POST") -> None:
        req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": "application/json", "X-Agent-Hooks-Host": host})
        urllib.request.urlopen(req, timeout=5).read()

    held: list[subprocess.Popen[bytes]] = []

    def ask(sid: str, extra_env: dict[str, str], tool_name: str, tool_input: dict[str, object],
            suggestions: list[object] | None = None) -> None:
        body = {"session_id": sid, "transcript_path": str(home / "t.jsonl"), "cwd": str(home / "repo"),
                "hook_event_name": "PermissionRequest", "tool_name": tool_name, "tool_input": tool_input,
                "permission_suggestions": suggestions or []}
        proc = subprocess.Popen([str(BIN / "agent-hook-permission-request")], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**env, **extra_env, "AGENT_HOOKS__APPROVALS__WAIT_S": "120"})
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(body).encode())
        proc.stdin.close()
        held.append(proc)
        time.sleep(0.4)  # oldest first: each a little later

    subprocess.run([str(BIN / "agent-hook"), "server", "start"], env=env, check=True, capture_output=True)
    try:
        cli("task", "create", "T-42", "-d", "Migrate the billing service to Postgres 16")
        cli("task", "progress", "T-42", "schema ported; 3 of 7 services switched")
        cli("task", "create", "T-51", "-d", "Refresh the public API reference")
        builder = {"AGENT_HOOKS_AGENT": "builder", "AGENT_HOOKS_ROLE": "worker", "AGENT_HOOKS_TASK_ID": "T-42",
                   "AGENT_HOOKS_TMUX_SESSION": "agent-billing-1"}
        hook("SessionStart", "s-billing-1", builder, source="startup")
        hook("UserPromptSubmit", "s-billing-1", builder, prompt="Port the invoices service")
        for i in range(3):
            call = {"tool_name": "Bash", "tool_use_id": f"t{i}", "tool_input": {"command": f"pytest -q tests/{i}"}}
            hook("PreToolUse", "s-billing-1", builder, **call)
            hook("PostToolUse", "s-billing-1", builder, tool_response={"stdout": "ok"}, **call)
        hook("PreToolUse", "s-billing-1", builder, tool_name="Bash", tool_use_id="t9",
             tool_input={"command": "make migrate"})
        looper = {"AGENT_HOOKS_AGENT": "builder", "AGENT_HOOKS_ROLE": "worker", "AGENT_HOOKS_TASK_ID": "T-42",
                  "AGENT_HOOKS_TMUX_SESSION": "agent-billing-2"}
        hook("SessionStart", "s-billing-2", looper, source="startup")
        for i in range(9):  # the same call again and again: the loop guard warns
            call = {"tool_name": "Bash", "tool_use_id": f"l{i}", "tool_input": {"command": "gh run view 4711"}}
            hook("PreToolUse", "s-billing-2", looper, **call)
            hook("PostToolUse", "s-billing-2", looper, tool_response={"stdout": "in progress"}, **call)
        reviewer = {"AGENT_HOOKS_AGENT": "reviewer", "AGENT_HOOKS_ROLE": "lead", "AGENT_HOOKS_TASK_ID": "T-51",
                    "AGENT_HOOKS_TMUX_SESSION": "agent-docs-lead"}
        hook("SessionStart", "s-docs-lead", reviewer, source="startup")
        hook("PreToolUse", "s-docs-lead", reviewer, tool_name="Read", tool_use_id="r1", tool_input={"file_path": "/srv/api.md"})
        hook("PostToolUse", "s-docs-lead", reviewer, tool_name="Read", tool_use_id="r1",
             tool_input={"file_path": "/srv/api.md"}, tool_response={"ok": True})
        hook("Stop", "s-docs-lead", reviewer, stop_hook_active=False)
        stray = {"AGENT_HOOKS_AGENT": "builder", "AGENT_HOOKS_TMUX_SESSION": "agent-hotfix"}
        hook("SessionStart", "s-hotfix", stray, source="startup")
        cli("cancel", "s-hotfix", "--reason", "wrong branch: the fix belongs on release-2.3")
        post("/api/hooks/ingest", {"tmux_session": "agent-web-3", "event": "start"}, "web-02")
        post("/api/hooks/ingest", {"tmux_session": "agent-web-3", "event": "tool_use", "metadata": "Edit: ok in 41 ms"},
             "web-02")
        post("/api/hooks/ingest", {"tmux_session": "agent-search-7", "event": "start"}, "web-02")
        post("/api/hooks/ingest", {"tmux_session": "agent-search-7", "event": "to_review",
                                   "metadata": "notification: permission_prompt"}, "web-02")
        post("/api/hooks/ingest", {"tmux_session": "agent-etl-2", "event": "start", "agent_type": "openclaw"}, "etl-01")
        post("/api/hooks/ingest", {"tmux_session": "agent-etl-2", "event": "exit_error", "metadata": "exit 2"}, "etl-01")
        post("/api/hooks/ingest", {"tmux_session": "agent-etl-9", "event": "start", "agent_type": "shell"}, "etl-01")
        post("/api/hooks/ingest", {"tmux_session": "agent-etl-9", "event": "exit", "metadata": "backfill done"}, "etl-01")
        post("/api/hooks/sessions", {"tmux_session": "agent-etl-nightly", "label": "Nightly ETL backfill",
                                     "agent_type": "shell", "task_id": "T-60"}, "etl-01")
        # Requests waiting for a person: a command, an edit's diff, and (from web-02) a question.
        ask("s-billing-1", builder, "Bash", {"command": "make migrate ENV=staging && psql -f 0042_invoices.sql"},
            [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "make migrate:*"}],
              "behavior": "allow", "destination": "localSettings"}])
        if not args.phone:
            ask("s-billing-2", looper, "Edit", {"file_path": "/srv/billing/config/database.yml",
                                                "old_string": "adapter: mysql2\npool: 5",
                                                "new_string": "adapter: postgresql\npool: 20"})
        now = time.time()
        post("/api/fleet/report", {"cards": [{
            "session_id": "w-search-7", "tmux_session": "agent-search-7", "agent": "indexer", "role": "worker",
            "task_id": "T-77", "task": "Rebuild the product search index", "own_state": "needs_input",
            "current_tool": "AskUserQuestion", "tool_calls": 37, "waiting_on": "needs_input",
            "waiting_detail": "AskUserQuestion", "in_tmux": True}],
            "approvals": [{"id": "q7web02search", "session_id": "w-search-7", "kind": "question",
                           "tool_name": "AskUserQuestion", "tool_input": "{}", "state": "pending",
                           "created_at": now, "expires_at": now + 240, "questions": json.dumps([
                               {"question": "Which index should serve traffic during the rebuild?", "header": "Index",
                                "options": [{"label": "keep v3"}, {"label": "switch to v4"}]}])}]}, "web-02")
        time.sleep(1.0)
        chromium = "/usr/bin/chromium"
        size = ["--window-size=390,844", "--force-device-scale-factor=2"] if args.phone else ["--window-size=1500,1060"]
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *size,
                        "--virtual-time-budget=3000", f"--screenshot={out}", base + "/"],
                       check=True, capture_output=True, timeout=60)
        print(f"wrote {out}")
    finally:
        for proc in held:  # the held requests: give up waiting (the client's dialog would stay)
            proc.terminate()
            proc.wait(timeout=10)
        subprocess.run([str(BIN / "agent-hook"), "server", "stop"], env=env, capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
