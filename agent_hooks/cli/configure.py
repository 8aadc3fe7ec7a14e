"""config: the configuration in effect (what the hooks run on), and a private config.toml to start from."""

from __future__ import annotations

import os
from typing import Any

import click

from agent_hooks import config as config_mod
from agent_hooks import tomlout
from agent_hooks.cli.common import echo_json, paths
from agent_hooks.paths import ensure_dir, write_private


def effective() -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """(configuration the hooks run on, what is wrong, "section.key" -> where a value came from).

    The hooks load leniently (a bad value costs that value, not the call), so
    this shows the same: a value of the wrong type is shown as the default in
    effect, and an unknown key is not shown, only reported with the near key.
    """
    p = paths()
    cfg, problems = config_mod.load_lenient(p, os.environ)
    try:
        layer = config_mod.read_file(p.config_file)
    except config_mod.ConfigError:
        layer = {}
    env = config_mod.env_layer(os.environ, [])
    unknown = [x for part in (layer, env) for x in config_mod.validate(part) if x.startswith("unknown")]
    problems += [x for x in unknown if x not in problems]
    # Prices and per-agent budgets are tables of numbers: a bad one is named (the hooks ignore it).
    problems += [x for x in config_mod.money_problems(cfg) if x not in problems]
    if cfg["approvals"].get("gates"):
        from agent_hooks.features import gates

        problems += [x for x in gates.problems(cfg) if x not in problems]
    source: dict[str, str] = {}
    for section, values in config_mod.DEFAULTS.items():
        for k in values:
            if k in (env.get(section) or {}):
                source[f"{section}.{k}"] = "environment"
            elif isinstance(layer.get(section), dict) and k in layer[section]:
                source[f"{section}.{k}"] = "file"
    shown = {section: {k: cfg[section][k] for k in values} for section, values in config_mod.DEFAULTS.items()}
    return shown, problems, source


@click.group(name="config", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of TOML.")
@click.option("--sources", is_flag=True, help="Note after each value set by the file or the environment where it came from.")
@click.pass_context
def config_group(ctx: click.Context, as_json: bool, sources: bool) -> None:
    """Print the configuration in effect (defaults < config.toml < environment).

    The output is valid TOML: paste any part of it into config.toml. Values the
    hooks cannot use are shown as the default they fall back to, and every
    problem (wrong type, unknown key with the near one) goes to stderr.
    """
    if ctx.invoked_subcommand is not None:
        return
    shown, problems, source = effective()
    if as_json:
        echo_json(shown)
    else:
        click.echo(f"# in effect; file: {paths().config_file}")
        click.echo(tomlout.dumps(shown, source if sources else None), nl=False)
    for problem in problems:
        if not problem.startswith("file ignored"):
            click.echo(f"warning: {problem}", err=True)
    ignored = [x for x in problems if x.startswith("file ignored")]
    if ignored:
        # Every setting in the file is lost, not one value: worth a failing exit.
        raise click.ClickException(f"invalid configuration, the hooks ignore the whole file: "
                                   f"{ignored[0].removeprefix('file ignored: ')}")


@config_group.command(name="init")
@click.option("--force", is_flag=True, help="Replace an existing config.toml (the old one is kept as config.toml.bak).")
def init_cmd(force: bool) -> None:
    """Write config.toml (mode 0600) with every default, to edit."""
    p = paths()
    path = p.config_file
    if os.path.exists(path) and not force:
        raise click.ClickException(f"{path} exists; edit it, or pass --force to start again")
    text = ("# agent-hooks configuration: defaults < this file < environment. Values here are the defaults;\n"
            "# delete what you do not change. `agent-hook config` shows what is in effect.\n\n"
            + tomlout.dumps(config_mod.defaults()))
    try:
        ensure_dir(os.path.dirname(path))
        write_private(path, text, backup=force)
    except OSError as exc:
        raise click.ClickException(f"cannot write {path}: {exc.strerror or exc} (is {os.path.dirname(path)} "
                                   "a directory you can write?); nothing was changed") from None
    click.echo(f"wrote {path} (mode 600)")


COMMANDS = [config_group]
