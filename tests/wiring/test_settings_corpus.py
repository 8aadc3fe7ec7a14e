"""The settings corpus: install then uninstall over
tests/fixtures/settings/*, run as the installed ``agent-hook`` console script.

For every file: install wires one entry of ours per event and only inserts text (what the user
wrote is kept byte for byte); a second install changes nothing; uninstall gives back the original
bytes (so the parsed document is equal too). Read-only files and dangling links are refused and
left untouched; a symlinked settings.json is edited at its target and stays a link.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_hooks.wiring import jsontext
from agent_hooks.wiring.entries import LAUNCHER_MARK, command_for, handler_words, is_ours
from agent_hooks.wiring.table import HOOKS

from support.repo import FIXTURES_ROOT
from support.scripts import BIN

CORPUS = FIXTURES_ROOT / "settings"
SPECIAL = {"read-only.json", "symlink-target.json", "previous-version-0.1.0.json"}
# JSONC: Claude Code ignores a settings file with comments or trailing commas (2.1.197 and 2.1.330
# run none of its hooks), so install refuses one; uninstall edits it, comments kept.
JSONC = sorted(p.name for p in CORPUS.iterdir() if p.suffix == ".jsonc")
ROUND_TRIP = sorted(p.name for p in CORPUS.iterdir() if p.name not in SPECIAL and p.suffix != ".jsonc")


class Env:
    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "home"
        self.state = tmp / "state"
        self.home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HOOKS", "XDG_"))}
        self.env.update(HOME=str(self.home), AGENT_HOOKS_HOME=str(self.state))
        self.settings = self.home / ".claude" / "settings.json"

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "agent-hook"), "settings", *args], capture_output=True, text=True,
                              env=self.env, timeout=60)

    def place(self, name: str) -> bytes:
        self.settings.parent.mkdir(exist_ok=True)
        shutil.copyfile(CORPUS / name, self.settings)
        return self.settings.read_bytes()

    def backups(self) -> list[Path]:
        return sorted(self.settings.parent.glob("*.bak-agent-hooks-*"))


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def effective(text: str) -> dict[str, Any]:
    """The document as Claude Code reads it (comments ignored, the last duplicate key wins)."""
    body = text.removeprefix("\ufeff")
    return jsontext.value_of(body, jsontext.parse(body)) if body.strip() else {}


def assert_wired(text: str) -> None:
    hooks = effective(text)["hooks"]
    for event, exe, matcher in HOOKS:
        ours = [(g, h) for g in hooks.get(event, []) for h in g.get("hooks", []) if is_ours(h)]
        assert len(ours) == 1, f"{event}: {len(ours)} entries of ours"
        group, handler = ours[0]
        assert handler["command"] == command_for(str(BIN), exe, event)
        assert group.get("matcher") == matcher and group["hooks"] == [handler]


def only_inserted(before: str, after: str) -> list[str]:
    """The parts of ``before`` that ``after`` deleted or replaced (none when install only inserted)."""
    ops = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    return [before[i1:i2] for op, i1, i2, _, _ in ops if op in ("delete", "replace")]


def test_the_corpus_is_large_enough() -> None:
    assert len(list(CORPUS.iterdir())) >= 24


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_install_then_uninstall_gives_back_the_file(env: Env, name: str) -> None:
    original = env.place(name)
    text = original.decode("utf-8")
    installed = env.cli("install")
    assert installed.returncode == 0, installed.stderr
    after = env.settings.read_bytes().decode()
    assert_wired(after)
    if text.strip():
        # Install inserted our entries and changed no character of the user's.
        assert only_inserted(text, after) == [], name
        assert [b.read_bytes() for b in env.backups()] == [original]
    # A second install: byte-identical, no new backup.
    again = env.cli("install")
    assert again.returncode == 0 and "nothing changed" in again.stdout
    assert env.settings.read_bytes().decode() == after
    removed = env.cli("uninstall")
    assert removed.returncode == 0, removed.stderr
    final = env.settings.read_bytes()
    if text.strip():
        assert final == original, difflib.unified_diff(text.splitlines(), final.decode().splitlines())
    else:
        assert effective(final.decode()) == {}


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_switching_to_http_and_back_restores_the_command_entries_byte_for_byte(env: Env, name: str) -> None:
    original = env.place(name)
    assert env.cli("install").returncode == 0
    as_command = env.settings.read_bytes()
    switched = env.cli("install", "--transport", "http")
    assert switched.returncode == 0, switched.stderr
    over_http = env.settings.read_bytes().decode()
    hooks = effective(over_http)["hooks"]
    for event, _exe, matcher in HOOKS:
        [(group, handler)] = [(g, h) for g in hooks.get(event, []) for h in g.get("hooks", []) if is_ours(h)]
        # One command hook a session: SessionStart (it starts the server); every other event is posted.
        assert handler["type"] == ("command" if event == "SessionStart" else "http"), event
        assert group.get("matcher") == matcher and group["hooks"] == [handler]
    if original.strip():
        assert only_inserted(original.decode(), over_http) == [], name  # the user's characters all kept
    back = env.cli("install", "--transport", "command")
    assert back.returncode == 0, back.stderr
    assert env.settings.read_bytes() == as_command, name
    assert env.cli("uninstall").returncode == 0
    if original.strip():
        assert env.settings.read_bytes() == original


@pytest.mark.parametrize("name", JSONC)
def test_install_refuses_jsonc_clearly(env: Env, name: str) -> None:
    original = env.place(name)
    proc = env.cli("install")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "Claude Code ignores such a settings file" in proc.stderr and "left untouched" in proc.stderr
    assert "comments" in proc.stderr and "trailing commas" in proc.stderr
    assert env.settings.read_bytes() == original and env.backups() == []


def test_uninstall_takes_ours_out_of_jsonc_and_keeps_the_comments(env: Env) -> None:
    text = (CORPUS / "jsonc-with-ours.jsonc").read_text().replace("{{BIN}}", str(BIN))
    env.settings.parent.mkdir()
    env.settings.write_text(text)
    proc = env.cli("uninstall")
    assert proc.returncode == 0 and "removed 1 hooks" in proc.stdout, proc.stdout + proc.stderr
    assert env.settings.read_bytes() == (CORPUS / "jsonc-comments.jsonc").read_bytes()


def test_user_entries_that_run_our_cli_are_theirs(env: Env) -> None:
    """The user's own entries that look like ours: `agent-hook queue drain` on Stop, an `agent-hook-audit`, `python -m`, an env
    prefix or extra words: none is ours, so install adds ours beside them and uninstall keeps them."""
    for name in ("user-runs-our-cli.json", "user-executable-named-like-ours.json",
                 "user-python-m-and-env-prefix.json"):
        original = env.place(name)
        users = [h for groups in json.loads(original)["hooks"].values() for g in groups for h in g["hooks"]]
        assert users and not any(is_ours(h) for h in users)
        assert env.cli("install").returncode == 0
        doc = json.loads(env.settings.read_text())
        kept = [h for groups in doc["hooks"].values() for g in groups for h in g["hooks"] if not is_ours(h)]
        assert kept == users
        assert "removed 0" not in env.cli("uninstall").stdout
        assert env.settings.read_bytes() == original


def test_read_only_file_is_refused_and_untouched(env: Env) -> None:
    original = env.place("read-only.json")
    env.settings.chmod(0o444)
    proc = env.cli("install")
    assert proc.returncode == 1 and "read-only" in proc.stderr and "Traceback" not in proc.stderr
    assert env.settings.read_bytes() == original and stat.S_IMODE(env.settings.stat().st_mode) == 0o444
    assert sorted(p.name for p in env.settings.parent.iterdir()) == ["settings.json"]
    # Installed while writable, then made read-only: uninstall is refused the same way.
    env.settings.chmod(0o644)
    assert env.cli("install").returncode == 0
    installed = env.settings.read_bytes()
    env.settings.chmod(0o444)
    proc = env.cli("uninstall")
    assert proc.returncode == 1 and "read-only" in proc.stderr and "Traceback" not in proc.stderr
    assert env.settings.read_bytes() == installed


def test_symlinked_file_is_edited_at_its_target(env: Env, tmp_path: Path) -> None:
    target = tmp_path / "dotfiles" / "claude.json"
    target.parent.mkdir()
    shutil.copyfile(CORPUS / "symlink-target.json", target)
    original = target.read_bytes()
    env.settings.parent.mkdir()
    env.settings.symlink_to(target)
    assert env.cli("install").returncode == 0
    assert env.settings.is_symlink() and os.readlink(env.settings) == str(target)
    assert_wired(target.read_text())
    assert env.cli("uninstall").returncode == 0
    assert env.settings.is_symlink() and target.read_bytes() == original


def test_dangling_symlink_is_refused(env: Env, tmp_path: Path) -> None:
    env.settings.parent.mkdir()
    env.settings.symlink_to(tmp_path / "nowhere" / "settings.json")
    proc = env.cli("install")
    assert proc.returncode == 1 and "does not exist" in proc.stderr
    assert not (tmp_path / "nowhere").exists()


def test_install_upgrades_what_the_previous_version_wrote(env: Env) -> None:
    """Settings written by 0.1.0 (its template: bare paths, SessionStart matcher
    startup|resume|clear|compact) next to the user's entries. Install upgrades ours in place
    and leaves the user's entries untouched."""
    raw = (CORPUS / "previous-version-0.1.0.json").read_text()
    old_text = raw.replace("{{BIN}}", json.dumps(str(BIN))[1:-1])
    env.settings.parent.mkdir()
    env.settings.write_text(old_text)
    old = json.loads(old_text)
    assert old["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    users = {event: [g for g in groups if not any(is_ours(h) for h in g["hooks"])]
             for event, groups in old["hooks"].items()}
    proc = env.cli("install")
    assert proc.returncode == 0 and "replaced 9 older entries" in proc.stdout, proc.stdout + proc.stderr
    text = env.settings.read_text()
    assert_wired(text)
    doc = json.loads(text)
    (ours,) = [g for g in doc["hooks"]["SessionStart"] if any(is_ours(h) for h in g["hooks"])]
    assert "matcher" not in ours, "the matcher that dropped fork is gone"
    assert all(h["command"].endswith(LAUNCHER_MARK) for g in doc["hooks"]["SessionStart"] for h in g["hooks"]
               if is_ours(h))
    for event, groups in users.items():
        assert [g for g in doc["hooks"][event] if not any(is_ours(h) for h in g["hooks"])] == groups
        for group in groups:  # byte for byte: the user's groups' text is still in the file
            for handler in group["hooks"]:
                assert json.dumps(handler["command"]) in text
    # Ours stay where they were: first in each event, the user's after them.
    assert handler_words(doc["hooks"]["Stop"][1]["hooks"][0]) == [str(BIN / "agent-hook-stop")]
    # The events 0.1.0 did not hook come after the ones it did, in table order.
    added = [h.event for h in HOOKS if h.event not in old["hooks"]]
    assert list(doc) == ["model", "hooks"] and list(doc["hooks"]) == list(old["hooks"]) + added


def test_unwritable_state_dir_is_a_clear_error(env: Env, tmp_path: Path) -> None:
    """No traceback when our state dir cannot be written (a file is in the way;
    the tests run as root, for whom a chmod would not do)."""
    env.state.mkdir()
    (env.state / "locks").write_text("")
    env.place("others-hooks.json")
    before = env.settings.read_bytes()
    proc = env.cli("install")
    assert proc.returncode == 1, proc
    assert "Traceback" not in proc.stderr and "cannot create" in proc.stderr and "state directory" in proc.stderr
    assert env.settings.read_bytes() == before


def test_our_files_are_private_under_a_loose_umask(env: Env) -> None:
    """locks/settings-*.lock and our record are 0600 (dirs 0700) under umask 022."""
    env.place("others-hooks.json")
    proc = subprocess.run(["/bin/sh", "-c", f"umask 022; exec {BIN / 'agent-hook'} settings install"],
                          capture_output=True, text=True, env=env.env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    locks = list((env.state / "locks").glob("settings-*.lock"))
    records = list((env.state / "wiring").glob("settings-*.json"))
    assert locks and records
    for f in locks + records:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    for d in (env.state / "locks", env.state / "wiring"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
