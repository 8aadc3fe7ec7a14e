"""What each process the tests start pays before it does anything.

`agent-hook` imports the module of the command it runs, not every command's module:
importing them all cost about 70 ms of CPU on every call before the command started
(half of a `status`); the fast tier alone makes about a thousand calls. And the
package's bytecode is compiled before the tests start processes (tests/conftest.py).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from agent_hooks import cli as cli_pkg

from support.repo import ROOT


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
    code = (f"import sys, json\nfrom agent_hooks.cli import main\nrc = main({list(args)!r})\n"
            "print(json.dumps([rc, sorted(m for m in sys.modules if m.startswith('agent_hooks.cli.'))]))")
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


def test_the_package_bytecode_is_compiled_for_the_subprocesses() -> None:
    """With PYTHONDONTWRITEBYTECODE set, nothing else writes it, and every console script the
    tests start would compile the package from source again."""
    package = ROOT / "agent_hooks"
    stale = []
    for source in package.rglob("*.py"):
        cached = Path(importlib.util.cache_from_source(str(source)))
        if not cached.exists() or cached.stat().st_mtime < source.stat().st_mtime:
            stale.append(str(source.relative_to(package)))
    assert stale == [], f"no fresh bytecode for {stale[:5]} ({len(stale)} files)"


def test_settings_commands_do_not_import_filelock(tmp_path: Path) -> None:
    """The settings file's lock is a plain fcntl.flock: filelock's import cost each `settings`
    command about 35 ms of CPU."""
    code = ("import sys, json\nfrom agent_hooks.cli import main\nrc = main(['settings', 'install'])\n"
            "print(json.dumps([rc, sorted(m for m in sys.modules if m.split('.')[0] == 'filelock')]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    rc, mods = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rc == 0 and mods == []
