"""memory: search the agents' memory files, and rebuild the index from disk."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

import click

from agent_hooks.cli.common import (
    echo_json,
    iso,
    load_config,
    open_store,
    plural,
    writing,
)
from agent_hooks.cli.table import cell
from agent_hooks.features import files, recall
from agent_hooks.features import memory as mem


@click.group()
def memory() -> None:
    """Memory files the agents write under their memory directories, searchable by words and by meaning."""


@memory.command()
@click.argument("query", nargs=-1, required=True)
@click.option("--agent", help="Only this agent's documents and shared ones.")
@click.option("--limit", type=click.IntRange(1, 1000), help="Most hits to show (default: memory.search_limit).")
@click.option("--raw", is_flag=True, help="QUERY is FTS5 syntax (OR, NEAR, prefix*), not plain words; words only.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def search(query: tuple[str, ...], agent: str | None, limit: int | None, raw: bool, as_json: bool) -> None:
    """Memory files and session summaries that match QUERY, best first.

    A text matches in two ways, and each hit says which: "every word" (it
    contains every word of the query, in any form: deploy finds deploys) and
    "meaning N%" (how close what it says is to what the query says, even in
    other words, from 0% to 100%).
    Texts with every word come first; then the closest in meaning. A text
    found by meaning alone is shown only when it clears the relevance floor:
    memory.min_similarity (15%), and memory.relative_similarity (60%) of the
    best hit's. So a query nothing is about gives no hits, not the least bad.

    Memory files (kind "memory") and the summaries of past sessions (kind
    "session", see `agent-hook summary`) are searched and ranked alike. --json
    adds each hit's fts_rank, vector_rank, similarity and score (the order).
    Without the embedding model, hits are found by words alone, with a notice
    on stderr.
    """
    cfg = load_config()
    text = " ".join(query)
    limit = limit or int(cfg["memory"]["search_limit"])
    store = open_store()
    hits: list[dict[str, Any]] = []
    notice = None
    if store is not None:
        try:
            hits, notice = recall.search(store.conn, cfg, text, agent, limit, raw)
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise click.ClickException("the store has no memory index yet: run `agent-hook init`") from None
            raise click.ClickException(f"bad query {text!r}: {exc}") from None
        finally:
            store.close()
    if notice:
        click.echo(f"memory search: {notice}", err=True)
    for h in hits:
        if h["kind"] == "session":
            h["at"] = iso(h["at"])
        else:
            h["indexed_at"] = iso(h["indexed_at"])
    if as_json:
        echo_json({"query": text, "agent": agent, "hits": hits})
        return
    if not hits:
        click.echo("no hits")
    for h in hits:
        why = ", ".join(([] if h["fts_rank"] is None else ["every word"])
                        + ([] if h["similarity"] is None else [f"meaning {_percent(h['similarity'])}"]))
        if h["kind"] == "session":
            click.echo(f"{cell(h['name'])}  [session summary, {h['at']}]  ({why})")
        else:
            click.echo(f"{cell(h['path'])}  [{cell(h['scope'])}, {cell(h['agent'])}]  ({why})")
        click.echo(f"    {cell(' '.join(h['snippet'].split()), limit=300)}")


def _percent(similarity: float) -> str:
    """A cosine similarity as people read a closeness: 0.4213 -> '42%' (below zero: 0%)."""
    return f"{max(0, round(similarity * 100))}%"


def _workspaces(conn: sqlite3.Connection, cfg: dict[str, Any], extra: tuple[str, ...]) -> dict[str, str]:
    """Workspace -> agent: the configured one, every known session's cwd, and any given."""
    found: dict[str, str] = {}
    default_agent = cfg["identity"]["agent"]
    rows = conn.execute(
        "SELECT cwd, agent FROM sessions WHERE cwd IS NOT NULL AND cwd != '' ORDER BY last_seen_at"
    ).fetchall()
    for cwd, agent in rows:
        ws = files.workspace(cfg, cwd)
        if ws:
            found[ws] = agent or default_agent
    for d in extra:
        ws = files.real_dir(os.path.abspath(d))
        if ws is None:
            raise click.ClickException(f"{d} is not a directory")
        found.setdefault(ws, default_agent)
    configured = files.workspace(cfg, None)
    if configured:
        found.setdefault(configured, default_agent)
    return found


@memory.command()
@click.option("--workspace", "-w", "extra", multiple=True, type=click.Path(file_okay=False),
              help="Also index this workspace (repeatable).")
@click.option("--agent", help="Agent to file documents of the given workspaces under (default: identity.agent).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def reindex(extra: tuple[str, ...], agent: str | None, as_json: bool) -> None:
    """Rebuild the memory index from disk: known sessions' workspaces, the configured one, and --workspace.

    Then embeds every memory file and session summary that has no current
    vector (unchanged files keep theirs) and drops the vectors of gone ones.
    Without the embedding model this step is skipped, with a notice on stderr.
    """
    cfg = load_config()
    totals = {"indexed": 0, "unchanged": 0, "dropped": 0, "skipped": 0}
    with writing() as conn:
        spaces = _workspaces(conn, cfg, extra)
        if agent:
            for d in extra:
                spaces[os.path.realpath(os.path.abspath(d))] = agent
        conn.execute("DELETE FROM memory_fts")
        conn.execute("DELETE FROM memory_docs")
        at = time.time()
        for ws, owner in spaces.items():
            for key, n in mem.scan(conn, cfg, ws, owner, None, at).items():
                totals[key] += n
        docs = conn.execute("SELECT count(*) FROM memory_docs").fetchone()[0]
    embedded = _embed_all(cfg)
    if as_json:
        echo_json({"workspaces": sorted(spaces), "documents": docs, **totals, **embedded})
        return
    click.echo(f"indexed {plural(docs, 'document')} from {plural(len(spaces), 'workspace')}"
               + (f"; embedded {embedded['embedded']}" if embedded["embedded"] is not None else ""))


def _embed_all(cfg: dict[str, Any]) -> dict[str, Any]:
    """Embed what has no current vector; prune the rest. None counts (and a notice) without the model."""
    from agent_hooks.features import embed_worker, vectors

    if not vectors.enabled(cfg):
        return {"embedded": None, "pruned": None}
    model = recall.model(cfg)
    if model is None:
        click.echo(f"memory reindex: not embedded, search ranks by words only: {recall.model_error()}", err=True)
        return {"embedded": None, "pruned": None}
    store = open_store(write=True)
    assert store is not None
    try:
        return embed_worker.refresh(store, model)
    finally:
        store.close()


COMMANDS = [memory]
