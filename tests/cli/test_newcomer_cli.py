"""The CLI as a newcomer meets it (commands, messages, exit codes, progress).

Every command runs as the installed console script on a real store in tmp_path.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from support.populated_store import SESSION_A, SESSION_B, SESSION_C, populate
from support.repo import fixture_payload
from support.scripts import BIN, EXECUTABLES, agent_hook, run_exe, run_hook

NOT_FOUND = 3


@pytest.fixture
def store(hooks_home: Path, tmp_path: Path) -> Path:
    populate(hooks_home, tmp_path)
    return hooks_home


def j(*args: str, env: dict[str, str] | None = None) -> object:
    return json.loads(agent_hook(*args, env=env).stdout)


# -- session list / task list ---------------------------------------------------------------------

def test_session_list_filters_and_json(store: Path) -> None:
    ids = [s["session_id"] for s in j("session", "list", "--json")["sessions"]]
    assert set(ids) == {SESSION_A, SESSION_B, SESSION_C}
    assert [s["session_id"] for s in j("session", "list", "--state", "ended", "--json")["sessions"]] == [SESSION_C]
    assert [s["session_id"] for s in j("session", "list", "--agent", "bob", "--json")["sessions"]] == [SESSION_B]
    assert [s["session_id"] for s in j("session", "list", "--task", "build-1", "--json")["sessions"]] == [SESSION_A]
    assert [s["session_id"] for s in j("session", "list", "--tmux", "agent-b", "--json")["sessions"]] == [SESSION_B]
    assert len(j("session", "list", "--limit", "1", "--json")["sessions"]) == 1
    text = agent_hook("session", "list", "--state", "live", "--state", "awaiting").stdout
    assert SESSION_B in text and SESSION_C not in text
    assert "no sessions match" in agent_hook("session", "list", "--agent", "nobody").stdout


def test_task_list_filters_and_json(store: Path) -> None:
    tasks = {t["task_id"]: t for t in j("task", "list", "--json")["tasks"]}
    assert set(tasks) == {"build-1", "docs-2"}
    assert tasks["build-1"]["sessions"] == 1 and tasks["docs-2"]["description"] == "Write the docs"
    agent_hook("task", "cancel", "docs-2", "--reason", "not needed")
    assert [t["task_id"] for t in j("task", "list", "--state", "cancelled", "--json")["tasks"]] == ["docs-2"]
    assert [t["task_id"] for t in j("task", "list", "--state", "open", "--json")["tasks"]] == ["build-1"]
    assert "Write the docs" in agent_hook("task", "list").stdout


def test_task_cancel_and_its_help(store: Path) -> None:
    assert "cancel" in agent_hook("task", "--help").stdout.lower()
    out = j("task", "cancel", "build-1", "--reason", "superseded", "--json")
    assert out["task_id"] == "build-1" and out["cancelled"] is True and out["task_sessions"] == 1
    assert j("task", "show", "build-1", "--json")["state"] == "cancelled"
    pre = run_hook(fixture_payload("PreToolUse-Bash.json"))
    assert "deny" in pre.stdout.decode() and "superseded" in pre.stdout.decode()
    assert j("task", "uncancel", "build-1", "--json")["cancelled"] is False
    assert agent_hook("task", "cancel", "build-1", check=False).returncode == 2  # --reason missing


# -- one id-prefix matcher --------------------------------------------------------------------------

def test_id_prefixes_everywhere(store: Path) -> None:
    assert j("session", "show", SESSION_A[:6], "--json")["session_id"] == SESSION_A
    assert j("summary", "show", SESSION_A[:4], "--json")["session_id"] == SESSION_A  # only A has a summary
    for args in (("session", "show", SESSION_A[:4]), ("cancel", SESSION_A[:4], "--reason", "x"), ("uncancel", SESSION_A[:4]),
                 ("session", "reset-guards", SESSION_A[:4]), ("task", "assign", SESSION_A[:4], "t")):
        proc = agent_hook(*args, check=False)
        assert proc.returncode == 1, args
        assert "ambiguous" in proc.stderr and SESSION_A in proc.stderr and SESSION_B in proc.stderr, proc.stderr
    out = j("cancel", SESSION_B[:6], "--reason", "wrong branch", "--json")
    assert out["sessions"] == [SESSION_B] and out["cancelled"] is True
    assert j("session", "show", SESSION_B, "--json")["cancelled"] is True
    assert j("uncancel", SESSION_B[:6], "--json")["sessions"] == [SESSION_B]
    assert j("session", "reset-guards", "c0ff", "--json") == {"session_id": SESSION_C, "reset": True}
    assigned = j("task", "assign", "c0ff", "docs-2", "--json")
    assert [s["session_id"] for s in assigned["sessions"]] == [SESSION_C]
    assert j("task", "show", "docs", "--json")["task_id"] == "docs-2"  # task show takes a prefix too


def test_not_found_is_exit_3_everywhere(store: Path) -> None:
    for args in (("session", "show", "ffff"), ("session", "reset-guards", "ffff"), ("cancel", "ffff", "--reason", "x"),
                 ("uncancel", "ffff"), ("task", "show", "nope"), ("task", "assign", "ffff", "t"),
                 ("summary", "show", "ffff"), ("identity", "show", "nobody"), ("identity", "history", "nobody", "SOUL.md"),
                 ("cancel", "--tmux", "no-such-tmux", "--reason", "x")):
        proc = agent_hook(*args, check=False)
        assert proc.returncode == NOT_FOUND, (args, proc.returncode, proc.stderr)
        assert "no " in proc.stderr or "has no" in proc.stderr


def test_cancel_without_target_says_so_first(store: Path) -> None:
    proc = agent_hook("cancel", check=False)
    assert proc.returncode == 2
    assert "say what to cancel" in proc.stderr and "--reason" not in proc.stderr.split("say what")[0]
    assert "SESSION_ID" in proc.stderr
    proc = agent_hook("cancel", SESSION_A, check=False)
    assert proc.returncode == 2 and "give --reason" in proc.stderr


def test_changing_commands_answer_json(store: Path) -> None:
    created = j("task", "create", "new-3", "-d", "A new task", "--json")
    assert created["task_id"] == "new-3" and created["description"] == "A new task"
    assert j("task", "progress", "new-3", "half done", "--json")["progress"] == "half done"
    assert j("task", "describe", "new-3", "Changed", "--json")["description"] == "Changed"
    assert j("cancel", "--task", "new-3", "--reason", "stop", "--json")["task_id"] == "new-3"
    retried = j("queue", "retry", "--all", "--json", env={"AGENT_HOOKS__FORWARD__AUTOSTART": "false"})
    assert retried["requeued"] == 2 and len(retried["ids"]) == 2 and retried["not_dead_letters"] == []
    assert j("queue", "purge", "--all", "--yes", "--json") == {"purged": 3, "which": "all"}
    drained = j("queue", "drain", "--json")  # forwarding is off in tests: nothing to deliver
    assert drained["delivered"] == 0 and drained["remaining"] == 0


# -- messages -----------------------------------------------------------------------------------------

def test_cancelled_session_without_task_is_this_session(store: Path) -> None:
    agent_hook("cancel", SESSION_B, "--reason", "operator stop")
    pre = dict(fixture_payload("PreToolUse-Bash.json"), session_id=SESSION_B)
    reason = json.loads(run_hook(pre).stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason.startswith("This session was cancelled by the operator. Reason: operator stop.")
    assert "task" not in reason.split(".")[0].lower()


def test_search_scores_are_not_rounded_to_zero(store: Path) -> None:
    hits = j("memory", "search", "deploy", "runbook", "--json")["hits"]
    assert hits and all(h["score"] != 0 for h in hits)
    # The text says why each hit matched, in words, not a fused score.
    line = agent_hook("memory", "search", "deploy", "runbook").stdout.splitlines()[0]
    assert line.endswith(")") and "every word" in line, line


def test_plurals(store: Path) -> None:
    assert "1 error not yet marked seen" in agent_hook("status").stdout
    assert "(2 versions)" in agent_hook("identity", "show", "ada").stdout
    assert "1 error " in agent_hook("errors").stdout


# -- hook executables ------------------------------------------------------------------------------

@pytest.mark.parametrize("exe", sorted(EXECUTABLES.values()))
def test_hook_executables_answer_help_and_version(exe: str, hooks_home: Path) -> None:
    from agent_hooks import __version__

    for flag in ("--help", "-h"):
        helped = run_exe_args(exe, flag)
        assert helped.returncode == 0 and f"usage: {exe}" in helped.stdout.decode(), helped
        assert "agent-hook settings install" in helped.stdout.decode() and helped.stderr == b""
    version = run_exe_args(exe, "--version")
    assert version.returncode == 0 and version.stdout.decode().strip() == f"{exe} (agent-hooks) {__version__}"
    # Without a flag it is still the fail-open hook reading stdin.
    plain = run_exe(exe, b"")
    assert plain.returncode == 0 and b"empty stdin" in plain.stderr and plain.stdout == b""


def run_exe_args(exe: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(BIN / exe), *args], input=b"", capture_output=True, timeout=30)


# -- progress -------------------------------------------------------------------------------------------

def test_drain_against_a_dead_server_says_what_it_waits_for(store: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"AGENT_HOOKS__FORWARD__ENABLED": "true", "AGENT_HOOKS__FORWARD__AUTOSTART": "false",
           "AGENT_HOOKS_INGEST_URL": f"http://127.0.0.1:{port}/api/hooks/ingest",
           "AGENT_HOOKS__FORWARD__BACKOFF_INITIAL_S": "0.1"}
    started = time.monotonic()
    proc = agent_hook("queue", "drain", "--give-up-after", "0.8", env=env, check=False)
    assert time.monotonic() - started < 30
    assert proc.returncode == 1 and "1 event still queued" in proc.stderr
    out = proc.stdout
    assert "delivering 1 queued event to" in out
    assert f"waiting for the ingest server at http://127.0.0.1:{port}/api/hooks/ingest to answer" in out
    assert "retrying for up to 0.8 s" in out and "Ctrl-C stops, events stay queued" in out
    assert "still unreachable after" in out and "next try in" in out and "giving up" in out


def test_settings_backups_are_kept_to_a_few(hooks_home: Path, tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text('{"model": "opus"}\n')
    for _ in range(5):  # each install and uninstall rewrites the file and leaves a backup
        agent_hook("settings", "install", "--settings", str(settings))
        agent_hook("settings", "uninstall", "--settings", str(settings))
        time.sleep(0.01)
    backups = sorted(tmp_path.glob("settings.json.bak-agent-hooks-*"))
    assert len(backups) == 5
    os.chmod(settings, 0o600)
    agent_hook("settings", "install", "--settings", str(settings), env={"AGENT_HOOKS__INSTALL__KEEP_BACKUPS": "2"})
    kept = sorted(tmp_path.glob("settings.json.bak-agent-hooks-*"), key=lambda p: p.stat().st_mtime_ns)
    assert len(kept) == 2
    # The newest backup holds the file as it was just before this install: nothing recent is lost.
    assert json.loads(kept[-1].read_text()) == {"model": "opus"}
    (tmp_path / "settings.json.bak-other-tool").write_text("{}")
    agent_hook("settings", "uninstall", "--settings", str(settings), env={"AGENT_HOOKS__INSTALL__KEEP_BACKUPS": "1"})
    assert (tmp_path / "settings.json.bak-other-tool").exists()
    assert len(list(tmp_path.glob("settings.json.bak-agent-hooks-*"))) == 1


# -- hints ----------------------------------------------------------------------------------------------

def test_creating_an_existing_task_points_at_the_command_that_does_what_was_asked(store: Path) -> None:
    agent_hook("task", "create", "T-9")
    proc = agent_hook("task", "create", "T-9", "--persist", check=False)
    assert proc.returncode != 0 and "agent-hook task persist T-9" in proc.stderr, proc.stderr
    assert "describe" not in proc.stderr
    # The hint works as given.
    agent_hook(*proc.stderr.split("to change it: agent-hook ")[1].split()[:3])
    assert j("task", "show", "T-9", "--json")["persists"] is True
    proc = agent_hook("task", "create", "T-9", "-d", "New words", check=False)
    assert "agent-hook task describe T-9" in proc.stderr and "persist" not in proc.stderr


def _commands_section(text: str) -> dict[str, str]:
    """`Commands:` of a click help page: name -> its help, wrapped lines joined."""
    rows: dict[str, str] = {}
    name = None
    for line in text.split("Commands:\n", 1)[1].splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, rest = line.strip().partition(" ")
            rows[name] = rest.strip()
        elif name and line.strip():
            # The wrapper also breaks after a hyphen ("command-" / "center.md").
            rows[name] += ("" if rows[name].endswith("-") else " ") + line.strip()
    return rows


def test_help_lists_each_command_with_its_first_sentence_whole() -> None:
    """`agent-hook --help` (and every group's) at 80 columns: no description cut mid-sentence."""
    import click

    from agent_hooks.cli import cli

    def groups(group: click.Group, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], click.Group]]:
        found = [(path, group)]
        for name, sub in group.commands.items():
            if isinstance(sub, click.Group):
                found += groups(sub, (*path, name))
        return found

    checked = 0
    for path, group in groups(cli, ()):
        text = agent_hook(*path, "--help", env={"COLUMNS": "80"}).stdout
        for name, shown in _commands_section(text).items():
            doc = " ".join((group.commands[name].help or "").strip().split("\n\n")[0].split())
            assert not shown.endswith("..."), f"{' '.join(path)} {name}: {shown!r}"
            # The whole first sentence: the start of the docstring, ending where a sentence ends.
            assert doc.startswith(shown) and (shown == doc or shown.endswith((".", "!", "?"))), (path, name, shown)
            checked += 1
    assert checked > 40
