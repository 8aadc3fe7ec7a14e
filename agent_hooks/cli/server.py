"""``agent-hook server run|start|stop|status``: the resident server (docs/server.md)."""

from __future__ import annotations

import os
import time
from typing import Any

import click

from agent_hooks.cli.common import echo_json, iso, load_config, paths


def _process():  # noqa: ANN202 - the module, imported when a command runs
    from agent_hooks.server import process

    return process


def _board(cfg: dict[str, Any], port: int) -> str:
    from agent_hooks.server.local import board_url

    return board_url(cfg, port)


@click.group()
def server() -> None:
    """The command center's board (http://127.0.0.1:24817/ by default) and the server behind Claude Code's http hooks.

    One resident process per store, on 127.0.0.1 and the [serve] port: the
    live board of every session (answer permission prompts and questions,
    cancel, reply), its API, and the http transport's hooks.
    """


@server.command()
def run() -> None:
    """Serve in the foreground until Ctrl-C; logs go to stderr."""
    process = _process()
    cfg = load_config()
    click.echo(f"command center board: {_board(cfg, int(cfg['serve']['port']))}", err=True)
    try:
        process.run(paths(), cfg, os.environ)
    except process.ServerError as exc:
        raise click.ClickException(str(exc)) from None


@server.command()
@click.option("--json", "as_json", is_flag=True, help="Print the server's /health as JSON.")
def start(as_json: bool) -> None:
    """Start the server and its board in the background; return once it answers.

    It prints the board's address: open it in a browser, by default
    http://127.0.0.1:24817/ (the port is [serve] port in the configuration,
    or AGENT_HOOKS__SERVE__PORT; [fleet] listen serves it to other hosts).
    Does nothing when the current build already serves this store; replaces
    a stale one.
    """
    process = _process()
    cfg = load_config()
    try:
        doc, done = process.start(paths(), cfg, os.environ)
    except process.ServerError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        echo_json({"done": done, **doc})
    else:
        click.echo(f"server {done}: pid {doc['pid']}, port {doc['port']}, build {doc['build']}")
        click.echo(f"command center board: {_board(cfg, doc['port'])}")


@server.command()
def stop() -> None:
    """Stop this store's server (SIGTERM, then SIGKILL after 10 s)."""
    pid = _process().stop(paths(), load_config())
    click.echo("no server was running" if pid is None else f"server stopped (pid {pid})")


def centers_line(doc: Any, echo: Any) -> None:
    """The command centers this host talks to, the current one, and its last move (none: nothing)."""
    if not isinstance(doc, dict) or not doc.get("centers"):
        return
    listed = doc["centers"]
    state = "connected" if doc.get("connected") else f"not connected: {doc.get('last_error') or 'connecting'}"
    echo(f"  command center {doc.get('current_base') or doc.get('current')} ({state});"
         f" {doc.get('index', 0) + 1} of {len(listed)} in forward.url")
    if doc.get("switched_at"):
        echo(f"    moved there {iso(doc.get('switched_at'))} from {doc.get('switched_from')}: {doc.get('reason')}"
             f" ({doc.get('switches', 0)} move(s) in all)")


@server.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(as_json: bool) -> None:
    """Up or not, stale or not, pid, port, version, uptime, requests served, p50/p99, errors."""
    st = _process().status(paths(), load_config())
    if as_json:
        echo_json(st)
        return
    if not st["up"]:
        held = " (its lock is held: a server is starting or hung)" if st.get("locked") else ""
        click.echo(f"server: down on port {st['port']}{held}")
        return
    counts = st.get("requests") or {}
    errors = st.get("errors", 0)
    click.echo(f"server: up, pid {st['pid']}, http://127.0.0.1:{st['port']}, version {st['version']}"
               f" (build {st['build']}{', STALE: installed ' + st['installed_build'] if st['stale'] else ''})")
    click.echo(f"  since {iso(st.get('started'))}, uptime {_duration(st.get('uptime_s') or 0)};"
               f" worker pid {st.get('worker_pid') or '-'}")
    restarts = st.get("restarts") or 0
    if restarts:
        last = st.get("last_restarts") or []
        shown = last[-5:]
        click.echo(f"  worker restarts {restarts} (the supervisor replaced a worker that died;"
                   f" {'the last ' + str(len(shown)) if restarts > len(shown) else 'each'} below)")
        for r in shown:
            click.echo(f"    {iso(r.get('at'))}  pid {r.get('pid')} {r.get('cause')} after {r.get('uptime_s')} s")
    else:
        click.echo("  worker restarts 0")
    click.echo(f"  requests answered {counts.get('answered', 0)} ({counts.get('inline', 0)} on the event loop,"
               f" {counts.get('deferred', 0)} handed from it to a thread), errors {errors}"
               f" (bad input or internal {counts.get('problem', 0)}, past the deadline {counts.get('timeout', 0)}),"
               f" refused {counts.get('unauthorized', 0)}")
    click.echo(f"  connections closed: {counts.get('connections_timed_out', 0)} sent no whole request in time,"
               f" {counts.get('connections_refused', 0)} over another caller's cap")
    click.echo(f"  answer time p50 {_ms(st.get('p50_ms'))}, p99 {_ms(st.get('p99_ms'))};"
               f" probe from here {_ms(st.get('probe_ms'))}")
    store = st.get("store_state") or {}
    if store and not store.get("writable", True):
        lost = f", {store['lost']} answered without a record (the spool is full)" if store.get("lost") else ""
        since = f" since {iso(store['since'])}" if store.get("since") else ""
        click.echo(f"  store NOT writable{since}: {store.get('problem')}; {store.get('spooled', 0)} call(s) spooled{lost},"
                   " replayed once it is (tried every second)")
    elif store.get("outages"):
        click.echo(f"  store writable; {store['outages']} time(s) not writable since start,"
                   f" {store.get('replayed', 0)} spooled call(s) replayed")
    fleet_store = st.get("fleet_store") or {}
    listener = fleet_store.get("listener") or {}
    if fleet_store.get("backend") == "postgresql":  # [center] database (docs/command-center.md)
        state = f"connected since {iso(listener.get('since'))}" if listener.get("connected") else \
            f"NOT connected ({listener.get('last_error') or 'connecting'})"
        click.echo(f"  fleet in PostgreSQL {fleet_store.get('database')}: listener {state};"
                   f" {listener.get('notifications', 0)} notification(s), {listener.get('reconnects', 0)} reconnect(s)")
    centers_line(st.get("centers"), click.echo)
    gateway = st.get("openclaw")
    if gateway:  # [openclaw] url is set (docs/openclaw.md)
        error = f": {gateway['last_error']}" if gateway.get("last_error") and gateway["state"] != "connected" else ""
        click.echo(f"  OpenClaw gateway {gateway['url']}: {gateway['state']} since {iso(gateway.get('since'))}{error};"
                   f" {gateway.get('events', 0)} event(s), {gateway.get('dropped', 0)} dropped")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def _duration(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(seconds)) if seconds < 86400 else f"{seconds / 86400:.1f} days"


COMMANDS = [server]
