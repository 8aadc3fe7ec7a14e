"""``agent-hook``: the command people type. Each command's docstring is its help."""

from __future__ import annotations

import click

from agent_hooks import __version__
from agent_hooks.cli import (
    approvals,
    basics,
    configure,
    cost,
    doctor,
    errors,
    helptext,
    hooks,
    identity,
    memory,
    persist,
    queue,
    server,
    sessions,
    settings,
    status,
    summary,
    tasks,
)
from agent_hooks.cli import fleet as fleet_cli


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agent-hook")
def cli() -> None:
    """Claude Code hooks for fleets of agents: guards, fleet visibility and memory."""


for module in (basics, configure, status, errors, settings, doctor, identity, memory, summary, tasks, persist, sessions, queue,
               server, fleet_cli, hooks, approvals, cost):
    for command in module.COMMANDS:
        cli.add_command(command)
helptext.keep_first_sentences(cli)  # `--help` lists whole first sentences, not ones cut at 80 columns


def main(argv: list[str] | None = None) -> int:
    try:
        cli.main(args=argv, prog_name="agent-hook", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
