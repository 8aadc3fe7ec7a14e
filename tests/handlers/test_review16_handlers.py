"""Review 16 of the user handlers: odd inputs and odd results must cost one handler, never the others,
the answer's shape, or the trace in the error log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.handlers import answer, pre_payload, specific, write_handler
from support.scripts import agent_hook, error_log, run_exe, run_hook

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")


@pytest.fixture
def managed(hooks_home: Path) -> Path:
    return hooks_home / "hooks"


def context_handler(text: str) -> str:
    return f"def handle(event):\n    return {{'context': {text!r}}}\n"


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
    import time

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


def test_a_catastrophic_matcher_is_refused_not_run_on_every_tool_call(managed: Path, hooks_home: Path) -> None:
    # re holds the GIL while it backtracks: (\w+)*X on a 33-character MCP tool name ran for minutes,
    # and not even the runner's deadline thread could answer. Such a matcher is now a HOOK.md error.
    write_handler(managed, "nested", matcher=r"(\w+)*X", code=context_handler("nested ran"))
    write_handler(managed, "good", code=context_handler("good ran"))
    import time

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
    import os

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
