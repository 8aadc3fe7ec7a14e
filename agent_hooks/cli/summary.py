"""summary show / search: the stored per-session summaries."""

from __future__ import annotations

import click

from agent_hooks.cli.common import NotFound, echo_json, iso, open_store
from agent_hooks.cli.ids import SUMMARIES, resolve
from agent_hooks.cli.table import block, cell
from agent_hooks.features import summary as summary_mod


@click.group(name="summary")
def summary_group() -> None:
    """Per-session summaries written at Stop (extractive, or by the configured summarizer)."""


@summary_group.command(name="show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(session_id: str, as_json: bool) -> None:
    """Show the stored summary of SESSION_ID (a unique prefix is enough)."""
    store = open_store()
    if store is None:
        raise NotFound(f"no summary for session {session_id!r} (no store yet)")
    try:
        try:
            full = resolve(store.conn, SUMMARIES, session_id, "session")
        except NotFound:
            raise NotFound(f"no summary for session {session_id!r}") from None
        rec = summary_mod.get(store.conn, full)
    finally:
        store.close()
    assert rec is not None
    rec["at"] = iso(rec["at"])
    if as_json:
        echo_json(rec)
        return
    click.echo(f"# session {cell(rec['session_id'])}  ({cell(rec['source'])}, {rec['at']})")
    click.echo(block(rec["summary"]))


@summary_group.command(name="search")
@click.argument("query")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 200), help="Most hits shown.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def search(query: str, limit: int, as_json: bool) -> None:
    """Full-text search over session summaries (all words, else any word)."""
    store = open_store()
    hits = []
    if store is not None:
        try:
            hits = summary_mod.search(store.conn, query, limit)
        finally:
            store.close()
    for hit in hits:
        hit["at"] = iso(hit["at"])
    if as_json:
        echo_json(hits)
        return
    if not hits:
        click.echo("no matching session summaries")
        return
    for hit in hits:
        click.echo(f"{hit['score']:>8.3g}  {cell(hit['name'])}  {hit['at']}")
        click.echo(f"          {cell(' '.join(hit['snippet'].split()), limit=300)}")


COMMANDS = [summary_group]
