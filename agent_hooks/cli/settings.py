"""settings install / uninstall / template: the click front-end of :mod:`agent_hooks.wiring`.

Only our entries are touched; what counts as ours, and how the file is edited,
lives in the wiring package (doctor uses the same functions).
"""

from __future__ import annotations

import json
import os
from typing import Any

import click

from agent_hooks.cli.common import load_config
from agent_hooks.wiring.entries import PLACEHOLDER, handler_words, is_ours, recognise, template  # noqa: F401
from agent_hooks.wiring.merge import SettingsError
from agent_hooks.wiring.settings_file import apply, default_bin_dir, read_settings, render  # noqa: F401
from agent_hooks.wiring.table import EVENT_OF, EXECUTABLES, HOOKS  # noqa: F401


def target_path(settings: str | None, project: str | None, local: bool) -> str:
    """The settings file the options name (default ~/.claude/settings.json, $HOME respected)."""
    if settings and project:
        raise click.UsageError("give --settings or --project, not both")
    if local and not project:
        raise click.UsageError("--local needs --project DIR")
    if settings:
        return os.path.abspath(os.path.expanduser(settings))
    if project:
        name = "settings.local.json" if local else "settings.json"
        return os.path.join(os.path.abspath(os.path.expanduser(project)), ".claude", name)
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".claude", "settings.json")


def _check_bin(bin_dir: str) -> None:
    missing = [exe for exe in EXECUTABLES if not os.access(os.path.join(bin_dir, exe), os.X_OK)]
    if missing:
        raise click.ClickException(
            f"{bin_dir} has no executable {', '.join(missing)}; pass --bin-dir with the directory of "
            "the agent-hook-* scripts (the venv's bin) or reinstall the package"
        )


def _apply(path: str, action: str, bin_dir: str, dry_run: bool, transport: str = "command") -> dict[str, Any]:
    try:
        return apply(path, action, bin_dir, load_config(), dry_run, transport)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None


def _target_options(fn: Any) -> Any:
    fn = click.option("--local", is_flag=True, help="With --project: .claude/settings.local.json.")(fn)
    fn = click.option("--project", type=click.Path(file_okay=False),
                      help="A project directory: its .claude/settings.json.")(fn)
    fn = click.option("--settings", "settings_path", type=click.Path(dir_okay=False),
                      help="This settings file (default ~/.claude/settings.json).")(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")(fn)
    fn = click.option("--dry-run", is_flag=True, help="Print the change as a diff; write nothing.")(fn)
    return fn


def _say(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    path = report["path"]
    if "diff" in report:
        click.echo(report["diff"], nl=False)
        click.echo(f"{path}: dry run, nothing written")
        return
    if not report["changed"]:
        what = "already up to date" if report["action"] == "install" else "no hooks of ours to remove"
        click.echo(f"{path}: {what}; nothing changed")
        return
    if report["action"] == "install":
        line = f"{path}: wired {report['added']} hooks to {report['bin_dir']}"
        if report["removed"]:
            line += f" (replaced {report['removed']} older entries of ours)"
    elif report.get("removed_file"):
        line = f"{path}: removed the file (install had created it, and nothing else was in it)"
    else:
        line = f"{path}: removed {report['removed']} hooks of ours; everything else kept"
    click.echo(line)
    if report["backup"]:
        click.echo(f"backup of the previous file: {report['backup']}")


@click.group()
def settings() -> None:
    """Wire our hooks into Claude Code's settings.json, or take them out."""


@settings.command()
@_target_options
@click.option("--bin-dir", type=click.Path(file_okay=False),
              help="Directory of the agent-hook-* executables (default: this interpreter's bin).")
@click.option("--transport", type=click.Choice(["command", "http"]), default="command", show_default=True,
              help="http: every event but SessionStart goes to the resident server (docs/server.md);"
                   " SessionStart stays an executable and starts the server.")
def install(settings_path: str | None, project: str | None, local: bool, bin_dir: str | None,
            as_json: bool, dry_run: bool, transport: str) -> None:
    """Insert or update our hooks (absolute paths); keep everything else. A second run changes nothing.

    Switching --transport replaces our entries of the other form.
    """
    path = target_path(settings_path, project, local)
    bin_dir = os.path.abspath(os.path.expanduser(bin_dir)) if bin_dir else default_bin_dir()
    _check_bin(bin_dir)
    from agent_hooks.wiring.plugin import PLUGIN_ID, REMOVE_PLUGIN, active

    if active() is not None:
        # One wiring at a time: with both, the client runs every hook of ours twice.
        raise click.ClickException(
            f"the Claude Code plugin {PLUGIN_ID} already wires our hooks; settings entries too would run every "
            f"hook twice. Keep the plugin, or remove it first: {REMOVE_PLUGIN}")
    report = _apply(path, "install", bin_dir, dry_run, transport)
    _say(report, as_json)
    if transport == "http" and not dry_run and not as_json:
        from agent_hooks.wiring.http import http_events

        cfg = load_config()
        click.echo(f"{', '.join(http_events(cfg))} go to http://127.0.0.1:{cfg['serve']['port']};"
                   " SessionStart starts the server (or `agent-hook server start` now)")


@settings.command()
@_target_options
def uninstall(settings_path: str | None, project: str | None, local: bool, as_json: bool, dry_run: bool) -> None:
    """Remove exactly our hooks (any path or older form); keep everything else."""
    path = target_path(settings_path, project, local)
    report = _apply(path, "uninstall", default_bin_dir(), dry_run)
    if not dry_run:
        # The drainer would outlive a removed installation (it is detached); it restarts on the
        # next hook call of any file still wired, and its queue waits in the store meanwhile.
        from agent_hooks.paths import Paths
        from agent_hooks.wiring.teardown import stop_drainer

        report["drainer_stopped"] = stop_drainer(Paths(os.environ))
        # So would the resident server; a file still wired for http starts it again at SessionStart.
        from agent_hooks.server.process import stop as stop_server

        report["server_stopped"] = stop_server(Paths(os.environ), load_config())
    _say(report, as_json)
    if report.get("drainer_stopped") and not as_json:
        click.echo(f"stopped the drainer (pid {report['drainer_stopped']}); queued events stay in the store")
    if report.get("server_stopped") and not as_json:
        click.echo(f"stopped the server (pid {report['server_stopped']})")


@settings.command(name="template")
@click.option("--plugin", is_flag=True, help="Print the plugin's .claude-plugin/hooks.json instead.")
def template_cmd(plugin: bool) -> None:
    """Print settings.template.json: our hooks block with {{BIN}} for the executables' directory."""
    if plugin:
        from agent_hooks import __version__
        from agent_hooks.wiring.plugin import render_hooks

        click.echo(render_hooks(__version__), nl=False)
        return
    click.echo(render(template()), nl=False)


COMMANDS = [settings]
