"""``agent-hook``: the command people type. Each command's docstring is its help.

Commands are imported when named: ``agent-hook status`` imports cli/status.py and what it
needs, not every command's module (that doubled the start-up of every call: about 70 ms
of CPU before the command did anything). ``--help``, a misspelt name and ``cli.commands``
load them all.
"""

from __future__ import annotations

import importlib

import click

from agent_hooks import __version__
from agent_hooks.cli import helptext

# Every module that contributes top-level commands (its COMMANDS list), in registration order.
MODULES = ("basics", "configure", "status", "errors", "settings", "doctor", "identity", "memory", "summary",
           "tasks", "persist", "sessions", "queue", "server", "fleet", "hooks", "approvals", "cost", "notify", "launch")
# Which module defines each top-level command, so that one call imports one module.
# tests/cli/test_cli_tier.py checks it against the modules' COMMANDS; a command missing here
# still works (it is found by loading every module), only slower.
WHERE = {
    "init": "basics", "paths": "basics", "config": "configure", "status": "status", "errors": "errors",
    "settings": "settings", "doctor": "doctor", "identity": "identity", "memory": "memory",
    "summary": "summary", "task": "tasks", "cancel": "tasks", "uncancel": "tasks", "session": "sessions",
    "queue": "queue", "server": "server", "fleet": "fleet", "hooks": "hooks",
    "approvals": "approvals", "approve": "approvals", "deny": "approvals", "cost": "cost", "notify": "notify", "launch": "launch",
}


def _commands_of(module: str) -> list[click.Command]:
    commands = list(importlib.import_module(f"agent_hooks.cli.{module}").COMMANDS)
    for command in commands:  # `--help` lists whole first sentences, not ones cut at 80 columns
        helptext.keep_first_sentences(command)
    return commands


class _LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (see the module docstring)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._all_loaded = False
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        """Every command, each module imported: what help, suggestions and the reference read."""
        if not self._all_loaded:
            self._all_loaded = True
            for module in MODULES:
                for command in _commands_of(module):
                    self._commands.setdefault(command.name or "", command)
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = dict(value)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self._commands:
            return self._commands[cmd_name]
        module = WHERE.get(cmd_name)
        if module is not None and not self._all_loaded:
            for command in _commands_of(module):
                self._commands.setdefault(command.name or "", command)
            if cmd_name in self._commands:
                return self._commands[cmd_name]
        return self.commands.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agent-hook")
def cli() -> None:
    """Claude Code hooks for fleets of agents: guards, fleet visibility and memory."""


cli.short_help = helptext.first_sentence(cli.help or "")


def main(argv: list[str] | None = None) -> int:
    try:
        cli.main(args=argv, prog_name="agent-hook", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
