"""docs/commands.md, generated from the click tree: ``python -m agent_hooks.cli.reference > docs/commands.md``.

A test (tests/cli/test_cli_tier.py) checks the page lists exactly the commands
``agent-hook --help`` has, so a new command lands in the reference with its
help text, and a removed one leaves it.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import click

PREAMBLE = """# agent-hook: command reference

Every command of the `agent-hook` CLI, generated from its help texts by
`python -m agent_hooks.cli.reference > docs/commands.md` (a test keeps this page
and `agent-hook --help` in step). `agent-hook COMMAND --help` prints the same.

## Conventions

- **Ids.** Wherever a command takes a session id (and `task show`, `summary show`),
  a unique prefix is enough: `session show 4e1b`. A prefix that matches several
  is refused with the candidates listed; exact ids always win. Commands that
  create a task (`task create`, `task progress`, `cancel --task`) take the exact id.
- **JSON.** Read commands take `--json` and print one JSON document whose fields
  are only ever added to. Commands that change things take `--json` too and print
  what they changed (`cancel`, `task create`, `task progress`, `queue drain`,
  `queue retry`, `queue purge`, ...). Progress messages go to stderr with `--json`.
- **Exit statuses**, the same for every command:

  | status | meaning |
  |---|---|
  | 0 | done (also: a list or search with no results) |
  | 1 | an error, with its message on stderr (doctor: something is broken) |
  | 2 | a usage error: a missing or bad argument or option |
  | 3 | not found: the session, task, agent, file or version named is not recorded |

- **Errors.** `status`, `doctor` and `errors` count the same errors: those the
  hooks failed open on since `agent-hook errors seen`.
- **Files.** Files agent-hook creates are 0600 in 0700 directories, `config.toml`
  included (`agent-hook config init`); doctor says when one is not, and why.
- **Hook executables.** `agent-hook-*` read one payload on stdin (Claude Code runs
  them); `--help` and `--version` answer without reading stdin.

## Commands
"""


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``command`` (itself first), depth first, in name order."""
    yield path, command
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from walk(command.commands[name], (*path, name))


def section(path: tuple[str, ...], command: click.Command) -> str:
    """One command's entry: heading, usage, help text, options."""
    name = " ".join(("agent-hook", *path))
    ctx = click.Context(command, info_name=name)
    usage = command.get_usage(ctx).replace("Usage: ", "", 1)
    lines = [f"### `{name}`", "", "```", usage, "```", ""]
    text = inspect.cleandoc(command.help or "")
    if text:
        lines += [click.unstyle(text).replace("\b\n", ""), ""]
    opts = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record and isinstance(param, click.Option) and "--help" not in param.opts:
            opts.append(f"- `{record[0]}`: {record[1]}" if record[1] else f"- `{record[0]}`")
    if opts:
        lines += opts + [""]
    return "\n".join(lines)


def markdown() -> str:
    """The whole page."""
    from agent_hooks.cli import cli

    parts = [PREAMBLE]
    for path, command in walk(cli):
        if path and not getattr(command, "hidden", False):
            parts.append(section(path, command))
    return "\n".join(parts).rstrip() + "\n"


if __name__ == "__main__":
    click.echo(markdown(), nl=False)
