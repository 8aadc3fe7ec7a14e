"""`agent-hook settings install/uninstall` over a corpus of realistic settings.json files.

Every test runs with HOME and AGENT_HOOKS_HOME in tmp_path; the real home is never read.
"""

from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_hooks import config as config_mod
from agent_hooks.cli import cli
from agent_hooks.cli.settings import EXECUTABLES, HOOKS, PLACEHOLDER, is_ours, render, template
from agent_hooks.wiring.entries import LAUNCHER_MARK, command_for, handler_words

from support.repo import ROOT
from support.scripts import BIN as BIN_DIR
from support.scripts import agent_hook, fresh_env, sh

BIN = str(BIN_DIR)  # as the commands settings install writes name it
OUR_EVENTS = [event for event, _, _ in HOOKS]

# Other tools' hooks and settings, the way people's files look.
OTHERS: dict[str, Any] = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "model": "opus",
    "permissions": {"allow": ["Bash(npm run test:*)", "Read(~/.zshrc)"], "deny": ["Read(./.env)"]},
    "env": {"CLAUDE_CODE_ENABLE_TELEMETRY": "0"},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "npx prettier --write \"$(jq -r '.tool_input.file_path')\""}]}
        ],
        "Notification": [
            {"hooks": [{"type": "command", "command": "notify-send 'Claude Code' 'Awaiting your input'"}]}
        ],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 ~/.claude/hooks/bash_guard.py", "timeout": 5}]}
        ],
    },
    "statusLine": {"type": "command", "command": "~/.claude/statusline.sh"},
    "includeCoAuthoredBy": False,
}

# Entries of ours as older versions wrote them (bare paths, the old SessionStart matcher), mixed with
# the user's own, some of which only look like ours: they stay.
OLDER: dict[str, Any] = {
    "model": "sonnet",
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [
                {"type": "command", "command": "python3 ~/.claude/hooks/bash_guard.py"},
                {"type": "command", "command": "/opt/old-venv/bin/agent-hook-pre-tool-use", "timeout": 30},
            ]},
            {"matcher": "*", "hooks": [{"type": "command", "command": "/opt/old-venv/bin/agent-hook-pre-tool-use", "timeout": 10000}]},
        ],
        "Stop": [
            {"hooks": [{"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.venv/bin/agent-hook-stop"}]},
            {"hooks": [{"type": "command", "command": "say done"}]},
            {"hooks": [{"type": "command", "command": "agent-hook queue drain --idle 1"}]},
        ],
        "SessionStart": [
            {"matcher": "startup|resume|clear|compact", "hooks": [{"type": "command", "command": "/home/u/x/bin/agent-hook-session-start", "timeout": 10}]},
        ],
        "SessionEnd": [
            {"hooks": [{"type": "command", "command": "/usr/local/bin/agent-hook-audit"}]},
            {"hooks": [{"type": "command", "command": "/usr/bin/python3.11", "args": ["-m", "agent_hooks", "hook", "session-end"]}]},
        ],
        "PostToolUse": [
            {"hooks": [{"type": "command", "command": "AGENT_HOOKS_ROLE=lead /x/agent-hook-post-tool-use"}]},
        ],
        "RetiredEvent": [
            {"hooks": [{"type": "command", "command": "'/path with space/bin/agent-hook-session-end'"}]},
        ],
    },
}
# OLDER without any entry of ours: what uninstall must leave.
OLDER_STRIPPED: dict[str, Any] = {
    "model": "sonnet",
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 ~/.claude/hooks/bash_guard.py"}]},
        ],
        "Stop": [OLDER["hooks"]["Stop"][1], OLDER["hooks"]["Stop"][2]],
        "SessionEnd": OLDER["hooks"]["SessionEnd"],
        "PostToolUse": OLDER["hooks"]["PostToolUse"],
    },
}


@pytest.fixture(autouse=True)
def default_approval_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Install with the shipped approvals.wait_s (tests/conftest.py sets 0 for the hook tests)."""
    monkeypatch.delenv("AGENT_HOOKS__APPROVALS__WAIT_S", raising=False)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("AGENT_HOOKS_HOME", str(tmp_path / "state"))
    for var in list(os.environ):
        if var.startswith("AGENT_HOOKS__") or var.startswith("XDG_"):
            monkeypatch.delenv(var)
    return h


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def settings_file(home: Path) -> Path:
    return home / ".claude" / "settings.json"


def write(path: Path, doc: Any, indent: int = 2) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=indent) + "\n")
    return path.read_bytes()


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak-agent-hooks-*"))


def ours_by_event(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for event, groups in doc.get("hooks", {}).items():
        for group in groups:
            for handler in group.get("hooks", []):
                if is_ours(handler):
                    found.setdefault(event, []).append({"group": group, "handler": handler})
    return found


def assert_wired(doc: dict[str, Any], bin_dir: str = BIN) -> None:
    found = ours_by_event(doc)
    assert sorted(found) == sorted(OUR_EVENTS)
    cfg = config_mod.DEFAULTS
    for event, exe, matcher in HOOKS:
        assert len(found[event]) == 1, f"{event} wired {len(found[event])} times"
        entry = found[event][0]
        assert entry["handler"] == {
            "type": "command",
            "command": command_for(bin_dir, exe, event),
            # PermissionRequest holds its dialog for approvals.wait_s (docs/approvals.md): its timeout is above it.
            "timeout": cfg["approvals"]["wait_s"] + 30 if event == "PermissionRequest" else
            cfg["install"]["session_end_timeout_s" if event == "SessionEnd" else "hook_timeout_s"],
        }
        assert entry["group"].get("matcher") == matcher
        assert entry["group"]["hooks"] == [entry["handler"]], "our group holds only our handler"


def test_template_file_is_the_rendered_spec() -> None:
    text = (ROOT / "settings.template.json").read_text()
    assert text == render(template()), "regenerate: agent-hook settings template > settings.template.json"
    doc = json.loads(text)
    assert list(doc) == ["hooks"]
    deadline_s = config_mod.DEFAULTS["runtime"]["deadline_ms"] / 1000
    commands = []
    for event, groups in doc["hooks"].items():
        (group,) = groups
        (handler,) = group["hooks"]
        assert handler["type"] == "command"
        assert handler["command"].startswith(f"h='{PLACEHOLDER}/agent-hook-")
        assert handler["command"].endswith(LAUNCHER_MARK)
        # Seconds, not ms, and above our own deadline so our fail-open answer comes first.
        if event == "PermissionRequest":
            # It holds the dialog open for a remote answer (docs/approvals.md): above that wait.
            assert handler["timeout"] == config_mod.DEFAULTS["approvals"]["wait_s"] + 30
        else:
            assert deadline_s < handler["timeout"] <= 60
        commands.append(handler["command"])
    assert sorted(os.path.basename(handler_words({"command": c})[0]) for c in commands) == sorted(EXECUTABLES)
    assert "matcher" not in doc["hooks"]["SessionStart"][0], "every source: startup, resume, clear, compact, fork, ..."
    for event in ("PreToolUse", "PostToolUse", "PostToolUseFailure"):
        assert doc["hooks"][event][0]["matcher"] == "*"
    for event in ("UserPromptSubmit", "Stop"):  # Claude Code ignores matchers there
        assert "matcher" not in doc["hooks"][event][0]


@pytest.mark.parametrize("command, ours", [
    ("/home/u/.local/share/agent-hooks/venv/bin/agent-hook-pre-tool-use", True),
    ("agent-hook-stop", True),
    ("'/path with space/bin/agent-hook-stop'", True),
    ("\"$CLAUDE_PROJECT_DIR\"/.venv/bin/agent-hook-stop", True),
    (command_for("/v/bin", "agent-hook-stop", "Stop"), True),
    (command_for("/path with 'quote'/bin", "agent-hook-stop", "Stop"), True),
    # The user's own, even when they run our CLI or look like ours.
    ("agent-hook queue drain --idle 1", False),
    ("/usr/local/bin/agent-hook-audit", False),
    ("agent-hook", False),
    ("AGENT_HOOKS_ROLE=lead env X=1 /x/agent-hook-session-start", False),
    ("/x/agent-hook-stop --verbose", False),
    ("/x/agent-hook-stop; say done", False),
    ("python3 -m agent_hooks.events.stop", False),
    ("echo agent-hook-stop", False),
    ("/usr/bin/my-agent-hook-stop", False),
    ("agent-hooks-other", False),
    ("python3 ~/.claude/hooks/agent_hooks.py", False),
    ("npx prettier --write 'unbalanced", False),
    ("h=/x/agent-hook-stop; exec $h # agent-hooks launcher but not ours", False),
])
def test_recognises_our_entries_in_every_form(command: str, ours: bool) -> None:
    assert is_ours({"type": "command", "command": command}) is ours


def test_exec_form_and_non_command_handlers() -> None:
    assert not is_ours({"type": "command", "command": "python3", "args": ["-m", "agent_hooks", "stop"]})
    assert is_ours({"type": "command", "command": "/v/bin/agent-hook-stop", "args": []})
    assert not is_ours({"type": "command", "command": "/v/bin/agent-hook-stop", "args": ["-v"]})
    assert not is_ours({"type": "http", "url": "http://127.0.0.1/agent-hook-stop"})
    assert is_ours({"type": "http", "url": "http://127.0.0.1:8765/hooks/Stop"})
    assert not is_ours({"type": "http", "url": "http://example.com/hooks/Stop"})
    assert not is_ours({"type": "prompt", "command": "/v/bin/agent-hook-stop"})
    assert not is_ours("agent-hook-stop")


def test_install_without_a_settings_file(home: Path) -> None:
    assert not (home / ".claude").exists()
    result = run("settings", "install")
    assert result.exit_code == 0, result.output
    path = settings_file(home)
    doc = json.loads(path.read_text())
    assert_wired(doc)
    assert list(doc) == ["hooks"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert backups(path) == [], "nothing to back up"
    before = path.read_bytes()
    assert run("settings", "install").exit_code == 0
    assert path.read_bytes() == before
    assert backups(path) == []
    result = run("settings", "uninstall")
    assert result.exit_code == 0 and "removed the file" in result.output, result.output
    # Install created the file, and nothing of the user's is in it: it goes, with no backup of ours.
    assert not path.exists() and backups(path) == []
    assert list(path.parent.iterdir()) == []


def test_uninstall_keeps_a_created_file_the_user_wrote_into(home: Path) -> None:
    path = settings_file(home)
    assert run("settings", "install").exit_code == 0
    doc = json.loads(path.read_text())
    doc["model"] = "opus"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    assert run("settings", "uninstall").exit_code == 0
    assert json.loads(path.read_text()) == {"model": "opus"}


@pytest.mark.parametrize("content", ["", "{}\n"])
def test_uninstall_keeps_a_file_that_was_there_before_install(home: Path, content: str) -> None:
    path = settings_file(home)
    path.parent.mkdir()
    path.write_text(content)
    assert run("settings", "install").exit_code == 0
    assert run("settings", "uninstall").exit_code == 0
    assert path.exists() and json.loads(path.read_text() or "{}") == {}


@pytest.mark.parametrize("content", ["", "\n", "{}", "{}\n"])
def test_install_into_an_empty_file(home: Path, content: str) -> None:
    path = settings_file(home)
    path.parent.mkdir()
    path.write_text(content)
    result = run("settings", "install")
    assert result.exit_code == 0, result.output
    assert_wired(json.loads(path.read_text()))
    assert [b.read_text() for b in backups(path)] == [content]


def test_install_keeps_other_tools_hooks_and_keys(home: Path) -> None:
    path = settings_file(home)
    original = write(path, OTHERS)
    os.chmod(path, 0o644)
    result = run("settings", "install")
    assert result.exit_code == 0, result.output
    doc = json.loads(path.read_text())
    assert_wired(doc)
    # Other keys: same values, same order.
    assert list(doc) == list(OTHERS)
    for key in OTHERS:
        if key != "hooks":
            assert doc[key] == OTHERS[key]
    # Other tools' groups are still first in their events, untouched; ours come after.
    for event, groups in OTHERS["hooks"].items():
        assert doc["hooks"][event][: len(groups)] == groups
        assert len(doc["hooks"][event]) == len(groups) + 1
    assert list(doc["hooks"])[:3] == list(OTHERS["hooks"])
    # The file keeps its mode; the backup is the old bytes, private.
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    (backup,) = backups(path)
    assert backup.read_bytes() == original
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert f"wired {len(HOOKS)} hooks" in result.output and str(backup) in result.output

    # Idempotent: byte-identical, no new backup.
    installed = path.read_bytes()
    again = run("settings", "install")
    assert again.exit_code == 0 and "nothing changed" in again.output
    assert path.read_bytes() == installed
    assert backups(path) == [backup]

    # Uninstall takes out exactly ours.
    assert run("settings", "uninstall").exit_code == 0
    assert json.loads(path.read_text()) == OTHERS
    assert list(json.loads(path.read_text())) == list(OTHERS)
    again = run("settings", "uninstall")
    assert "nothing changed" in again.output


def test_install_replaces_older_entries_of_ours(home: Path) -> None:
    path = settings_file(home)
    write(path, OLDER, indent=4)
    result = run("settings", "install")
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert '\n    "model"' in text, "the file's 4-space indentation is kept"
    doc = json.loads(text)
    assert_wired(doc)
    assert "replaced 5 older entries" in result.output
    assert "RetiredEvent" not in doc["hooks"], "an entry of ours for an event we no longer hook goes"
    # Our replacements sit where the old entries of ours were.
    assert [g["hooks"][0]["command"] for g in doc["hooks"]["PreToolUse"]] == [
        "python3 ~/.claude/hooks/bash_guard.py", command_for(BIN, "agent-hook-pre-tool-use", "PreToolUse")]
    assert doc["hooks"]["Stop"][0]["hooks"][0]["command"] == command_for(BIN, "agent-hook-stop", "Stop")
    assert doc["hooks"]["Stop"][1:] == OLDER["hooks"]["Stop"][1:]
    assert doc["hooks"]["SessionEnd"][:2] == OLDER["hooks"]["SessionEnd"]
    assert doc["hooks"]["PostToolUse"][0] == OLDER["hooks"]["PostToolUse"][0]
    assert list(doc["hooks"])[:5] == ["PreToolUse", "Stop", "SessionStart", "SessionEnd", "PostToolUse"]
    before = path.read_bytes()
    n_backups = len(backups(path))
    assert run("settings", "install").exit_code == 0
    assert path.read_bytes() == before and len(backups(path)) == n_backups
    assert run("settings", "uninstall").exit_code == 0
    assert json.loads(path.read_text()) == OLDER_STRIPPED


def test_dry_run_writes_nothing(home: Path) -> None:
    path = settings_file(home)
    original = write(path, OTHERS)
    result = run("settings", "install", "--dry-run")
    assert result.exit_code == 0
    assert f'+            "command": {json.dumps(command_for(BIN, "agent-hook-stop", "Stop"))},' in result.output
    assert "dry run, nothing written" in result.output
    assert path.read_bytes() == original and backups(path) == []


def test_hooks_key_keeps_its_place(home: Path) -> None:
    path = settings_file(home)
    write(path, {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/old/bin/agent-hook-stop"}]}]},
                 "model": "opus"})
    assert run("settings", "install").exit_code == 0
    doc = json.loads(path.read_text())
    assert list(doc) == ["hooks", "model"]
    assert list(doc["hooks"])[0] == "Stop"
    assert_wired(doc)


def test_uninstall_removes_older_forms_too(home: Path) -> None:
    path = settings_file(home)
    write(path, OLDER)
    result = run("settings", "uninstall")
    assert result.exit_code == 0, result.output
    assert "removed 5 hooks" in result.output
    assert json.loads(path.read_text()) == OLDER_STRIPPED


def test_install_moves_to_a_new_bin_dir(home: Path, tmp_path: Path) -> None:
    path = settings_file(home)
    assert run("settings", "install").exit_code == 0
    other = tmp_path / "other bin"
    other.mkdir()
    for exe in EXECUTABLES:
        (other / exe).write_text("#!/bin/sh\nexit 0\n")
        (other / exe).chmod(0o755)
    result = run("settings", "install", "--bin-dir", str(other))
    assert result.exit_code == 0, result.output
    doc = json.loads(path.read_text())
    found = ours_by_event(doc)
    assert all(len(v) == 1 for v in found.values()) and len(found) == len(HOOKS)
    # A path with a space is quoted for `sh -c`, and still recognised as ours.
    assert handler_words(found["Stop"][0]["handler"]) == [f"{other}/agent-hook-stop"]
    assert found["Stop"][0]["handler"]["command"].startswith(f"h='{other}/agent-hook-stop';")


def test_bin_dir_without_our_executables_is_refused(home: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["settings", "install", "--bin-dir", str(tmp_path)])
    assert result.exit_code != 0
    assert "no executable agent-hook-" in result.output
    assert not settings_file(home).exists()


@pytest.mark.parametrize("text, why", [
    ('{"hooks": {"Stop": []},,}\n', "not valid JSON (line 1"),
    ('{"hooks": {"Stop": [] /* unclosed }\n', "not valid JSON"),
    ('{"a": 1} {"b": 2}\n', "not valid JSON"),
    ('{"model": "opus"\n', "not valid JSON"),
    ('[{"hooks": {}}]\n', "top level is a JSON array"),
    ('{"hooks": []}\n', '"hooks" is not an object'),
    ('{"hooks": {"Stop": {"command": "x"}}}\n', "hooks.Stop is not a list"),
])
@pytest.mark.parametrize("action", ["install", "uninstall"])
def test_invalid_settings_are_refused_and_untouched(home: Path, text: str, why: str, action: str) -> None:
    path = settings_file(home)
    path.parent.mkdir()
    path.write_text(text)
    result = CliRunner().invoke(cli, ["settings", action])
    assert result.exit_code == 1
    assert why in result.output and "left untouched" in result.output
    assert path.read_text() == text
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_read_only_settings_are_refused(home: Path) -> None:
    path = settings_file(home)
    original = write(path, OTHERS)
    path.chmod(0o444)
    result = CliRunner().invoke(cli, ["settings", "install"])
    assert result.exit_code == 1
    assert "read-only" in result.output and "chmod u+w" in result.output
    assert path.read_bytes() == original
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_project_and_local_targets(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    assert run("settings", "install", "--project", str(project)).exit_code == 0
    assert run("settings", "install", "--project", str(project), "--local").exit_code == 0
    assert_wired(json.loads((project / ".claude" / "settings.json").read_text()))
    assert_wired(json.loads((project / ".claude" / "settings.local.json").read_text()))
    assert not settings_file(home).exists()
    custom = tmp_path / "custom.json"
    assert run("settings", "install", "--settings", str(custom)).exit_code == 0
    assert_wired(json.loads(custom.read_text()))
    both = CliRunner().invoke(cli, ["settings", "install", "--settings", str(custom), "--project", str(project)])
    assert both.exit_code == 2
    alone = CliRunner().invoke(cli, ["settings", "install", "--local"])
    assert alone.exit_code == 2


def test_symlinked_settings_stay_a_symlink(home: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "claude-settings.json"
    write(real, OTHERS)
    link = settings_file(home)
    link.parent.mkdir()
    link.symlink_to(real)
    assert run("settings", "install").exit_code == 0
    assert link.is_symlink()
    assert_wired(json.loads(real.read_text()))


def test_install_is_a_pure_merge() -> None:
    """The text merge itself: install then uninstall gives back the input (minus ours)."""
    from agent_hooks.wiring import merge
    from agent_hooks.wiring.entries import our_groups

    groups = our_groups("/b", copy.deepcopy(config_mod.DEFAULTS))
    for doc, stripped in ((OTHERS, OTHERS), (OLDER, OLDER_STRIPPED), ({}, {})):
        text = json.dumps(doc, indent=2)
        new, change = merge.install(text, "t", groups)
        assert change.added == len(HOOKS)
        again, second = merge.install(new, "t", groups, change.created)
        assert again == new and second.added == 0
        back, _ = merge.uninstall(new, "t", change.created if doc is not OLDER else None)
        assert json.loads(back) == stripped
        if doc is OTHERS:
            assert back == text, "nothing of the user's changed, so no byte of it did"


@pytest.mark.parametrize("mode", ["home", "xdg"])
def test_settings_install_creates_our_state_dir_private(tmp_path: Path, mode: str) -> None:
    """`agent-hook settings install` run first (before any hook or init) made the state directory
    (AGENT_HOOKS_HOME, or $XDG_STATE_HOME/agent-hooks) 0755 under umask 022: only the leaf of
    makedirs(locks, 0o700) got 0700. Doctor then warned "unexpected modes" on a fresh install."""
    state = tmp_path / "state-home"
    if mode == "home":
        env = fresh_env(tmp_path, AGENT_HOOKS_HOME=str(state))
        ours = state
    else:
        env = fresh_env(tmp_path, XDG_STATE_HOME=str(state))
        ours = state / "agent-hooks"
    settings = tmp_path / "settings.json"
    proc = sh(f"umask 022; exec '{BIN}/agent-hook' settings install --settings '{settings}'", env)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(ours.stat().st_mode) == 0o700, oct(ours.stat().st_mode)


def test_install_over_our_executable_under_an_event_we_do_not_hook(tmp_path: Path) -> None:
    """Our executable wired (by hand, or by an older version) only under an event we do not hook:
    install took it out, the emptied "hooks" object went with it, and then an internal assert
    failed: a traceback, and the file could not be wired at all."""
    env = fresh_env(tmp_path, AGENT_HOOKS_HOME=str(tmp_path / "state"))
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"model": "opus", "hooks": {"TeammateIdle": [
        {"hooks": [{"type": "command", "command": os.path.join(BIN, "agent-hook-stop")}]}]}}, indent=2) + "\n")
    proc = agent_hook("settings", "install", "--settings", str(settings), env=env, inherit=False, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(settings.read_text())
    assert list(doc) == ["model", "hooks"] and "TeammateIdle" not in doc["hooks"]
    assert len(doc["hooks"]) == len(HOOKS)
    again = agent_hook("settings", "install", "--settings", str(settings), env=env, inherit=False, check=False)
    assert again.returncode == 0 and "nothing changed" in again.stdout, again.stdout + again.stderr


def test_launcher_logs_a_valid_json_line_for_any_install_path(tmp_path: Path) -> None:
    """A bin dir whose path holds '"', '\\' or '%' still gives doctor a parsable install_missing line:
    the path is JSON-escaped when the launcher is written, and passed to printf as an argument."""
    bin_dir = tmp_path / 'we"ird\\ 100% dir'  # never created: the installation is gone
    home = tmp_path / "home"
    command = command_for(str(bin_dir), "agent-hook-pre-tool-use", "PreToolUse")
    proc = subprocess.run(["sh", "-c", command], input=b"{}", capture_output=True,
                          env={"PATH": "/usr/bin:/bin", "AGENT_HOOKS_HOME": str(home)})
    assert proc.returncode == 0 and proc.stdout == b""
    lines = (home / "logs" / "errors.log").read_text().splitlines()
    entry = json.loads(lines[-1])
    assert entry["kind"] == "install_missing" and entry["event"] == "PreToolUse"
    assert str(bin_dir / "agent-hook-pre-tool-use") in entry["message"]
