"""User handlers through the installed hook executables and the CLI (subprocesses, real store):
ordering, merging, isolation, cancellation first, enable/disable/install/new/check."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

from agent_hooks.handlers import registry

from support.handlers import answer, pre_payload, specific, write_handler
from support.scripts import agent_hook, error_log, run_exe, run_hook, store_rows

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")


@pytest.fixture
def managed(hooks_home: Path) -> Path:
    return hooks_home / "hooks"


def context_handler(text: str) -> str:
    return f"def handle(event):\n    return {{'context': {text!r}}}\n"


def test_no_handlers_changes_nothing(hooks_home: Path) -> None:
    proc = run_hook(pre_payload("ls"))
    assert proc.returncode == 0 and proc.stdout == b""


def test_a_deny_reaches_the_answer_and_the_calls_row(managed: Path, hooks_home: Path) -> None:
    write_handler(managed, "no-force-push", matcher="Bash", code="""
        import re
        def handle(event):
            if re.search(r"git\\s+push\\s.*--force", event["payload"]["tool_input"]["command"]):
                return {"decision": "deny", "reason": "Policy: no force-push; open a PR."}
        """)
    denied = run_hook(pre_payload("git push --force origin main", tool_use_id="t1"))
    assert specific(denied) == {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                "permissionDecisionReason": "Policy: no force-push; open a PR."}
    assert run_hook(pre_payload("git push origin main", tool_use_id="t2")).stdout == b""
    rows = store_rows(hooks_home, "SELECT tool_use_id, decision, rule, outcome FROM tool_calls ORDER BY id")
    assert [tuple(r) for r in rows] == [("t1", "deny", "handler:no-force-push", "denied"),
                                        ("t2", "allow", None, "pending")]
    # The matcher keeps it off other tools.
    assert run_hook(pre_payload("git push --force", tool="Read", tool_use_id="t3")).stdout == b""


def test_priority_order_strongest_decision_and_budgeted_contexts(managed: Path, hooks_home: Path) -> None:
    write_handler(managed, "c-second", priority=20, code=context_handler("second"))
    write_handler(managed, "a-first", priority=10, code=context_handler("first"))
    write_handler(managed, "b-third", priority=30, code="def handle(event):\n"
                  "    return {'decision': 'warn', 'reason': 'careful: third', 'context': 'ctx3'}\n")
    write_handler(managed, "d-allow", priority=40, code="def handle(event):\n    return {'decision': 'allow'}\n")
    ctx = specific(run_hook(pre_payload("ls")))["additionalContext"]
    assert ctx == "first\n\nsecond\n\ncareful: third\nctx3"
    # A handler's warning is not the loop guard's: the row keeps the guards' decision.
    (row,) = store_rows(hooks_home, "SELECT decision, rule, reason FROM tool_calls")
    assert tuple(row) == ("allow", None, None)
    # A deny wins over the warning before it, and ends the run.
    write_handler(managed, "e-deny", priority=35, code="def handle(event):\n    return {'decision': 'block'}\n")
    write_handler(managed, "f-never", priority=50, code="def handle(event):\n    open('/nonexistent/x', 'w')\n")
    out = specific(run_hook(pre_payload("ls", tool_use_id="t2")))
    assert out["permissionDecision"] == "deny" and out["permissionDecisionReason"] == "block by handler e-deny"
    assert error_log(hooks_home) == []  # f-never never ran


def test_the_budget_cuts_contexts(managed: Path) -> None:
    write_handler(managed, "big", priority=1, code=context_handler("x" * 5000))
    write_handler(managed, "small", priority=2, code=context_handler("small"))
    ctx = specific(run_hook(pre_payload("ls"), env={"AGENT_HOOKS__HANDLERS__CONTEXT_BUDGET_CHARS": "100"}))
    assert ctx["additionalContext"] == "x" * 92 + " [… cut]\n\n[1 more handler context(s) cut: over the budget]"


def test_updated_input_is_applied_in_priority_order(managed: Path) -> None:
    write_handler(managed, "add-flag", priority=1, code="""
        def handle(event):
            cmd = event["payload"]["tool_input"]["command"]
            return {"updated_input": {"command": cmd + " --dry-run"}}
        """)
    write_handler(managed, "sees-first", priority=2, code="""
        def handle(event):
            cmd = event["payload"]["tool_input"]["command"]
            return {"updated_input": {"command": cmd + " --verbose", "description": None, "timeout": 5000}}
        """)
    out = specific(run_hook(pre_payload("make deploy")))
    assert out == {"hookEventName": "PreToolUse",
                   "updatedInput": {"command": "make deploy --dry-run --verbose", "timeout": 5000}}
    # Only PreToolUse takes it.
    write_handler(managed, "post", events=["PostToolUse"],
                  code="def handle(event):\n    return {'updated_input': {'a': 1}, 'context': 'seen'}\n")
    post = {**pre_payload("ls"), "hook_event_name": "PostToolUse", "tool_response": {"stdout": ""}}
    assert specific(run_hook(post)) == {"hookEventName": "PostToolUse", "additionalContext": "seen"}


def test_isolation_exception_timeout_garbage_printing(managed: Path, hooks_home: Path) -> None:
    write_handler(managed, "raises", priority=1, code="def handle(event):\n    raise RuntimeError('boom')\n")
    write_handler(managed, "hangs", priority=2, timeout_ms=300, code="import time\n"
                  "def handle(event):\n    time.sleep(30)\n    return {'decision': 'deny', 'reason': 'late'}\n")
    write_handler(managed, "garbage", priority=3, code="def handle(event):\n    return ['deny']\n")
    write_handler(managed, "prints", priority=4, code="def handle(event):\n    print('hello')\n"
                  "    return {'decision': 'deny', 'reason': 'printed'}\n")
    write_handler(managed, "writes-fd1", priority=5, code="import os\ndef handle(event):\n"
                  "    os.write(1, b'{\"raw\": 1}')\n    return {'context': 'fd-writer result'}\n")
    write_handler(managed, "exits", priority=6, code="import sys\ndef handle(event):\n    sys.exit(3)\n")
    write_handler(managed, "exec-garbage", priority=7, executable="#!/bin/sh\necho not json\n")
    write_handler(managed, "exec-fails", priority=8, executable="#!/bin/sh\necho oops >&2\nexit 2\n")
    write_handler(managed, "exec-hangs", priority=9, timeout_ms=300, executable="#!/bin/sh\nsleep 30\n")
    write_handler(managed, "exec-good", priority=10, executable="""
        #!/usr/bin/env python3
        import json, sys
        event = json.load(sys.stdin)
        print(json.dumps({"context": "exec saw " + event["payload"]["tool_input"]["command"]}))
        """)
    write_handler(managed, "good", priority=11, code=context_handler("still here"))
    started = time.monotonic()
    proc = run_hook(pre_payload("ls -la"))
    elapsed = time.monotonic() - started
    assert proc.returncode == 0
    # Exactly one JSON object on stdout: the one answer, nothing a handler wrote.
    assert answer(proc) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "additionalContext": "fd-writer result\n\nexec saw ls -la\n\nstill here"}}
    assert b'{"raw": 1}' in proc.stderr  # the fd-level write went to stderr
    assert elapsed < 3.5, elapsed
    failures = {e["message"].split(":")[0]: e["message"] for e in error_log(hooks_home) if e["kind"] == "handler"}
    assert set(failures) == {f"handler {n}" for n in
                             ("raises", "hangs", "garbage", "prints", "exits", "exec-garbage", "exec-fails",
                              "exec-hangs")}
    assert "raised RuntimeError: boom" in failures["handler raises"]
    assert "timed out after 300 ms" in failures["handler hangs"]
    assert "returned list" in failures["handler garbage"]
    assert "wrote 6 characters to stdout" in failures["handler prints"]
    assert "raised SystemExit: 3" in failures["handler exits"]
    assert "not JSON" in failures["handler exec-garbage"]
    assert "exited 2: oops" in failures["handler exec-fails"]
    assert "timed out after 300 ms (killed)" in failures["handler exec-hangs"]
    counted = store_rows(hooks_home, "SELECT count(*) FROM errors WHERE kind = 'handler'")[0][0]
    assert counted == 8


def test_the_whole_run_stays_within_the_hook_deadline(managed: Path, hooks_home: Path) -> None:
    write_handler(managed, "slow", priority=1, timeout_ms=60000,
                  code="import time\ndef handle(event):\n    time.sleep(30)\n")
    write_handler(managed, "after", priority=2, code=context_handler("after"))
    agent_hook("init")
    started = time.monotonic()
    proc = run_hook(pre_payload("ls"), env={"AGENT_HOOKS_DEADLINE_MS": "1200"})
    elapsed = time.monotonic() - started
    assert proc.returncode == 0 and elapsed < 2.5, elapsed
    assert proc.stdout == b""  # 'after' had no time left; the guards' answer (nothing) stands
    messages = [e["message"] for e in error_log(hooks_home)]
    # Its own timeout is 60 s; what was left of the 1.2 s deadline (less the 300 ms margin) cut it.
    assert any(re.fullmatch(r"handler slow: timed out after [1-8]?\d\d ms .*", m) for m in messages), messages
    assert any("handler after: not run: the hook's deadline is reached" in m for m in messages), messages


def test_cancellation_wins_and_handlers_do_not_run(managed: Path, hooks_home: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    write_handler(managed, "marks", events=["PreToolUse", "UserPromptSubmit"],
                  code=f"def handle(event):\n    open({str(marker)!r}, 'a').write(event['event'])\n"
                       "    return {'decision': 'allow', 'context': 'hi'}\n")
    run_hook(pre_payload("ls", session_id="s-c"))
    assert marker.read_text() == "PreToolUse"
    agent_hook("cancel", "s-c", "--reason", "moved")
    denied = specific(run_hook(pre_payload("ls", session_id="s-c", tool_use_id="t9")))
    assert denied["permissionDecision"] == "deny" and "moved" in denied["permissionDecisionReason"]
    prompt = {"session_id": "s-c", "hook_event_name": "UserPromptSubmit", "cwd": "/tmp", "prompt": "go"}
    assert answer(run_hook(prompt))["decision"] == "block"
    assert marker.read_text() == "PreToolUse"


def test_other_events_block_and_add_context(managed: Path) -> None:
    write_handler(managed, "stopper", events=["Stop", "UserPromptSubmit", "SessionStart"], code="""
        def handle(event):
            if event["event"] == "SessionStart":
                return {"context": "from handler at " + event["payload"]["source"], "decision": "block"}
            return {"decision": "block", "reason": "not yet: " + event["event"]}
        """)
    stop = {"session_id": "s-o", "hook_event_name": "Stop", "cwd": "/tmp", "stop_hook_active": False}
    assert answer(run_hook(stop)) == {"decision": "block", "reason": "not yet: Stop"}
    prompt = {"session_id": "s-o", "hook_event_name": "UserPromptSubmit", "cwd": "/tmp", "prompt": "x"}
    assert answer(run_hook(prompt)) == {"decision": "block", "reason": "not yet: UserPromptSubmit"}
    start = {"session_id": "s-o", "hook_event_name": "SessionStart", "cwd": "/tmp", "source": "startup"}
    # SessionStart cannot block: the context goes through, the block is not rendered.
    assert answer(run_hook(start)) == {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                                              "additionalContext": "from handler at startup"}}


def test_the_event_a_handler_gets(managed: Path, tmp_path: Path, hooks_home: Path) -> None:
    dump = tmp_path / "event.json"
    write_handler(managed, "dumper", code=f"import json\ndef handle(event):\n"
                                          f"    json.dump(event, open({str(dump)!r}, 'w'))\n")
    # Runs first and scribbles on everything it was given: the next handler still gets the original.
    write_handler(managed, "scribbler", priority=1, code="def handle(event):\n"
                  "    event['payload']['tool_input']['command'] = 'rm -rf /'\n"
                  "    event['session'].clear()\n    event['config']['colour'] = 'red'\n")
    exe_dump = tmp_path / "exe-event.json"
    write_handler(managed, "exe-dumper", priority=200, executable=f"#!/bin/sh\ncat > {exe_dump}\n")
    agent_hook("hooks", "enable", "dumper")
    cfg = hooks_home / "config.toml"
    cfg.write_text(cfg.read_text() + 'colour = "blue"\nsince = 2026-11-25\n'  # a TOML date: not JSON data
                   '[handlers.entries.exe-dumper]\nsince = 2026-11-25\n')
    run_hook(pre_payload("ls"), env={"AGENT_HOOKS_AGENT": "w7", "AGENT_HOOKS_ROLE": "worker",
                                     "AGENT_HOOKS_TASK_ID": "T-1", "AGENT_HOOKS_TMUX_SESSION": "tm"})
    event = json.loads(dump.read_text())
    assert event["api_version"] == 1 and event["event"] == "PreToolUse"
    assert event["payload"] == pre_payload("ls")
    assert event["session"] == {"id": "sess-h", "agent": "w7", "role": "worker", "task_id": "T-1", "cwd": "/tmp",
                                "tmux_session": "tm"}
    assert event["config"] == {"enabled": True, "colour": "blue", "since": "2026-11-25"}
    assert event["handler"]["name"] == "dumper" and os.path.isdir(event["handler"]["data_dir"])
    exe_event = json.loads(exe_dump.read_text())
    assert exe_event["config"] == {"since": "2026-11-25"} and exe_event["payload"] == pre_payload("ls")


# -- odd input: it costs one handler, never the others, the answer's shape or the error log's trace -

@pytest.mark.parametrize("front", [
    "homepage: 2024-02-30",  # YAML takes it for a date, and datetime raises ValueError
    "homepage: 2024-01-01 25:00:00",  # a timestamp out of range: ValueError too
    "homepage: " + "[" * 3000 + "]" * 3000,  # PyYAML's composer recurses: RecursionError
])
def test_one_hook_md_pyyaml_cannot_construct_breaks_only_its_handler(managed: Path, hooks_home: Path,
                                                                     front: str) -> None:
    write_handler(managed, "good", code=context_handler("good ran"))
    bad = write_handler(managed, "bad", code=context_handler("bad ran"))
    text = (bad / "HOOK.md").read_text()
    (bad / "HOOK.md").write_text(text.replace("---\n", f"---\n{front}\n", 1))
    proc = run_hook(pre_payload("ls"))
    assert proc.returncode == 0
    assert specific(proc).get("additionalContext") == "good ran", (proc.stdout, error_log(hooks_home))
    listed = json.loads(agent_hook("hooks", "list", "--json").stdout)
    rows = listed if isinstance(listed, list) else listed["handlers"]
    bad_row = next(r for r in rows if r["name"] == "bad")
    assert bad_row["status"] == "broken" and "HOOK.md" in " ".join(bad_row["reasons"]), bad_row


def test_a_billion_laughs_hook_md_is_refused_quickly(managed: Path, hooks_home: Path) -> None:
    # Aliases cost PyYAML nothing (shared references), but the error message's repr expands them.
    bad = write_handler(managed, "laughs", code=context_handler("x"))
    lines = ['l0: &l0 ["ha", "ha", "ha", "ha", "ha", "ha", "ha", "ha", "ha", "ha"]']
    for i in range(1, 9):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    front = "\n".join(lines) + "\nname: *l8\ndescription: *l8\nevents: *l8\npriority: *l8\nos: *l8\n"
    (bad / "HOOK.md").write_text(f"---\n{front}---\n")
    write_handler(managed, "good", code=context_handler("good ran"))
    started = time.monotonic()
    proc = run_hook(pre_payload("ls"))
    assert time.monotonic() - started < 5
    assert specific(proc).get("additionalContext") == "good ran", (proc.stdout, error_log(hooks_home))
    assert (hooks_home / "cache").is_dir()
    assert max(p.stat().st_size for p in (hooks_home / "cache").glob("handlers-*.bin")) < 100_000


@pytest.mark.parametrize("value", ["float('nan')", "float('inf')", "{1, 2}", "b'bytes'", "{(1, 2): 'x'}"])
def test_an_updated_input_that_is_not_json_fails_its_handler_not_the_answer(managed: Path, hooks_home: Path,
                                                                           value: str) -> None:
    write_handler(managed, "a-odd", priority=1,
                  code=f"def handle(event):\n    return {{'updated_input': {{'n': {value}}}, 'context': 'odd'}}\n")
    write_handler(managed, "b-good", priority=2, code=context_handler("good ran"))
    proc = run_hook(pre_payload("ls"))
    assert proc.returncode == 0
    out = proc.stdout.decode()
    # What goes to Claude Code is strict JSON (no NaN / Infinity), and the other handler's work is in it.
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c} on stdout: {out}"))
    assert doc["hookSpecificOutput"].get("additionalContext") == "good ran", doc
    assert "updatedInput" not in doc["hookSpecificOutput"]
    messages = [e["message"] for e in error_log(hooks_home)]
    assert any(m.startswith("handler a-odd: ") and "updated_input" in m for m in messages), messages


def test_an_executable_printing_nan_cannot_put_it_on_stdout(managed: Path, hooks_home: Path) -> None:
    write_handler(managed, "nan", executable='#!/bin/sh\necho \'{"updated_input": {"n": NaN}}\'\n')
    proc = run_hook(pre_payload("ls"))
    out = proc.stdout.decode()
    assert "NaN" not in out, out
    assert any(e["message"].startswith("handler nan: ") for e in error_log(hooks_home))


def test_a_handler_that_cannot_be_scheduled_is_logged_and_the_rest_run(managed: Path, hooks_home: Path) -> None:
    # An integer too large for a float: the worker thread's timeout arithmetic raised outside the
    # handler's own try, the thread died (a traceback on stderr only) and every later handler was skipped.
    write_handler(managed, "a-huge", priority=1, timeout_ms=10 ** 400, code=context_handler("huge"))
    write_handler(managed, "b-good", priority=2, code=context_handler("good ran"))
    proc = run_hook(pre_payload("ls"))
    assert proc.returncode == 0
    assert "good ran" in (specific(proc).get("additionalContext") or ""), (proc.stdout, proc.stderr)
    assert b"Traceback" not in proc.stderr and b"Unhandled exception" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("setting, said", [("deadline_margin_ms = nan", "must be a finite number, got nan"),
                                           ("default_timeout_ms = inf", "must be a finite number, got inf"),
                                           ("default_timeout_ms = 0", "must be at least 1, got 0")])
def test_a_setting_the_run_cannot_use_is_repaired_and_said(managed: Path, hooks_home: Path, setting: str,
                                                           said: str) -> None:
    # TOML has nan and inf. nan killed the run's worker on int(nan); a timeout of 0 timed out every handler.
    hooks_home.mkdir(parents=True, exist_ok=True)
    (hooks_home / "config.toml").write_text(f"[handlers]\n{setting}\n")
    write_handler(managed, "good", code=context_handler("good ran"))
    proc = run_hook(pre_payload("ls"))
    assert proc.returncode == 0 and specific(proc).get("additionalContext") == "good ran", proc.stderr
    assert f"handlers.{setting.split()[0]} {said}; using the default" in proc.stderr.decode()
    assert not any(e["message"].startswith("handler good") for e in error_log(hooks_home))
    assert said in agent_hook("config").stderr  # and so does the CLI


def test_a_deny_on_an_event_that_cannot_block_does_not_skip_the_later_handlers(managed: Path,
                                                                                tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    write_handler(managed, "a-denies", events=["SessionEnd", "SessionStart"], priority=1,
                  code="def handle(event):\n    return {'decision': 'deny', 'reason': 'no', 'context': 'a'}\n")
    write_handler(managed, "b-saves", events=["SessionEnd", "SessionStart"], priority=2,
                  code=f"def handle(event):\n    open({str(marker)!r}, 'a').write(event['event'] + ' ')\n"
                       "    return {'context': 'b'}\n")
    end = {"session_id": "s-e", "hook_event_name": "SessionEnd", "cwd": "/tmp", "reason": "clear"}
    assert run_hook(end).returncode == 0
    start = {"session_id": "s-e", "hook_event_name": "SessionStart", "cwd": "/tmp", "source": "startup"}
    assert answer(run_hook(start)) == {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                                              "additionalContext": "a\n\nb"}}
    assert marker.read_text() == "SessionEnd SessionStart "


def test_a_handler_that_rebinds_sys_stdout_cannot_lose_the_answer(managed: Path, hooks_home: Path) -> None:
    # A common hook-writing habit ("keep stdout clean"): at import, sys.stdout = sys.stderr. The answer
    # was written to whatever sys.stdout was at the end, so Claude Code got nothing: the deny was lost.
    # The answer now goes out on its own stream, so the rebinding is harmless and nothing is logged.
    write_handler(managed, "rebinds", code="import sys\nsys.stdout = sys.stderr\n"
                  "def handle(event):\n    return {'decision': 'deny', 'reason': 'policy'}\n")
    proc = run_hook(pre_payload("rm -rf /"))
    assert proc.returncode == 0
    assert specific(proc).get("permissionDecision") == "deny", (proc.stdout, proc.stderr)
    assert error_log(hooks_home) == []


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


def test_a_catastrophic_matcher_is_refused_not_run_on_every_tool_call(managed: Path, hooks_home: Path) -> None:
    # re holds the GIL while it backtracks: (\w+)*X on a 33-character MCP tool name ran for minutes,
    # and not even the runner's deadline thread could answer. Such a matcher is now a HOOK.md error.
    write_handler(managed, "nested", matcher=r"(\w+)*X", code=context_handler("nested ran"))
    write_handler(managed, "good", code=context_handler("good ran"))
    started = time.monotonic()
    proc = run_hook(pre_payload("ls", tool="mcp__github__create_pull_request"))
    assert time.monotonic() - started < 5
    assert specific(proc).get("additionalContext") == "good ran"
    rows = json.loads(agent_hook("hooks", "list", "--json").stdout)
    nested = next(r for r in rows if r["name"] == "nested")
    assert nested["status"] == "broken" and "repeats a repetition" in " ".join(nested["reasons"]), nested
    # What is not nested stays a regex.
    from agent_hooks.handlers.discovery import _nested_repeat

    assert not any(_nested_repeat(p) for p in (r"mcp__github__.*", r"mcp__(github|gitlab)__\w+", r"(?:\w++)*x"))


def test_command_logger_with_no_backups_still_keeps_to_max_bytes(hooks_home: Path, tmp_path: Path) -> None:
    # backups = 0 made the rotation os.replace(path, path): a no-op, so the log grew without bound.
    log = tmp_path / "commands.jsonl"
    hooks_home.mkdir(parents=True, exist_ok=True)
    (hooks_home / "config.toml").write_text(
        f'[handlers.entries.command-logger]\nenabled = true\npath = "{log}"\nmax_bytes = 600\nbackups = 0\n')
    for i in range(8):
        assert run_hook(pre_payload(f"echo {i}", tool_use_id=f"t{i}")).returncode == 0
    assert log.stat().st_size <= 600, log.stat().st_size
    assert "echo 7" in log.read_text()


def test_a_hook_md_that_is_a_fifo_is_refused_not_waited_on(managed: Path, hooks_home: Path) -> None:
    # open() on a FIFO waits for a writer: every hook call ran into its deadline, and hooks list hung.
    fifo = write_handler(managed, "fifo", code=context_handler("fifo ran"))
    (fifo / "HOOK.md").unlink()
    os.mkfifo(fifo / "HOOK.md", 0o600)
    write_handler(managed, "good", code=context_handler("good ran"))
    proc = run_hook(pre_payload("ls"))
    assert specific(proc).get("additionalContext") == "good ran", proc.stderr
    rows = json.loads(agent_hook("hooks", "list", "--json").stdout)
    assert next(r for r in rows if r["name"] == "fifo")["status"] == "broken"


def test_a_lone_surrogate_in_a_plain_answer_does_not_cost_the_answer(managed: Path, hooks_home: Path) -> None:
    # PreCompact's answer is plain text, and UTF-8 cannot encode "\ud800" (JSON answers escape it).
    write_handler(managed, "odd", events=["PreCompact"], code=context_handler("keep \ud800 this"))
    proc = run_exe("agent-hook-pre-compact", {"session_id": "s-sur", "hook_event_name": "PreCompact",
                                              "trigger": "manual", "custom_instructions": "", "cwd": "/tmp"})
    assert proc.returncode == 0 and "keep ? this" in proc.stdout.decode(), (proc.stdout, proc.stderr)
    assert not any("could not write the answer" in e["message"] for e in error_log(hooks_home))


def test_a_deny_whose_reason_has_a_lone_surrogate_still_denies(managed: Path, hooks_home: Path) -> None:
    # UTF-8 cannot encode "\ud800": recording the deny on the call's row raised, and the call went through.
    write_handler(managed, "odd", code="def handle(event):\n    return {'decision': 'deny', 'reason': 'no \\ud800 way'}\n")
    proc = run_hook(pre_payload("ls"))
    assert specific(proc).get("permissionDecision") == "deny", (proc.stdout, proc.stderr)
    assert specific(proc).get("permissionDecisionReason") == "no ? way"
    assert error_log(hooks_home) == []


def test_a_json_looking_context_on_precompact_stays_text(managed: Path) -> None:
    # PreCompact answers in plain text, and Claude Code parses stdout that starts with "{" as JSON:
    # this context, alone on stdout, would have blocked the compaction.
    write_handler(managed, "json-ish", events=["PreCompact"],
                  code=context_handler('{"decision": "block", "reason": "not a decision"}'))
    proc = run_exe("agent-hook-pre-compact", {"session_id": "s-json", "hook_event_name": "PreCompact",
                                              "trigger": "manual", "custom_instructions": "", "cwd": "/tmp"})
    out = proc.stdout.decode()
    assert not out.lstrip().startswith("{") and '{"decision": "block", "reason": "not a decision"}' in out, out


# -- CLI -------------------------------------------------------------------------------------------

def test_disable_and_enable_take_effect_on_the_next_call(managed: Path, hooks_home: Path) -> None:
    write_handler(managed, "denier", code="def handle(event):\n    return {'decision': 'deny', 'reason': 'no'}\n")
    assert specific(run_hook(pre_payload("ls", tool_use_id="a")))["permissionDecision"] == "deny"
    assert "disabled denier" in agent_hook("hooks", "disable", "denier").stdout
    assert run_hook(pre_payload("ls", tool_use_id="b")).stdout == b""
    config = tomllib.loads((hooks_home / "config.toml").read_text())
    assert config["handlers"]["entries"]["denier"] == {"enabled": False}
    agent_hook("hooks", "enable", "denier")
    assert specific(run_hook(pre_payload("ls", tool_use_id="c")))["permissionDecision"] == "deny"
    assert oct((hooks_home / "config.toml").stat().st_mode & 0o777) == "0o600"


def test_enable_keeps_the_operators_file_and_refuses_what_it_cannot_edit(managed: Path, hooks_home: Path) -> None:
    write_handler(managed, "x")
    cfg = hooks_home / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("# my settings\n[loops]\nwindow = 30  # keep\n\n[handlers.entries.x]\nenabled = false\nlevel = 2\n")
    agent_hook("hooks", "enable", "x")
    assert cfg.read_text() == "# my settings\n[loops]\nwindow = 30  # keep\n\n[handlers.entries.x]\nenabled = true\nlevel = 2\n"
    cfg.write_text("handlers = { entries = { x = { enabled = true } } }\n")
    proc = agent_hook("hooks", "disable", "x", check=False)
    assert proc.returncode == 1 and "add this under [handlers.entries.x]" in proc.stderr
    assert cfg.read_text() == "handlers = { entries = { x = { enabled = true } } }\n"
    nope = agent_hook("hooks", "enable", "nope", check=False)
    assert nope.returncode == 3 and nope.stderr.strip() == "Error: no handler named 'nope' (see: agent-hook hooks list)"


def test_enable_edits_a_symlinked_config_at_its_target_and_keeps_the_link(managed: Path, hooks_home: Path,
                                                                         tmp_path: Path) -> None:
    write_handler(managed, "x")
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "config.toml"
    real.write_text("# mine\n[loops]\nwindow = 30\n")
    (hooks_home / "config.toml").symlink_to(real)
    agent_hook("hooks", "enable", "x")
    assert (hooks_home / "config.toml").is_symlink(), "the dotfiles link was replaced by a copy"
    assert real.read_text() == "# mine\n[loops]\nwindow = 30\n\n[handlers.entries.x]\nenabled = true\n"


def test_enable_refuses_a_read_only_config_and_leaves_it_alone(managed: Path, hooks_home: Path) -> None:
    write_handler(managed, "x")
    cfg = hooks_home / "config.toml"
    cfg.write_text("[loops]\nwindow = 30\n")
    cfg.chmod(0o400)
    proc = agent_hook("hooks", "enable", "x", check=False)
    assert proc.returncode == 1 and "read-only" in proc.stderr
    assert cfg.read_text() == "[loops]\nwindow = 30\n" and cfg.stat().st_mode & 0o777 == 0o400


def test_config_edits_leave_no_file_readable_by_others(managed: Path, hooks_home: Path) -> None:
    from support.scripts import BIN

    write_handler(managed, "x")
    (hooks_home / "config.toml").write_text("[loops]\nwindow = 30\n")
    # A user's usual umask: the CLI must not depend on it for the files it makes.
    subprocess.run(["sh", "-c", f"umask 022 && exec {BIN / 'agent-hook'} hooks enable x"], check=True,
                   env=dict(os.environ), capture_output=True)
    loose = {p.name: oct(p.stat().st_mode & 0o777) for p in hooks_home.iterdir()
             if p.is_file() and p.stat().st_mode & 0o077}
    assert loose == {}


def test_list_info_check(managed: Path, hooks_home: Path) -> None:
    write_handler(managed, "good", matcher="Bash", priority=5)
    write_handler(managed, "needs", requires={"bins": ["surely-not-installed-xyz"]})
    bad = write_handler(managed, "syntax", code="def handle(event:\n")
    listing = json.loads(agent_hook("hooks", "list", "--json").stdout)
    by = {h["name"]: h for h in listing}
    assert by["good"]["status"] == "ready" and by["needs"]["status"] == "ineligible"
    assert by["needs"]["reasons"] == ["not on PATH: surely-not-installed-xyz"]
    assert by["command-logger"]["status"] == "disabled"
    eligible = json.loads(agent_hook("hooks", "list", "--eligible", "--json").stdout)
    assert {h["name"] for h in eligible} == {"good", "syntax"}  # syntax errors are found by check
    verbose = agent_hook("hooks", "list", "-v").stdout
    assert "    - not on PATH: surely-not-installed-xyz" in verbose
    info = json.loads(agent_hook("hooks", "info", "good", "--json").stdout)
    assert info["matcher"] == "Bash" and info["priority"] == 5 and info["source"] == "managed"
    check = agent_hook("hooks", "check", check=False)
    assert check.returncode == 1 and "✗ syntax (managed): broken: handler.py line 1" in check.stdout
    assert "✓ good (managed): ready" in check.stdout and "! needs (managed): will not run here" in check.stdout
    agent_hook("hooks", "disable", "syntax")
    assert agent_hook("hooks", "check", check=False).returncode == 0  # broken but off: a warning
    (bad / "handler.py").write_text("x = 1\n")
    agent_hook("hooks", "enable", "syntax")
    assert "defines no handle(event) function" in agent_hook("hooks", "check", check=False).stdout
    doctor = json.loads(agent_hook("doctor", "--json", "--no-run", check=False).stdout)
    areas = [c for c in doctor["checks"] if c["area"] == "handlers"]
    assert any(c["status"] == "fail" and "syntax" in c["summary"] for c in areas)


def test_install_copy_link_pack_and_refusals(tmp_path: Path, hooks_home: Path) -> None:
    src = write_handler(tmp_path / "src", "team-policy",
                        code="def handle(event):\n    return {'decision': 'deny', 'reason': 'team'}\n")
    out = agent_hook("hooks", "install", str(src)).stdout
    dest = hooks_home / "hooks" / "team-policy"
    assert f"installed team-policy -> {dest}" in out
    assert oct(dest.stat().st_mode & 0o777) == "0o700" and oct((dest / "handler.py").stat().st_mode & 0o777) == "0o600"
    assert specific(run_hook(pre_payload("ls")))["permissionDecisionReason"] == "team"
    again = agent_hook("hooks", "install", str(src), check=False)
    assert again.returncode == 1 and "exists (use --force" in again.stderr
    # A pack, linked where it is.
    pack = tmp_path / "pack"
    write_handler(pack, "audit", events=["Stop"])
    write_handler(pack, "notify", events=["Notification"], executable="#!/bin/sh\n")
    (pack / "hooks-pack.json").write_text('{"handlers": ["audit", "notify"]}')
    agent_hook("hooks", "install", "--link", str(pack))
    config = tomllib.loads((hooks_home / "config.toml").read_text())
    assert config["handlers"]["extra_dirs"] == [str(pack.resolve())]
    names = {h["name"]: h["source"] for h in json.loads(agent_hook("hooks", "list", "--json").stdout)}
    assert names["audit"] == "extra" and names["notify"] == "extra"
    # Broken and outward-pointing handlers are refused, nothing copied.
    broken = write_handler(tmp_path / "src", "broken", events=[])
    proc = agent_hook("hooks", "install", str(broken), check=False)
    assert proc.returncode == 1 and "no events" in proc.stderr and not (hooks_home / "hooks" / "broken").exists()
    leaky = write_handler(tmp_path / "src", "leaky")
    (leaky / "data").symlink_to("/etc")
    proc = agent_hook("hooks", "install", str(leaky), check=False)
    assert proc.returncode == 1 and "leads outside" in proc.stderr and not (hooks_home / "hooks" / "leaky").exists()


def test_new_scaffolds_a_working_handler(hooks_home: Path) -> None:
    agent_hook("hooks", "new", "guard-rm", "--event", "PreToolUse")
    agent_hook("hooks", "new", "guard-rm-exec", "--event", "PreToolUse", "--exec")
    # A new handler starts off (test_new_handler_starts_off_...): switched on, it works as scaffolded.
    agent_hook("hooks", "enable", "guard-rm")
    agent_hook("hooks", "enable", "guard-rm-exec")
    assert "✓ guard-rm (managed): ready" in agent_hook("hooks", "check").stdout
    out = specific(run_hook(pre_payload("rm -rf /")))
    assert out["permissionDecision"] == "deny" and "guard-rm" in out["permissionDecisionReason"]
    agent_hook("hooks", "disable", "guard-rm")
    out = specific(run_hook(pre_payload("rm -rf /", tool_use_id="t2")))
    assert out["permissionDecisionReason"] == "guard-rm-exec: not on this machine."


def test_workspace_handlers_run_only_once_the_operator_enables_them(tmp_path: Path, hooks_home: Path) -> None:
    ws = tmp_path / "repo"
    marker = tmp_path / "ran"
    write_handler(ws / ".agent-hooks" / "hooks", "repo-hook",
                  code=f"def handle(event):\n    open({str(marker)!r}, 'w').write('ran')\n")
    payload = pre_payload("ls", cwd=str(ws))
    run_hook(payload)
    assert not marker.exists()  # opening a repository runs none of its code
    listing = agent_hook("hooks", "list", "-v", "--workspace", str(ws)).stdout
    assert "repo-hook" in listing and "until the operator trusts this workspace" in listing
    out = agent_hook("hooks", "enable", "repo-hook", "--workspace", str(ws)).stdout
    assert f"trusted workspace {ws.resolve()}" in out
    run_hook({**payload, "tool_use_id": "t2"})
    assert marker.read_text() == "ran"
    # CLAUDE_PROJECT_DIR names the workspace when the session's cwd is below it.
    marker.unlink()
    (ws / "sub").mkdir()
    run_hook({**payload, "cwd": str(ws / "sub"), "tool_use_id": "t3"}, env={"CLAUDE_PROJECT_DIR": str(ws)})
    assert marker.exists()


def test_a_broken_registry_fails_open(managed: Path, hooks_home: Path) -> None:
    write_handler(managed, "fine", code=context_handler("fine"))
    cache_dir = hooks_home / "cache"
    run_hook(pre_payload("ls"))
    cache = next(cache_dir.glob("handlers-*.bin"))
    good = cache.read_bytes()
    damaged = [b"{not marshal", good[: len(registry.CACHE_MAGIC) + 9],  # foreign; cut short
               registry.CACHE_MAGIC + b"\xff" * 40]  # our header, garbage behind it
    for i, bad in enumerate(damaged):
        cache.write_bytes(bad)
        assert specific(run_hook(pre_payload("ls", tool_use_id=f"t{i}")))["additionalContext"] == "fine"  # rebuilt
        assert cache.read_bytes() == good


def test_hook_with_handlers_prints_exactly_the_protocol(managed: Path) -> None:
    write_handler(managed, "chatty", events=["SessionStart"], code="import sys\n"
                  "print('import-time noise')\ndef handle(event):\n    sys.stdout.write('x')\n")
    start = {"session_id": "s-p", "hook_event_name": "SessionStart", "cwd": "/tmp", "source": "startup"}
    proc = run_exe("agent-hook-session-start", start)
    assert proc.returncode == 0 and proc.stdout == b""


def test_a_steady_state_hook_with_handlers_imports_no_yaml_nor_the_cli(managed: Path, hooks_home: Path) -> None:
    from support.handlers import old_mtimes
    from support.scripts import BIN

    write_handler(managed, "ctx", code=context_handler("hello"))
    write_handler(managed, "exe", executable="#!/bin/sh\n")
    old_mtimes(managed)
    first = run_hook(pre_payload("ls"))  # builds the registry (PyYAML) once
    assert specific(first)["additionalContext"] == "hello"
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.run([str(BIN / "agent-hook-pre-tool-use")], input=json.dumps(pre_payload("ls", tool_use_id="t2")).encode(),
                          capture_output=True, env=env, timeout=30)
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
    assert "agent_hooks.handlers.run" in imported and "agent_hooks.handlers.registry" in imported
    heavy = {m for m in imported if m.split(".")[0] in ("yaml", "click", "httpx", "sqlite_utils", "filelock",
                                                        "agent_hooks.handlers.discovery")}
    assert not heavy and "agent_hooks.handlers.discovery" not in imported, sorted(heavy)


def test_an_in_process_handler_loads_only_the_hot_path(managed: Path) -> None:
    """A steady call with one plain in-process handler imports the registry and run.py, nothing
    heavier: no PyYAML (no rebuild), no eligibility.py (nothing to check), no subprocess (no
    executable handler). The handler itself reports what its hook process has loaded."""
    heavy = ("yaml", "subprocess", "agent_hooks.handlers.eligibility", "agent_hooks.handlers.executable",
             "agent_hooks.handlers.discovery")
    write_handler(managed, "modules", code=f"import sys\ndef handle(event):\n"
                  f"    return {{'context': 'loaded: ' + ','.join(m for m in {heavy!r} if m in sys.modules)}}\n")
    first = specific(run_hook(pre_payload("ls", tool_use_id="t1")))["additionalContext"]
    assert "yaml" in first and "discovery" in first  # the first call compiles the registry
    assert specific(run_hook(pre_payload("ls", tool_use_id="t2")))["additionalContext"] == "loaded: "


def test_new_handler_starts_off_private_and_doctor_notices_loose_modes(tmp_path: Path) -> None:
    """`hooks new` in a fresh HOME (the XDG directories, umask 022): the handler runs on no hook call
    until `hooks enable`, as its message says; ~/.config/agent-hooks and hooks/ are 0700, HOOK.md and
    handler.py 0600; doctor flags the modes once they are loosened."""
    from support.scripts import BIN

    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HOOKS", "XDG_"))}
    env["HOME"] = str(home)

    def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(BIN / "agent-hook"), *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=60, preexec_fn=lambda: os.umask(0o022))
        assert proc.returncode == 0 or not check, proc.stdout + proc.stderr
        return proc

    out = cli("hooks", "new", "guard-rm", "--event", "PreToolUse").stdout
    assert "off" in out and "agent-hook hooks enable guard-rm" in out, out
    config = home / ".config" / "agent-hooks"
    handler = config / "hooks" / "guard-rm"
    for path, mode in ((config, 0o700), (config / "hooks", 0o700), (handler, 0o700),
                       (handler / "HOOK.md", 0o600), (handler / "handler.py", 0o600)):
        assert oct(path.stat().st_mode & 0o777) == oct(mode), path
    listed = {h["name"]: h for h in json.loads(cli("hooks", "list", "--json").stdout)}
    assert listed["guard-rm"]["status"] == "disabled", listed["guard-rm"]
    denied = subprocess.run([str(BIN / "agent-hook-pre-tool-use")], input=json.dumps(pre_payload("rm -rf /")),
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert denied.returncode == 0 and denied.stdout == "", denied.stdout  # off: the template denies nothing yet
    cli("hooks", "enable", "guard-rm")
    listed = {h["name"]: h for h in json.loads(cli("hooks", "list", "--json").stdout)}
    assert listed["guard-rm"]["status"] == "ready", listed["guard-rm"]

    def handler_modes() -> list[dict]:
        report = json.loads(cli("doctor", "--json", "--no-run", check=False).stdout)
        return [c for c in report["checks"] if c["area"] == "handlers" and "modes" in (c.get("data") or {})]

    assert handler_modes() == []
    config.chmod(0o755)
    (handler / "HOOK.md").chmod(0o644)
    found = handler_modes()
    assert len(found) == 1 and found[0]["status"] == "warn", found
    assert set(found[0]["data"]["modes"]) == {str(config), str(handler / "HOOK.md")}
    assert f"chmod 700 {config}" in found[0]["fix"]
    (handler / "handler.py").chmod(0o666)
    assert handler_modes()[0]["status"] == "fail"


def test_hooks_install_into_a_fresh_home_keeps_the_config_dir_private(tmp_path: Path) -> None:
    from support.scripts import BIN

    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HOOKS", "XDG_"))}
    env["HOME"] = str(home)
    src = write_handler(tmp_path / "src", "audit")
    proc = subprocess.run([str(BIN / "agent-hook"), "hooks", "install", str(src)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60, preexec_fn=lambda: os.umask(0o022))
    assert proc.returncode == 0, proc.stderr
    config = home / ".config" / "agent-hooks"
    assert oct(config.stat().st_mode & 0o777) == "0o700" and oct((config / "hooks").stat().st_mode & 0o777) == "0o700"
