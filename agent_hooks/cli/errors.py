"""errors: what the hooks failed open on, and marking it seen."""

from __future__ import annotations

import click

from agent_hooks import errorlog
from agent_hooks.cli.common import echo_json, iso, open_store, paths, plural, writing
from agent_hooks.cli.table import cell


@click.group(invoke_without_command=True)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10000), help="Most entries listed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def errors(ctx: click.Context, limit: int, as_json: bool) -> None:
    """List the errors the hooks failed open on since they were last marked seen.

    `status` and `doctor` count the same errors; `agent-hook errors seen`
    marks them seen, so the next ones stand out.
    """
    if ctx.invoked_subcommand is not None:
        return
    store = open_store()
    try:
        rep = errorlog.report(paths(), store.conn if store else None, limit=limit)
    finally:
        if store is not None:
            store.close()
    rep["seen_at"] = iso(rep["seen_at"])
    if as_json:
        echo_json(rep)
        return
    since = f" since {rep['seen_at']}" if rep["seen_at"] else ""
    if not rep["unseen"]:
        click.echo(f"no errors{since}")
        return
    click.echo(f"{plural(rep['unseen'], 'error')}{since} (log: {rep['error_log']}):")
    for e in rep["recent"]:
        click.echo(f"  {cell(e.get('at'), 20)}  {cell(e.get('event'), 18)} {cell(e.get('kind'), 10)} "
                   f"{cell(e.get('message'), limit=200, empty='')}")
    click.echo("mark them seen with: agent-hook errors seen")


@errors.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def seen(as_json: bool) -> None:
    """Mark every error so far as seen: status and doctor count only newer ones."""
    with writing() as conn:
        before = errorlog.report(paths(), conn, limit=0)["unseen"]
        at = errorlog.mark_seen(conn)
    if as_json:
        echo_json({"marked_seen": before, "seen_at": iso(at)})
        return
    click.echo(f"marked {plural(before, 'error')} seen")


COMMANDS = [errors]
