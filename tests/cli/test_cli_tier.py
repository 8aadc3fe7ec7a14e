"""The CLI tier: every command's --help, every --json command on a populated store, and the reference page.

The commands come from walking the click tree, so a new command is covered (or
this test says what it needs) without editing a list of names here.
"""

from __future__ import annotations

import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
import pytest

from agent_hooks.cli import cli
from agent_hooks.cli.reference import markdown, walk

from support.populated_store import APPROVAL_ALLOW, APPROVAL_DENY, SESSION_A, SESSION_C, populate
from support.ports import free_port
from support.repo import ROOT
from support.scripts import BIN

COMMANDS = [path for path, _ in walk(cli) if path]
JSON_COMMANDS = {path: cmd for path, cmd in walk(cli)
                 if path and any("--json" in getattr(p, "opts", ()) for p in cmd.params)}

# Read commands: the argument lists to run each with (a command that needs none runs bare).
READ_ARGS: dict[tuple[str, ...], list[list[str]]] = {
    ("doctor",): [["--no-run"]],
    ("hooks", "info"): [["command-logger"]],
    ("identity", "history"): [["ada", "SOUL.md"]],
    ("identity", "show"): [["ada"], ["ada", "SOUL.md"]],
    ("memory", "search"): [["deploy"], ["--agent", "bob", "runbook"]],
    ("session", "list"): [[], ["--state", "live"]],
    ("session", "show"): [[SESSION_A], [SESSION_A[:6]]],
    ("summary", "search"): [["session"]],
    ("summary", "show"): [[SESSION_A[:6]]],
    ("task", "list"): [[], ["--state", "cancelled"]],
    ("task", "show"): [["build-1"]],
}
# Commands that change things, in an order that works on the populated store.
CHANGE_ARGS: dict[tuple[str, ...], list[str]] = {
    ("task", "create"): ["tier-1", "-d", "from the CLI tier"],
    ("task", "describe"): ["tier-1", "described"],
    ("task", "progress"): ["tier-1", "half"],
    ("task", "assign"): [SESSION_C, "tier-1"],
    ("task", "budget"): ["tier-1", "5"],
    ("task", "persist"): ["tier-1", "--max-continuations", "3"],
    ("task", "done"): ["tier-1", "--note", "tier"],
    ("task", "blocked"): ["tier-1", "waiting on a person"],
    ("task", "cancel"): ["tier-1", "--reason", "tier"],
    ("task", "uncancel"): ["tier-1"],
    ("cancel",): ["c0ff", "--reason", "tier"],
    ("uncancel",): ["c0ff"],
    ("session", "reset-guards"): ["c0ff"],
    ("errors", "seen"): [],
    ("memory", "reindex"): [],
    ("identity", "write"): ["ada", "{tmp}/prepared"],
    ("settings", "install"): ["--settings", "{tmp}/settings.json"],
    ("settings", "uninstall"): ["--settings", "{tmp}/settings.json"],
    ("queue", "retry"): ["--all"],
    ("queue", "purge"): ["--all", "--yes"],
    ("queue", "drain"): [],
    ("hooks", "enable"): ["command-logger"],
    ("hooks", "disable"): ["command-logger"],
    ("fleet", "pair"): ["--host", "tier-host"],
    ("fleet", "revoke"): ["tier-host"],
    ("approve",): [APPROVAL_ALLOW],
    ("deny",): [APPROVAL_DENY, "--message", "not on a Friday"],
    # Launching is off on this store (no [launch] roots): refused, and said in JSON too.
    ("launch",): ["--cwd", "{tmp}", "tier"],
}
# Exit statuses other than 0 a command may give on this store with --json (doctor: nothing is wired;
# notify test: no channel is configured there; launch: launching is off there).
ALLOWED_EXIT = {("doctor",): {0, 1}, ("notify", "test"): {1}, ("launch",): {1}}


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([str(BIN / "agent-hook"), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_every_command_answers_help() -> None:
    assert len(COMMANDS) > 30
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda path: (path, run([*path, "--help"])), COMMANDS))
    for path, proc in results:
        assert proc.returncode == 0, (path, proc.stderr)
        assert proc.stdout.startswith(f"Usage: agent-hook {' '.join(path)}"), (path, proc.stdout[:200])
        assert proc.stderr == "", path
    for path, command in walk(cli):
        assert (command.help or "").strip(), f"agent-hook {' '.join(path)} has no help text (its docstring)"


def test_every_json_command_is_classified() -> None:
    """A new --json command must say how to run it: in READ_ARGS (or needing no argument) or CHANGE_ARGS."""
    for path, command in JSON_COMMANDS.items():
        needs_args = any(p.required for p in command.params)
        assert path in CHANGE_ARGS or path in READ_ARGS or not needs_args, (
            f"agent-hook {' '.join(path)} takes --json: add its sample arguments to READ_ARGS or CHANGE_ARGS")
    assert set(CHANGE_ARGS) <= set(JSON_COMMANDS), set(CHANGE_ARGS) - set(JSON_COMMANDS)


def test_every_json_command_prints_json_on_a_populated_store(hooks_home: Path, tmp_path: Path) -> None:
    populate(hooks_home, tmp_path)
    # `server start --json` starts this store's server on a free port; `settings uninstall` stops it.
    env = {"AGENT_HOOKS__FORWARD__AUTOSTART": "false", "AGENT_HOOKS__SERVE__PORT": str(free_port())}
    reads = [(path, args) for path in JSON_COMMANDS if path not in CHANGE_ARGS
             for args in READ_ARGS.get(path, [[]])]
    assert len(reads) >= 15
    for path, args in reads:
        proc = run([*path, *args, "--json"], env)
        assert proc.returncode in ALLOWED_EXIT.get(path, {0}), (path, args, proc.returncode, proc.stderr)
        try:
            json.loads(proc.stdout)
        except ValueError:
            pytest.fail(f"agent-hook {' '.join(path)} {' '.join(args)} --json printed no JSON: {proc.stdout[:300]!r}")
    (tmp_path / "settings.json").write_text("{}\n")
    for path, args in CHANGE_ARGS.items():
        args = [a.replace("{tmp}", str(tmp_path)) for a in args]
        proc = run([*path, *args, "--json"], env)
        assert proc.returncode in ALLOWED_EXIT.get(path, {0}), (path, args, proc.stderr)
        json.loads(proc.stdout)


# -- the reference page ---------------------------------------------------------------------------------

def test_reference_page_lists_exactly_the_commands() -> None:
    page = (ROOT / "docs" / "commands.md").read_text()
    listed = {tuple(m.split()[1:]) for m in re.findall(r"^### `(agent-hook[^`]*)`$", page, re.M)}
    assert listed == set(COMMANDS), (
        f"docs/commands.md is stale (regenerate: python -m agent_hooks.cli.reference > docs/commands.md); "
        f"missing {sorted(set(COMMANDS) - listed)}, extra {sorted(listed - set(COMMANDS))}")
    # Each entry's usage line and first help line are the command's own.
    for path, command in walk(cli):
        if path:
            first = (command.help or "").strip().splitlines()[0]
            assert first in page, (path, first)
    assert page == markdown(), "docs/commands.md differs from the help texts: regenerate it"


def test_reference_matches_agent_hook_help() -> None:
    """The top-level commands `agent-hook --help` lists are the page's top-level entries."""
    out = run(["--help"]).stdout
    shown = set(re.findall(r"^  ([a-z][a-z-]*)\s", out.split("Commands:")[1], re.M))
    page = (ROOT / "docs" / "commands.md").read_text()
    top = {m for m in re.findall(r"^### `agent-hook ([a-z-]+)`$", page, re.M)}
    assert shown == top and shown == set(cli.commands)
    for name in sorted(shown):
        assert isinstance(cli.commands[name], click.Command)
