"""init, paths, config."""

from __future__ import annotations

import json

import click

from agent_hooks import config as config_mod
from agent_hooks.cli.common import echo_json, load_config, paths


@click.command()
def init() -> None:
    """Create the store, or migrate it to the current schema."""
    import os

    from agent_hooks.schema import migrate

    os.umask(0o077)
    p = paths()
    applied = migrate(p.store)
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


@click.command(name="config")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of TOML-like text.")
def config_cmd(as_json: bool) -> None:
    """Print the effective configuration (defaults < TOML file < environment)."""
    cfg = load_config()
    problems = config_mod.validate(cfg)
    if as_json:
        echo_json(cfg)
    else:
        click.echo(f"# {paths().config_file}")
        for section, values in cfg.items():
            click.echo(f"\n[{section}]")
            for key, value in values.items():
                click.echo(f"{key} = {json.dumps(value)}")
    for problem in problems:
        click.echo(f"warning: {problem}", err=True)


COMMANDS = [init, paths_cmd, config_cmd]
