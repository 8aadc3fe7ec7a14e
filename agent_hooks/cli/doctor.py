"""doctor: a checklist of everything that has to be right for the hooks to work.

Each check gives ✓ (ok), ! (works, but look) or ✗ (broken), and every ! and ✗
names its fix. Exit status 1 when anything is ✗. The checks themselves live in
:mod:`agent_hooks.checks`, one module per area; this is the front-end.
Doctor only reads: it never migrates the store, and the errors it shows stay
shown (in ``status`` too) until ``agent-hook errors seen``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict

import click

from agent_hooks.checks import FAIL, MARK, OK, WARN, Check, default_context, run_all
from agent_hooks.cli.settings import default_bin_dir


def run_checks(project_dir: str, bin_dir: str, synthetic: bool = True) -> list[Check]:
    """Every check, in checklist order."""
    return run_all(default_context(project_dir, bin_dir, synthetic))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checklist as JSON.")
@click.option("--project", type=click.Path(file_okay=False), default=None,
              help="Project whose .claude/settings*.json to check (default: the current directory).")
@click.option("--bin-dir", type=click.Path(file_okay=False), default=None,
              help="Directory of the agent-hook-* executables (default: this interpreter's bin).")
@click.option("--no-run", is_flag=True, help="Skip the synthetic run of every executable.")
def doctor(as_json: bool, project: str | None, bin_dir: str | None, no_run: bool) -> None:
    """Check the wiring, store, configuration, forwarding and hook latency; exit 1 if anything is broken.

    Each line is ✓ (ok), ! (works, but look) or ✗ (broken), with its fix.
    """
    os.umask(0o077)
    project_dir = os.path.abspath(project or os.getcwd())
    bin_dir = os.path.abspath(bin_dir) if bin_dir else default_bin_dir()
    checks = run_checks(project_dir, bin_dir, synthetic=not no_run)
    broken = [c for c in checks if c.status == FAIL]
    if as_json:
        click.echo(json.dumps({"ok": not broken, "checks": [asdict(c) for c in checks]}, indent=2,
                              ensure_ascii=False))
    else:
        for c in checks:
            line = f"{MARK[c.status]} {c.area:11} {c.summary}"
            if c.fix and c.status != OK:
                line += f" -> fix: {c.fix}"
            click.echo(line)
        warns = sum(c.status == WARN for c in checks)
        click.echo(f"\n{len(broken)} broken, {warns} to look at, {len(checks) - len(broken) - warns} ok")
    if broken:
        raise SystemExit(1)


COMMANDS = [doctor]
