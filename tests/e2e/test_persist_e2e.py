"""Persistence under the real client with a scripted model: Stop holds a session whose task persists,
and lets it go when it must (the budget, a full context, an interrupt).

The task is created with the installed CLI before the run, the session joins it
with $AGENT_HOOKS_TASK_ID, and the hooks are what `settings install` writes, for either transport.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from typing import Any

import pytest
from harness import BIN_DIR, E2E, TRANSPORTS
from model_server import text, tool_use

from support.waiting import wait_for

# Every scenario over both transports: over http, Stop is answered by the resident server.
pytestmark = pytest.mark.parametrize("transport", TRANSPORTS, indirect=True)

AGENT_HOOK = BIN_DIR / "agent-hook"


def cli(e2e: E2E, *args: str) -> str:
    proc = subprocess.run([str(AGENT_HOOK), *args], env=e2e.env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def task(e2e: E2E, task_id: str = "T-1") -> dict[str, Any]:
    return json.loads(cli(e2e, "task", "show", task_id, "--json"))


def worker(**extra: str) -> dict[str, str]:
    return {"AGENT_HOOKS_TASK_ID": "T-1", **extra}


def test_held_then_finishes_with_task_done(e2e: E2E) -> None:
    cli(e2e, "task", "create", "T-1", "--description", "Write notes.txt with the release notes", "--persist")
    cli(e2e, "task", "progress", "T-1", "outline drafted")
    done = f"{AGENT_HOOK} task done T-1 --note 'notes written'"

    def after_the_hold(body: dict[str, Any]) -> list[dict[str, Any]]:
        # The continuation carries the task's own text: only then does the model finish it.
        seen = json.dumps(body)
        assert "Write notes.txt with the release notes" in seen and "outline drafted" in seen
        return [tool_use("Bash", {"command": done, "description": "finish the task"}, id="toolu_done")]

    e2e.server.set_script([[text("I think I am done.")], after_the_hold, [text("Task marked done.")]])
    run = e2e.run("Write the release notes.", env_extra=worker())
    assert run.ok and run.result["result"] == "Task marked done.", e2e.describe()
    assert e2e.server.remaining == 0
    held = e2e.server.requests_containing("agent-hook task done T-1", kind="main")
    assert held, "the Stop block's reason reached the model"
    t = task(e2e)
    assert t["state"] == "done" and t["done_note"] == "notes written" and t["continuations"] == 1
    assert t["last_bypass"].startswith("bypass done")
    assert e2e.errors() == []


def test_always_stopping_model_ends_within_the_budget(e2e: E2E) -> None:
    cli(e2e, "task", "create", "T-1", "--description", "Never finished", "--persist", "--max-continuations", "3")
    e2e.server.set_script([])  # every main request: "Done."
    run = e2e.run("Do the never-ending task.", env_extra=worker())
    assert run.returncode == 0 and run.result is not None, e2e.describe()
    # One answer and three continuations, well inside the client's own cap of 8.
    assert len(e2e.server.messages("main")) == 4, e2e.describe()
    t = task(e2e)
    # Consecutive holds are checked before the budget: the 4th stop comes with stop_hook_active.
    assert t["continuations"] == 3 and "bypass stop_hook_active" in t["last_bypass"], t
    events = e2e.query("SELECT detail FROM session_events WHERE detail LIKE 'persist.%' ORDER BY id")
    assert [e["detail"].split(":")[0] for e in events] == ["persist.hold"] * 3 + ["persist.stop_hook_active"]
    # A new prompt starts a new chain, and then the spent budget lets it go at once.
    e2e.server.set_script([])
    again = e2e.run("Go on.", resume=run.session_id, env_extra=worker())
    assert again.returncode == 0 and len(e2e.server.messages("main")) == 5, e2e.describe()
    assert "bypass budget" in task(e2e)["last_bypass"]


def test_context_at_98_percent_first_stop_goes_through(e2e: E2E) -> None:
    cli(e2e, "task", "create", "T-1", "--description", "Big job", "--persist")
    e2e.server.input_tokens = 196_000  # of a 200k window
    run = e2e.run("Start the big job.", env_extra=worker())
    assert run.ok, e2e.describe()
    # The client writes the turn's usage to its transcript asynchronously; Stop waits for it
    # (persist.transcript_wait_ms), so even under load the first stop sees 98 % and goes through.
    assert len(e2e.server.messages("main")) == 1, e2e.describe()
    t = task(e2e)
    assert t["continuations"] == 0 and "bypass context: context 98% full" in t["last_bypass"]


@pytest.mark.parametrize("case", ["cancelled", "lead", "stale"])
def test_no_block(e2e: E2E, case: str) -> None:
    cli(e2e, "task", "create", "T-1", "--description", "Some work", "--persist")
    env = worker()
    script: list[Any] = []
    if case == "cancelled":  # the lead cancels the task while the worker works
        cancel = f"{AGENT_HOOK} cancel --task T-1 --reason 'lead moved it'"
        script.append([tool_use("Bash", {"command": cancel, "description": "the lead's cancel"})])
    elif case == "lead":
        env["AGENT_HOOKS_ROLE"] = "lead"
    else:  # nothing happens for longer than stale_after_s after the last tool call started
        env["AGENT_HOOKS__PERSIST__STALE_AFTER_S"] = "2"
        script.append([tool_use("Bash", {"command": "sleep 3", "description": "wait"})])
    script.append([text("Stopping.")])
    e2e.server.set_script(script)
    run = e2e.run("Work.", env_extra=env)
    assert run.ok and run.result["result"] == "Stopping.", e2e.describe()
    assert e2e.server.remaining == 0 and e2e.server.extra_turns == 0, e2e.describe()
    t = task(e2e)
    assert t["continuations"] == 0 and t["last_bypass"].startswith(f"bypass {case}"), t


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is needed to drive the interactive client")
def test_interrupt_no_block(e2e: E2E) -> None:
    """The interactive client under tmux: Escape at a permission dialog interrupts the turn."""
    cli(e2e, "task", "create", "T-1", "--description", "Some work", "--persist")
    e2e.server.set_script([[tool_use("Bash", {"command": "touch asked.txt", "description": "ask"})],
                           [text("should never be asked for")]])
    e2e.skip_first_run_screens()
    e2e.settings_path.write_text(json.dumps(e2e.settings))
    socket = f"ah-e2e-{os.getpid()}"
    tmux = ["tmux", "-L", socket]
    env = [f"{k}={v}" for k, v in e2e.env(worker(TERM="xterm-256color")).items()]
    subprocess.run(tmux + ["new-session", "-d", "-s", "c", "-x", "200", "-y", "50", "-c", str(e2e.workspace),
                           "env", "-i", *env, str(e2e.claude), "--settings", str(e2e.settings_path),
                           "--permission-mode", "default"], check=True)
    try:
        def screen() -> str:
            return subprocess.run(tmux + ["capture-pane", "-p", "-t", "c"], capture_output=True, text=True).stdout

        def on_screen(needle: str, timeout: float = 30) -> None:
            wait_for(lambda: needle in screen(), timeout, f"{needle!r} on screen", show=screen, step=0.3)

        on_screen("❯")
        subprocess.run(tmux + ["send-keys", "-t", "c", "-l", "touch the file"], check=True)
        time.sleep(0.5)
        subprocess.run(tmux + ["send-keys", "-t", "c", "Enter"], check=True)
        on_screen("Do you want to proceed?")
        wanted = [{"state": "needs_input", "waiting_detail": "Bash: touch asked.txt"}]
        end = time.monotonic() + 10
        while (session := e2e.query("SELECT state, waiting_detail FROM sessions")) != wanted:
            assert time.monotonic() < end, session  # PermissionRequest's hook runs as the dialog opens
            time.sleep(0.2)
        subprocess.run(tmux + ["send-keys", "-t", "c", "Escape"], check=True)
        on_screen("Interrupted")
        time.sleep(3)  # time for a wrongful continuation to reach the model
        assert len(e2e.server.messages("main")) == 1, e2e.describe()
        assert task(e2e)["continuations"] == 0
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
