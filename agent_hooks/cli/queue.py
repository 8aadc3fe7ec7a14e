"""queue: the forwarding outbox (depth, dead letters, drainer) and what to do about it."""

from __future__ import annotations

import os
import time
from typing import Any

import click

from agent_hooks import config as config_mod
from agent_hooks.cli.common import (
    echo_json,
    iso,
    load_config,
    open_store,
    paths,
    plural,
    writing,
)
from agent_hooks.cli.table import cell
from agent_hooks.forward import centers, eventmap, outbox
from agent_hooks.forward.urls import url_problem


def collect() -> dict[str, Any]:
    """The documented ``queue --json`` shape (fields are only ever added)."""
    p = paths()
    cfg = load_config()
    fwd = cfg["forward"]
    urls = centers.ingest_urls(fwd)
    refused = [why for why in (url_problem(u, bool(fwd["allow_remote"])) for u in urls) if why]
    data: dict[str, Any] = {
        "enabled": fwd["enabled"],
        "url": fwd["url"],
        # No URL is no command center (the default): nothing to send, not a problem to fix.
        "problem": refused[0] if refused else None,
        # The command centers (forward.url may list several) and the one events go to now.
        "centers": centers.Choice(urls).status(),
        "problems": eventmap.problems(cfg),
        "depth": 0,
        "oldest_at": None,
        "oldest_age_s": None,
        "retrying": 0,
        "dead": 0,
        "dead_letters": [],
        "drainer_alive": outbox.drainer_alive(p),
        "drainer_pid": None,
        "last_ok_at": None,
        "last_error": None,
        "last_error_at": None,
    }
    if data["drainer_alive"]:
        try:
            with open(os.path.join(p.lock_dir, "drain.pid"), encoding="ascii") as f:
                data["drainer_pid"] = int(f.read().strip())
        except (OSError, ValueError):
            pass
    store = open_store()
    if store is None:
        return data
    try:
        conn = store.conn
        depth, oldest, retrying = conn.execute(
            "SELECT count(*), min(created_at), count(CASE WHEN attempts > 0 THEN 1 END)"
            " FROM outbox WHERE state = 'queued'"
        ).fetchone()
        rows = conn.execute(
            "SELECT id, event_id, session_key, event, attempts, last_status, last_error, created_at, dead_at"
            " FROM outbox WHERE state = 'dead' ORDER BY id"
        ).fetchall()
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'forward.%'").fetchall())
        data["centers"] = centers.read(conn, urls).status()
    finally:
        store.close()
    now = time.time()
    data.update(depth=depth, retrying=retrying, dead=len(rows), oldest_at=iso(oldest),
                oldest_age_s=None if oldest is None else round(now - oldest, 3))
    data["dead_letters"] = [
        {"id": r[0], "event_id": r[1], "session": r[2], "event": r[3], "attempts": r[4], "status": r[5],
         "error": r[6], "created_at": iso(r[7]), "dead_at": iso(r[8])}
        for r in rows
    ]
    for key in ("last_ok_at", "last_error_at"):
        value = meta.get(f"forward.{key}")
        data[key] = iso(float(value)) if value else None
    data["last_error"] = meta.get("forward.last_error")
    return data


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON shape.")
@click.pass_context
def queue(ctx: click.Context, as_json: bool) -> None:
    """Show the forwarding outbox: depth, oldest age, dead letters, drainer."""
    if ctx.invoked_subcommand is not None:
        return
    data = collect()
    if as_json:
        echo_json(data)
        return
    if data["url"]:
        now_to = data["centers"]["current"]
        listed = len(data["centers"]["centers"])
        more = f" (1 of {listed} command centers in forward.url)" if listed > 1 else ""
        click.echo(f"forwarding: {'on' if data['enabled'] else 'off'} -> {cell(now_to)}{more}")
    else:
        click.echo("forwarding: no command center named (set forward.url to send events to one)")
    for problem in ([data["problem"]] if data["problem"] else []) + data["problems"]:
        click.echo(f"problem: {cell(problem, limit=300)}")
    age = f", oldest {data['oldest_age_s']:.1f} s old" if data["oldest_age_s"] is not None else ""
    click.echo(f"queued: {data['depth']}{age}, retrying: {data['retrying']}, dead letters: {data['dead']}")
    pid = f" (pid {data['drainer_pid']})" if data["drainer_pid"] else ""
    click.echo(f"drainer: {'alive' + pid if data['drainer_alive'] else 'not running'}")
    if data["last_ok_at"]:
        click.echo(f"last delivery: {data['last_ok_at']}")
    if data["last_error"]:
        click.echo(f"last error: {data['last_error_at']} {cell(data['last_error'], limit=300)}")
    for d in data["dead_letters"]:
        click.echo(f"  dead #{d['id']} {cell(d['event'], 14)} {cell(d['session'], 36)} attempts={d['attempts']}"
                   f" {cell(d['error'], empty='')}")


@queue.command()
@click.option("--idle", type=float, default=0.0, show_default=True,
              help="Seconds to wait for new events once the queue is empty.")
@click.option("--give-up-after", "give_up", type=click.FloatRange(0), default=None, metavar="SECONDS",
              help="Stop waiting for an unreachable server after this long (default: forward.give_up_after_s).")
@click.option("--timeout", type=float, default=120.0, show_default=True,
              help="Seconds to wait for a running drainer to empty the queue.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (progress goes to stderr).")
def drain(idle: float, give_up: float | None, timeout: float, as_json: bool) -> None:
    """Deliver the outbox now, in the foreground (exits 0 once it is empty).

    While the ingest server does not answer it says so, retries with backoff,
    and gives up after forward.give_up_after_s (or --give-up-after); the events stay queued.
    When a drainer is already running (a hook started it), it is woken to retry at
    once and this command shows the queue going down until it is empty (at most
    --timeout seconds); if that drainer goes away, this command takes over.
    """
    from agent_hooks.forward.drain import Drainer, wake

    os.umask(0o077)
    store = open_store(write=True)  # creates / migrates the store
    if store is not None:
        store.close()
    p = paths()
    say = (lambda text: click.echo(text, err=True)) if as_json else click.echo
    # Leniently, like the hooks and the detached drainer: a bad value falls back to its default.
    cfg, problems = config_mod.load_lenient(p, os.environ)
    for problem in problems:
        click.echo(f"warning: configuration: {problem}", err=True)
    if give_up is not None:
        cfg["forward"]["give_up_after_s"] = give_up
    delivered = dead = 0
    deadline = time.monotonic() + timeout
    shown: int | None = None
    while True:
        if not outbox.drainer_alive(p):
            pending = collect()["depth"]
            if pending and cfg["forward"]["enabled"] and cfg["forward"]["url"]:
                say(f"delivering {plural(pending, 'queued event')} to {cfg['forward']['url']}")
            drainer = Drainer(p, cfg, idle_exit_s=idle, echo=say)
            if not drainer.run_if_free():
                continue  # another drainer took the lock first: wait for it like the one before
            delivered, dead = delivered + drainer.delivered, dead + drainer.dead
            break
        depth = collect()["depth"]
        if depth == 0:
            say("all delivered by the running drainer")
            break
        if depth != shown:
            pid = _drainer_pid(p)
            say(f"waiting for the running drainer{f' (pid {pid})' if pid else ''}: {plural(depth, 'event')} queued")
            if shown is None:
                wake(p)  # retry now: the server may just have come back
            shown = depth
        if time.monotonic() >= deadline:
            raise click.ClickException(f"{plural(depth, 'event')} still queued after {timeout:g} s"
                                       " (see `agent-hook queue`)")
        time.sleep(0.2)
    remaining = collect()
    if as_json:
        echo_json({"delivered": delivered, "dead_lettered": dead, "remaining": remaining["depth"],
                   "last_error": remaining["last_error"]})
    else:
        click.echo(f"delivered {delivered}, dead-lettered {dead}")
    if remaining["depth"]:
        raise click.ClickException(f"{plural(remaining['depth'], 'event')} still queued")


def _drainer_pid(p: Any) -> int | None:
    try:
        with open(os.path.join(p.lock_dir, "drain.pid"), encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


@queue.command()
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "all_", is_flag=True, help="Every dead letter.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def retry(ids: tuple[int, ...], all_: bool, as_json: bool) -> None:
    """Put dead letters (by ID, or --all) back in the queue and start the drainer."""
    if not ids and not all_:
        raise click.UsageError("name dead-letter IDs (see `agent-hook queue`) or pass --all")
    with writing() as conn:
        where, args = ("state = 'dead'", []) if all_ else (
            f"state = 'dead' AND id IN ({','.join('?' * len(ids))})", list(ids))
        requeued = [r[0] for r in conn.execute(f"SELECT id FROM outbox WHERE {where}", args)]
        if requeued:
            conn.execute(f"UPDATE outbox SET state = 'queued', attempts = 0, next_at = 0, dead_at = NULL"
                         f" WHERE id IN ({','.join('?' * len(requeued))})", requeued)
    not_dead = sorted(set(ids) - set(requeued))
    if not_dead:
        click.echo(f"warning: {len(not_dead)} of the IDs are not dead letters: "
                   f"{', '.join(map(str, not_dead))}", err=True)
    if as_json:
        echo_json({"requeued": len(requeued), "ids": requeued, "not_dead_letters": not_dead})
    else:
        click.echo(f"requeued {len(requeued)}")
    if requeued and load_config()["forward"]["autostart"]:
        outbox.maybe_start_drainer(paths(), os.environ, force=True)


@queue.command()
@click.option("--dead", "which", flag_value="dead", default=True, help="Dead letters only (default).")
@click.option("--all", "which", flag_value="all", help="Everything, queued events too.")
@click.option("--yes", is_flag=True, help="Do not ask before dropping queued events.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def purge(which: str, yes: bool, as_json: bool) -> None:
    """Drop dead letters (--dead, the default) or the whole outbox (--all)."""
    if which == "all" and not yes:
        click.confirm("Drop every queued event too?", abort=True)
    with writing() as conn:
        where = "state = 'dead'" if which == "dead" else "1"
        n = conn.execute(f"DELETE FROM outbox WHERE {where}").rowcount
    if as_json:
        echo_json({"purged": n, "which": which})
    else:
        click.echo(f"purged {n}")


COMMANDS = [queue]
