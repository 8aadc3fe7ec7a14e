"""init, paths (config: see configure.py)."""

from __future__ import annotations

import click

from agent_hooks.cli.common import echo_json, paths


@click.command()
def init() -> None:
    """Create the store, or migrate it to the current schema."""
    import os

    from agent_hooks.store import bring_current

    os.umask(0o077)
    p = paths()
    applied = bring_current(p.store)
    if applied:
        click.echo(f"store {p.store}: applied {', '.join(applied)}")
    else:
        click.echo(f"store {p.store}: schema is current")


@click.command(name="paths")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def paths_cmd(as_json: bool) -> None:
    """Show where the store, logs and configuration live."""
    data = paths().as_dict()
    if as_json:
        echo_json(data)
        return
    for key, value in data.items():
        click.echo(f"{key:12} {value if value is not None else '-'}")


COMMANDS = [init, paths_cmd]
