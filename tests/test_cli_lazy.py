"""`agent-hook` imports the module of the command it runs, not every command's module.

Importing them all cost about 70 ms of CPU on every call before the command started
(half of a `status`); the test suite alone makes about a thousand calls.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

from agent_hooks import cli as cli_pkg


def test_the_table_names_every_command_and_its_module() -> None:
    defined = {}
    for module in cli_pkg.MODULES:
        for command in importlib.import_module(f"agent_hooks.cli.{module}").COMMANDS:
            defined[command.name] = module
    assert defined == cli_pkg.WHERE, (
        "agent_hooks/cli/__init__.py: WHERE must name each top-level command's module; "
        f"missing {sorted(set(defined) - set(cli_pkg.WHERE))}, "
        f"stale {sorted(set(cli_pkg.WHERE) - set(defined))}")
    assert set(cli_pkg.cli.commands) == set(defined)


def _modules_after(*args: str) -> tuple[int, set[str]]:
    code = ("import sys, json\nfrom agent_hooks.cli import main\nrc = main(%r)\n"
            "print(json.dumps([rc, sorted(m for m in sys.modules if m.startswith('agent_hooks.cli.'))]))" % list(args))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    rc, mods = json.loads(proc.stdout.strip().splitlines()[-1])
    return rc, set(mods)


def test_one_command_imports_its_own_module_only() -> None:
    rc, mods = _modules_after("paths", "--json")
    assert rc == 0
    assert "agent_hooks.cli.basics" in mods
    for other in ("hooks", "doctor", "server", "settings", "identity", "queue"):
        assert f"agent_hooks.cli.{other}" not in mods, sorted(mods)


def test_help_and_a_misspelt_name_still_see_every_command() -> None:
    rc, mods = _modules_after("--help")
    assert rc == 0 and {f"agent_hooks.cli.{m}" for m in cli_pkg.MODULES} <= mods
    proc = subprocess.run([sys.executable, "-m", "agent_hooks", "stauts"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "No such command 'stauts'" in proc.stderr and "'status'" in proc.stderr
