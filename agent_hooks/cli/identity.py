"""identity: the agent's identity files in the store (set, show, history, diff, write)."""

from __future__ import annotations

import difflib
import os
import sys
import time
from typing import Any

import click

from agent_hooks.cli.common import (
    NotFound,
    echo_json,
    iso,
    load_config,
    open_store,
    plural,
    writing,
)
from agent_hooks.features import files
from agent_hooks.features import identity as ident


def _versions(conn: Any, agent: str, name: str) -> list[dict[str, Any]]:
    cols = ("version", "source", "chars", "sha256", "session_id", "at")
    rows = conn.execute(
        f"SELECT {', '.join(cols)} FROM identity_versions WHERE agent = ? AND name = ? ORDER BY version",
        (agent, name),
    ).fetchall()
    return [dict(zip(cols, r, strict=True)) for r in rows]


def _content(conn: Any, agent: str, name: str, version: int | None) -> tuple[int, str]:
    if version is None:
        current = ident.head(conn, agent, name)
        if current is None:
            raise NotFound(f"agent {agent!r} has no {name} in the store")
        return current.version, current.content
    row = conn.execute(
        "SELECT content FROM identity_versions WHERE agent = ? AND name = ? AND version = ?", (agent, name, version)
    ).fetchone()
    if row is None:
        raise NotFound(f"agent {agent!r} has no version {version} of {name}")
    return version, row[0]


@click.group()
def identity() -> None:
    """The agent's identity files (SOUL.md, IDENTITY.md, TOOLS.md, CLAUDE.md) kept in the store."""


@identity.command(name="set")
@click.argument("agent")
@click.argument("name")
@click.option("--file", "-f", "path", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="File with the new content ('-' reads stdin).")
@click.option("--force", is_flag=True, help="Store it even when the size guards would refuse it.")
def set_cmd(agent: str, name: str, path: str, force: bool) -> None:
    """Store a new version of NAME for AGENT (source: manual); sessions get it at their next start."""
    cfg = load_config()
    if "/" in name or not name:
        raise click.ClickException(f"{name!r} is not a file name")
    if name not in ident.names(cfg):
        click.echo(f"warning: {name} is not in identity_files.files; sessions will not use it", err=True)
    try:
        if path == "-":
            content = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                content = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read {path}: {exc}") from None
    with writing() as conn:
        current = ident.head(conn, agent, name)
        if current is not None and current.sha256 == files.sha256_text(content):
            click.echo(f"{agent} {name}: unchanged (version {current.version})")
            return
        refusal = ident.guard(cfg, name, len(content), current.chars if current else None)
        if refusal and not force:
            raise click.ClickException(f"refused: {refusal} (use --force to store it anyway)")
        _, version = ident.add_version(conn, agent, name, content, ident.MANUAL, None,
                                       os.path.abspath(path) if path != "-" else None, time.time())
    click.echo(f"{agent} {name}: version {version} ({len(content)} characters)")


@identity.command()
@click.argument("agent")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(agent: str, name: str | None, as_json: bool) -> None:
    """Print the current NAME of AGENT, or without NAME list its files and versions."""
    store = open_store()
    if store is None:
        raise NotFound(f"agent {agent!r} has no identity files in the store (no store yet)")
    try:
        conn = store.conn
        if name:
            current = ident.head(conn, agent, name)
            if current is None:
                raise NotFound(f"agent {agent!r} has no {name} in the store")
            if as_json:
                echo_json({"agent": agent, "name": name, "version": current.version, "source": current.source,
                           "chars": current.chars, "sha256": current.sha256, "at": iso(current.at),
                           "content": current.content})
            else:
                click.echo(current.content, nl=not current.content.endswith("\n"))
            return
        names = [r[0] for r in conn.execute(
            "SELECT DISTINCT name FROM identity_versions WHERE agent = ? ORDER BY name", (agent,))]
        listing = []
        for n in names:
            current = ident.head(conn, agent, n)
            count = conn.execute(
                "SELECT count(*) FROM identity_versions WHERE agent = ? AND name = ?", (agent, n)).fetchone()[0]
            if current is not None:
                listing.append({"name": n, "version": current.version, "source": current.source,
                                "chars": current.chars, "at": iso(current.at), "versions": count})
    finally:
        store.close()
    if as_json and listing:
        echo_json({"agent": agent, "files": listing})
        return
    if not listing:
        raise NotFound(f"agent {agent!r} has no identity files in the store")
    for f in listing:
        click.echo(f"{f['name']:14} v{f['version']:<4} {f['chars']:>7} chars  {f['source']:13} {f['at']}"
                   f"  ({plural(f['versions'], 'version')})")


@identity.command()
@click.argument("agent")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def history(agent: str, name: str, as_json: bool) -> None:
    """List every version of NAME for AGENT with its source, session and time."""
    store = open_store()
    if store is None:
        raise NotFound(f"agent {agent!r} has no {name} in the store (no store yet)")
    try:
        versions = _versions(store.conn, agent, name)
        current = ident.head(store.conn, agent, name)
    finally:
        store.close()
    for v in versions:
        v["at"] = iso(v["at"])
        v["current"] = current is not None and v["version"] == current.version
    if not versions:
        raise NotFound(f"agent {agent!r} has no {name} in the store")
    if as_json:
        echo_json({"agent": agent, "name": name, "versions": versions})
        return
    for v in versions:
        mark = "*" if v["current"] else " "
        click.echo(f"{mark} v{v['version']:<4} {v['at']}  {v['source']:13} {v['chars']:>7} chars"
                   f"  {v['sha256'][:12]}  {v['session_id'] or '-'}")


@identity.command()
@click.argument("agent")
@click.argument("name")
@click.option("--from", "from_v", type=int, help="Older version (default: the one before --to).")
@click.option("--to", "to_v", type=int, help="Newer version (default: the current one).")
def diff(agent: str, name: str, from_v: int | None, to_v: int | None) -> None:
    """Unified diff between two versions of NAME for AGENT."""
    store = open_store()
    if store is None:
        raise NotFound(f"agent {agent!r} has no {name} in the store (no store yet)")
    try:
        to_v, new = _content(store.conn, agent, name, to_v)
        if from_v is None:
            row = store.conn.execute(
                "SELECT max(version) FROM identity_versions WHERE agent = ? AND name = ? AND version < ?",
                (agent, name, to_v),
            ).fetchone()
            if row[0] is None:
                # Nothing to compare with is not an error: say so, and how to see the one version.
                click.echo(f"{name} of {agent} has no version before v{to_v}: nothing to compare "
                           f"(`agent-hook identity show {agent} {name}` prints it)")
                return
            from_v = int(row[0])
        from_v, old = _content(store.conn, agent, name, from_v)
    finally:
        store.close()
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"{name}@v{from_v}", tofile=f"{name}@v{to_v}")
    for line in lines:
        click.echo(line, nl=not line.endswith("\n"))


@identity.command()
@click.argument("agent")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def write(agent: str, directory: str, as_json: bool) -> None:
    """Write AGENT's current files into DIRECTORY (for launchers that prepare a workspace).

    A differing file that agent-hooks did not write there is renamed to FILE.bak-<UTC time> first.
    """
    cfg = load_config()
    os.umask(0o077)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    real = files.real_dir(os.path.abspath(directory))
    if real is None:
        raise click.ClickException(f"{directory} is not a directory")
    with writing() as conn:
        result = ident.materialise(conn, cfg, agent, real, time.time())
    report = {n: {"action": e["action"], "path": e["path"], "backup": e["backup"],
                  "version": e["head"].version if e["head"] else None} for n, e in result.items()}
    if as_json:
        echo_json({"agent": agent, "directory": real, "files": report})
        return
    for n, r in report.items():
        extra = f" (previous file kept as {r['backup']})" if r["backup"] else ""
        version = f"v{r['version']}" if r["version"] else "-"
        click.echo(f"{n:14} {version:6} {r['action']}{extra}")


COMMANDS = [identity]
