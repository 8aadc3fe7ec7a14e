"""Short help that keeps each command's first sentence whole.

click makes the one-line help of a command list by cutting the docstring at
the terminal's width ("Cancel a session (id or unique prefix), a task, or
the..."). A person reading `agent-hook --help` needs the whole first sentence;
the list wraps it onto more lines instead.
"""

from __future__ import annotations

import re

import click

# A sentence ends at ". " / "! " / "? " (or the end of the first paragraph); "e.g. " does not end one.
_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)[.!?](?=\s|$)")


def first_sentence(help_text: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = re.split(r"\n\s*\n", help_text.strip(), maxsplit=1)[0]
    line = " ".join(paragraph.split())
    m = _END.search(line)
    return line[: m.end()] if m else line


def keep_first_sentences(command: click.Command) -> None:
    """Give ``command`` and every subcommand (that has none) its first sentence as short help."""
    if command.help and not command.short_help:
        command.short_help = first_sentence(command.help)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            keep_first_sentences(sub)
