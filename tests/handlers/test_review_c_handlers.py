"""Review of issue 16: a handler's output never reaches the hook protocol."""

from __future__ import annotations

from pathlib import Path

from support.handlers import answer, pre_payload, write_handler
from support.scripts import error_log, run_hook


def test_a_thread_started_by_a_handler_cannot_print_into_the_answer(hooks_home: Path) -> None:
    # The handler's own prints are caught by thread; a thread it starts (a logging or
    # progress thread) is not its thread, yet its print must not reach Claude Code either.
    write_handler(hooks_home / "hooks", "threads", code=(
        "import threading\n"
        "def handle(event):\n"
        "    t = threading.Thread(target=lambda: print('from a thread', flush=True))\n"
        "    t.start()\n"
        "    t.join()\n"
        "    return {'context': 'threaded result'}\n"))
    proc = run_hook(pre_payload("ls"))
    assert proc.returncode == 0
    assert answer(proc) == {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                                   "additionalContext": "threaded result"}}, proc.stdout
    assert b"from a thread" in proc.stderr
    assert error_log(hooks_home) == [] or all(e["kind"] != "error" for e in error_log(hooks_home))
