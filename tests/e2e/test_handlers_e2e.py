"""User handlers under the real client: a managed policy handler denies `git push --force` and the
model reads why; failing handlers beside it change nothing else; `hooks disable` acts on the next
call; updated_input rewrites a call; each bundled handler does its job in a real session."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import textwrap
from typing import Any

from harness import BIN_DIR, E2E
from model_server import text, tool_use

from support.handlers import write_handler

AGENT_HOOK = BIN_DIR / "agent-hook"
POLICY = "Team policy: no force-push from agents. Push a branch and open a PR instead."
FORCE_PUSH_HANDLER = f"""
import re

def handle(event):
    command = event["payload"]["tool_input"].get("command", "")
    if re.search(r"\\bgit\\s+push\\b.*\\s(--force|-f)\\b", command):
        return {{"decision": "deny", "reason": {POLICY!r}}}
    return None
"""


def _content(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content)


def _results(e2e: E2E) -> dict[str, dict[str, Any]]:
    return {r["tool_use_id"]: r for r in e2e.server.tool_results()}


def _bash(command: str, id: str) -> Any:  # noqa: A002
    return tool_use("Bash", {"command": command, "description": "step"}, id=id)


def _config(e2e: E2E, toml: str) -> None:
    path = e2e.agent_home / "config.toml"
    path.write_text(textwrap.dedent(toml))
    path.chmod(0o600)


def _cli(e2e: E2E, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(AGENT_HOOK), *args], env=e2e.env(), capture_output=True, text=True, timeout=60,
                          cwd=e2e.workspace)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_policy_handler_denies_force_push_beside_failing_handlers_and_the_loop_guard_still_works(e2e: E2E) -> None:
    managed = e2e.agent_home / "hooks"
    write_handler(managed, "deny-force-push", matcher="Bash", priority=10, code=FORCE_PUSH_HANDLER)
    write_handler(managed, "raises", priority=20, code="def handle(event):\n    raise RuntimeError('broken on purpose')\n")
    write_handler(managed, "hangs", priority=30, timeout_ms=300,
                  code="import time\ndef handle(event):\n    time.sleep(60)\n")
    assert "ready" in _cli(e2e, "hooks", "check").stdout
    ticks = [f"toulu_tick{n}" for n in range(7)]
    e2e.server.set_script(
        [[_bash("git push --force origin main", "toolu_push")]]
        + [[_bash("echo tick >> ticks.txt", i)] for i in ticks]
        + [[text("Done.")]])
    loops = {"AGENT_HOOKS__LOOPS__REPEAT_WARN": "3", "AGENT_HOOKS__LOOPS__REPEAT_BLOCK": "5"}
    run = e2e.run("Push, then tick.", env_extra=loops)
    assert run.ok and run.result["result"] == "Done.", e2e.describe()
    results = _results(e2e)
    push = results["toolu_push"]
    assert push.get("is_error") is True and POLICY in _content(push), push
    # The loop guard did what it does without handlers: warned at 3, denied from 5 on.
    assert (e2e.workspace / "ticks.txt").read_text() == "tick\n" * 4
    assert e2e.server.requests_containing("Loop guard warning: 3 identical Bash calls")
    for i in ticks[4:]:
        assert "Loop guard: blocked" in _content(results[i]) and POLICY not in _content(results[i])
    rows = e2e.query("SELECT decision, rule FROM tool_calls WHERE session_id = ? ORDER BY id", run.session_id)
    assert rows[0] == {"decision": "deny", "rule": "handler:deny-force-push"}
    assert [r["decision"] for r in rows[1:]] == ["allow", "allow", "warn", "warn", "deny", "deny", "deny"]
    # The failures are logged by name, once per call they ran on (not on calls the guards denied).
    errors = e2e.errors()
    assert {e["kind"] for e in errors} == {"handler"}, errors
    raised = [e for e in errors if e["message"].startswith("handler raises: raised RuntimeError")]
    hung = [e for e in errors if e["message"].startswith("handler hangs: timed out after 300 ms")]
    assert len(raised) == len(hung) == 4, errors  # the 4 ticks that ran (the push stopped at the deny)


def test_hooks_disable_takes_effect_on_the_next_call(e2e: E2E) -> None:
    write_handler(e2e.agent_home / "hooks", "deny-force-push", matcher="Bash", code=FORCE_PUSH_HANDLER)
    e2e.server.set_script([
        [_bash("git push --force origin main", "toolu_1")],
        [_bash(f"{AGENT_HOOK} hooks disable deny-force-push", "toolu_2")],
        [_bash("git push --force origin main", "toolu_3")],
        [text("Pushed or not, done.")],
    ])
    run = e2e.run("Push it.")
    assert run.ok, e2e.describe()
    results = _results(e2e)
    assert POLICY in _content(results["toolu_1"])
    assert "disabled deny-force-push" in _content(results["toolu_2"])
    # The same call now runs (and fails on its own: there is no repository here).
    assert POLICY not in _content(results["toolu_3"]) and "git" in _content(results["toolu_3"]).lower()
    assert e2e.errors() == []


def test_updated_input_rewrites_the_call_the_client_runs(e2e: E2E) -> None:
    write_handler(e2e.agent_home / "hooks", "rewrite", matcher="Bash", code="""
        def handle(event):
            cmd = event["payload"]["tool_input"]["command"]
            if "original" in cmd:
                return {"updated_input": {"command": cmd.replace("original", "rewritten")}}
        """)
    e2e.server.set_script([[_bash("echo original > out.txt", "toolu_w")], [text("ok")]])
    run = e2e.run("Write it.")
    assert run.ok, e2e.describe()
    assert (e2e.workspace / "out.txt").read_text() == "rewritten\n"
    assert e2e.errors() == []


# -- bundled handlers ----------------------------------------------------------------------------

def test_command_logger_keeps_an_audit_log_of_prompts_and_tool_calls(e2e: E2E) -> None:
    log = e2e.root / "audit" / "commands.jsonl"
    _config(e2e, f"""
        [handlers.entries.command-logger]
        enabled = true
        path = "{log}"
        """)
    e2e.server.set_script([[_bash("echo one", "toolu_a")], [_bash("echo two", "toolu_b")], [text("logged")]])
    run = e2e.run("Log these commands please.", env_extra={"AGENT_HOOKS_AGENT": "auditor"})
    assert run.ok, e2e.describe()
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in entries] == ["UserPromptSubmit", "PreToolUse", "PreToolUse"]
    assert entries[0]["prompt"] == "Log these commands please." and entries[0]["agent"] == "auditor"
    assert [e["tool_input"]["command"] for e in entries[1:]] == ["echo one", "echo two"]
    assert {e["session_id"] for e in entries} == {run.session_id}
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    assert e2e.errors() == []


def test_boot_md_is_injected_at_startup(e2e: E2E) -> None:
    (e2e.workspace / "BOOT.md").write_text("Before anything else: run `make bootstrap-7Q2`.\n")
    _cli(e2e, "hooks", "enable", "boot-md")
    e2e.server.set_script([[text("Booted.")]])
    run = e2e.run("Start.")
    assert run.ok, e2e.describe()
    first = e2e.server.messages("main")[0]
    assert "make bootstrap-7Q2" in first.text and "BOOT.md (start-up instructions" in first.text
    assert e2e.errors() == []


def test_bootstrap_extra_files_injects_globbed_files(e2e: E2E) -> None:
    (e2e.workspace / "docs").mkdir()
    (e2e.workspace / "docs" / "architecture.md").write_text("The flux bus carries AX-31 frames.\n")
    (e2e.workspace / "docs" / "skip.txt").write_text("NOT-INJECTED-99\n")
    _config(e2e, """
        [handlers.entries.bootstrap-extra-files]
        enabled = true
        patterns = ["docs/*.md"]
        """)
    e2e.server.set_script([[text("Read them.")]])
    run = e2e.run("Start.")
    assert run.ok, e2e.describe()
    first = e2e.server.messages("main")[0].text
    assert "docs/architecture.md" in first and "AX-31 frames" in first and "NOT-INJECTED-99" not in first
    assert e2e.errors() == []


def test_session_memory_saves_the_summary_where_memory_search_finds_it(e2e: E2E) -> None:
    _cli(e2e, "hooks", "enable", "session-memory")
    e2e.server.set_script([[_bash("echo calibrating > flux.log", "toolu_m")],
                           [text("Calibrated the flux capacitor at 1.21 gigawatts.")]])
    run = e2e.run("Calibrate the flux capacitor")
    assert run.ok, e2e.describe()
    day = dt.datetime.now().strftime("%Y-%m-%d")
    saved = e2e.workspace / "memory" / f"{day}-calibrate-the-flux-capacitor.md"
    assert saved.exists(), (list((e2e.workspace / "memory").iterdir()) if (e2e.workspace / "memory").exists()
                            else e2e.describe())
    body = saved.read_text()
    assert f"session: {run.session_id}" in body and "1.21 gigawatts" in body
    found = json.loads(_cli(e2e, "memory", "search", "gigawatts", "--json").stdout)
    assert any(str(saved.resolve()) == hit.get("path") for hit in found["hits"]), found
    assert e2e.errors() == []
