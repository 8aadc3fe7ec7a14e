"""``agent-hook fleet``: this host on a fleet (its name, pairing, the owner's token), and cancel /
uncancel through a command center (``--server URL``).

Pairing (docs/command-center.md, "Pairing"): on the command center, ``fleet pair --host NAME`` (or
``--device NAME``) makes a one-time code; on the host, ``fleet join URL --code CODE`` trades it for
the host's own credential; a browser trades a device's code at ``/pair``. ``fleet hosts`` and
``fleet devices`` list what is paired, ``fleet revoke`` shuts one out.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

import click

from agent_hooks import fleet
from agent_hooks.cli.common import (
    NotFound,
    center_json,
    echo_json,
    fleet_writing,
    iso,
    load_config,
    open_fleet_store,
    open_store,
    paths,
)


def remote(server: str, action: str, session_id: str | None, task_id: str | None, tmux: str | None,
           reason: str | None, host: str | None = None) -> list[str]:
    """POST a cancel / uncancel to the command center at ``server``; the lines to print."""
    if task_id:
        path = f"/api/tasks/{quote(task_id, safe='')}/{action}"
    else:
        path = f"/api/sessions/{quote(session_id or tmux or '', safe='')}/{action}"
    body: dict[str, Any] = {"reason": reason} if reason else {}
    base, _status, doc = center_json(server, "POST", path, ok=(200,), json=body,
                                     params={"host": host} if host else None, timeout=10)
    done = "cancelled" if action == "cancel" else "no longer cancelled"
    if task_id:
        return [f"task {task_id}: {done} on {base} (every subscribed host applies it)"]
    return [f"session {s['id']} on {s['host']}: {done} ({s['applied']})" for s in doc.get("sessions", [])]


def local_server() -> str:
    """This host's server: it holds the OpenClaw gateway's connection (docs/openclaw.md)."""
    from agent_hooks.server import local

    info = local.read_info(paths()) or {}
    return f"http://127.0.0.1:{int(info.get('port') or load_config()['serve']['port'])}"


@click.group(name="fleet")
def fleet_group() -> None:
    """This host on a fleet: its name, pairing hosts and devices, the owner's token (docs/command-center.md)."""


@fleet_group.command()
@click.option("--new", "new", is_flag=True, help="Write a new random token (0600) and print it.")
def token(new: bool) -> None:
    """Print the fleet token (or write a new one): the command center owner's key.

    Whoever shows it acts as the owner. Hosts and browsers should be paired instead (`agent-hook fleet
    pair`), each with its own revocable credential; a new token shuts out every old copy.
    """
    p, cfg = paths(), load_config()
    if new:
        click.echo(fleet.write_token(p, cfg))
        return
    value = fleet.token(p, cfg)
    if value is None:
        raise click.ClickException(f"no fleet token: `agent-hook fleet token --new` writes one to {fleet.token_path(p, cfg)}")
    click.echo(value)


@fleet_group.command()
def name() -> None:
    """Print this host's name on a command center's board ([fleet] host, else the hostname)."""
    click.echo(fleet.host_name(load_config()))


def _center_url(cfg: dict[str, Any], url: str | None) -> tuple[str, str | None]:
    """This command center's URL as other hosts and devices reach it, and a note when they cannot."""
    if url:
        base = fleet.center_base(url)
        if base is None:
            raise click.UsageError(f"--url {url!r} is not an http(s) URL of a command center")
        return base, None
    from agent_hooks.server import local

    info = local.read_info(paths()) or {}
    port = int(info.get("port") or cfg["serve"]["port"])
    listen = str(cfg["fleet"]["listen"] or "")
    if not listen or listen in ("127.0.0.1", "localhost", "::1"):
        return (f"http://127.0.0.1:{port}",
                "this server listens on 127.0.0.1 only: other machines cannot reach it ([fleet] listen;"
                " --url gives the address they use)")
    import socket

    return f"http://{socket.gethostname()}:{port}", None


@fleet_group.command()
@click.option("--host", "host", default=None, metavar="NAME", help="Pair the host NAME (its name on the board).")
@click.option("--device", "device", default=None, metavar="NAME",
              help="Pair a device: a person's browser (a phone, a laptop), named NAME in every answer it gives.")
@click.option("--minutes", type=int, default=None,
              help="How long the code works (1 to 1440; default fleet.pairing_code_minutes, 10).")
@click.option("--url", default=None, metavar="URL",
              help="This command center's URL as the host or device reaches it (default: this machine's name and"
                   " the server's port).")
@click.option("--json", "as_json", is_flag=True, help="Print the code as JSON.")
def pair(host: str | None, device: str | None, minutes: int | None, url: str | None, as_json: bool) -> None:
    """On the command center: make a one-time code that pairs a host (--host NAME) or a device (--device NAME).

    A host runs the printed `agent-hook fleet join` line and gets its own credential: from then on the
    command center knows it by that credential, and it speaks only for itself. A device opens the printed
    link (or types the code at /pair) and keeps its credential as a cookie. The code works once, within
    its minutes. Pairing a name again replaces its credential.
    """
    from agent_hooks.center import credentials

    if (host is None) == (device is None):
        raise click.UsageError("give --host NAME or --device NAME")
    kind = credentials.HOST if host is not None else credentials.DEVICE
    name = credentials.clean_name(host if host is not None else device)
    if name is None:
        raise click.UsageError(f"--{kind} must be a plain name: letters, digits and ._:@- (at most 63)")
    cfg = load_config()
    if kind == credentials.HOST and name == fleet.host_name(cfg):
        raise click.ClickException(f"{name!r} is this command center's own name ([fleet] host): a host pairs"
                                   " under its own name")
    ttl_min = minutes if minutes is not None else cfg["fleet"]["pairing_code_minutes"]
    if not isinstance(ttl_min, (int, float)) or isinstance(ttl_min, bool) or not 1 <= ttl_min <= 1440:
        where = "--minutes" if minutes is not None else "fleet.pairing_code_minutes"
        raise click.ClickException(f"{where} must be a number of minutes from 1 to 1440 (got {ttl_min!r})")
    base, note = _center_url(cfg, url)
    now = time.time()
    with fleet_writing() as conn:
        code = credentials.new_code(conn, kind, name, float(ttl_min) * 60, now)
    doc: dict[str, Any] = {"code": code, "kind": kind, "name": name, "center": base,
                           "expires_at": now + float(ttl_min) * 60, "expires_in_s": int(float(ttl_min) * 60)}
    if kind == credentials.HOST:
        doc["join"] = f"agent-hook fleet join {base} --code {code}"
    else:
        doc["link"] = f"{base}/pair?code={code}"
    if note:
        doc["note"] = note
    if as_json:
        echo_json(doc)
        return
    click.echo(f"pairing code for {kind} {name}: {code} (works once, for {ttl_min:g} minutes)")
    if kind == credentials.HOST:
        click.echo(f"on {name}, run:\n  {doc['join']}")
    else:
        click.echo(f"on the device, open:\n  {doc['link']}\n(or open {base}/pair and type the code)")
    if note:
        click.echo(f"note: {note}")


@fleet_group.command()
@click.argument("url")
@click.option("--code", required=True, metavar="CODE", help="The code `agent-hook fleet pair --host NAME` printed.")
@click.option("--also", multiple=True, metavar="URL",
              help="Another command center of the same fleet (one store) the credential may go to; repeatable."
                   " Default: the other centers of forward.url's list, when URL is one of them.")
def join(url: str, code: str, also: tuple[str, ...]) -> None:
    """On a host: pair it with the command center at URL, trading the one-time CODE for its own credential.

    The credential is kept in <config dir>/fleet-credential (0600) and sent to that command center, and to
    the other command centers of its fleet recorded now (--also, else the rest of forward.url's list when
    URL is in it), and to no other, by the drainer, the server's subscription and reports, and
    `cancel --server`. The command center takes this host's name from it. A code works once; an expired
    one says so.
    """
    base = fleet.center_base(url)
    if base is None:
        raise click.UsageError(f"{url!r} is not a command center's URL (http(s)://HOST:PORT)")
    # No credential yet (the code is the proof), and only the center that made the code.
    base, status, doc = center_json(base, "POST", "/api/fleet/pair", ok=(200,), headers=lambda _b: {},
                                    failover=False, json={"code": code}, timeout=10)
    if not isinstance(doc.get("credential"), str):
        raise click.ClickException(f"{base}: HTTP {status}: {doc.get('error', doc)}")
    from agent_hooks.forward.centers import ingest_urls

    p, cfg = paths(), load_config()
    name = str(doc["host"])
    listed = [b for b in (fleet.center_base(u) for u in ingest_urls(cfg["forward"])) if b]
    others: list[str] = []
    for extra in also:
        other = fleet.center_base(extra)
        if other is None:
            raise click.UsageError(f"--also {extra!r} is not a command center's URL (http(s)://HOST:PORT)")
        others.append(other)
    if not also and any(fleet.same_center(b, base) for b in listed):
        others = [b for b in listed if not fleet.same_center(b, base)]
    path = fleet.write_credential(p, base, name, doc["credential"], others)
    notes = []
    if not any(fleet.same_center(b, base) for b in listed):
        notes.append(f"forward.url does not name this command center: set it to {base}/api/hooks/ingest"
                     " ([forward] url in config.toml) for this host to forward and subscribe there")
    if fleet.host_name(cfg) != name:
        notes.append(f"the command center knows this host as {name!r} ([fleet] host here is"
                     f" {fleet.host_name(cfg)!r}); set [fleet] host = {name!r} for the same name everywhere")
    click.echo(f"paired: this host is {name!r} on the command center {base}; credential in {path} (0600)")
    if others:
        click.echo(f"the credential also goes to the command centers of the same fleet: {', '.join(others)}")
    for line in notes:
        click.echo(f"note: {line}")


@fleet_group.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status_(as_json: bool) -> None:
    """This host on its fleet: its name, its command centers (forward.url), the current one, when the host
    last moved on from one, and which of them its credential goes to."""
    from agent_hooks.forward import centers

    p, cfg = paths(), load_config()
    urls = centers.ingest_urls(cfg["forward"])
    choice = centers.Choice(urls)
    store = open_store()
    if store is not None:
        try:
            choice = centers.read(store.conn, urls)
        finally:
            store.close()
    cred = fleet.read_credential(p)
    doc: dict[str, Any] = {
        "host": fleet.host_name(cfg), **choice.status(),
        "credential": None if cred is None else {"host": cred["host"], "centers": cred["centers"]},
        "sent_credential": {u: fleet.credential_for(p, u) is not None for u in urls},
    }
    if as_json:
        echo_json(doc)
        return
    if not urls:
        click.echo(f"host {doc['host']}: no command center named (forward.url is empty)")
        return
    click.echo(f"host {doc['host']}: {len(urls)} command center(s) in forward.url, current: {choice.url}")
    for i, url in enumerate(urls):
        said = "its credential" if doc["sent_credential"][url] else "the fleet token (if one is set)"
        click.echo(f"  {'*' if i == choice.current else ' '} {url}  (sent {said})")
    if choice.switched_at:
        click.echo(f"last moved {iso(choice.switched_at)} from {choice.switched_from}: {choice.reason}"
                   f" ({choice.switches} move(s) in all)")
    else:
        click.echo("never moved on from a command center")


def _paired(kind: str, show_all: bool, as_json: bool) -> None:
    from agent_hooks.center import credentials

    store = open_fleet_store()
    rows: list[dict[str, Any]] = []
    if store is not None:
        try:
            rows = credentials.listing(store.conn, kind, with_revoked=show_all)
        finally:
            store.close()
    key = "hosts" if kind == credentials.HOST else "devices"
    if as_json:
        echo_json({key: rows})
        return
    if not rows:
        click.echo(f"no {key} paired (agent-hook fleet pair --{kind} NAME)")
        return
    click.echo(f"{'NAME':24}  {'PAIRED':20}  {'LAST SEEN':20}  {'FROM':16}  STATE")
    for r in rows:
        state = f"revoked {iso(r['revoked_at'])}" if r["revoked_at"] else "paired"
        click.echo(f"{r['name']:24.24}  {iso(r['paired_at']) or '-':20}  {iso(r['last_seen_at']) or 'never':20}  "
                   f"{r['last_address'] or r['paired_from'] or '-':16.16}  {state}")


@fleet_group.command()
@click.option("--all", "show_all", is_flag=True, help="Revoked ones too.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def hosts(show_all: bool, as_json: bool) -> None:
    """List the hosts paired with this command center: when each was paired, and when it was last seen."""
    _paired("host", show_all, as_json)


@fleet_group.command()
@click.option("--all", "show_all", is_flag=True, help="Revoked ones too.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def devices(show_all: bool, as_json: bool) -> None:
    """List the devices (people's browsers) paired with this command center: when paired, when last seen."""
    _paired("device", show_all, as_json)


@fleet_group.command()
@click.argument("name")
@click.option("--device", "is_device", is_flag=True, help="NAME is a paired device, not a host.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def revoke(name: str, is_device: bool, as_json: bool) -> None:
    """Revoke a paired host's credential (or a device's, with --device): its next request is refused (401).

    Its unused pairing codes go too. Pair it again to let it back in.
    """
    from agent_hooks.center import credentials

    kind = credentials.DEVICE if is_device else credentials.HOST
    with fleet_writing() as conn:
        n = credentials.revoke(conn, kind, name, time.time())
    if n == 0:
        raise NotFound(f"no paired {kind} {name!r} (agent-hook fleet {'devices' if is_device else 'hosts'}"
                       " lists them)")
    if as_json:
        echo_json({"ok": True, "kind": kind, "name": name, "revoked": True})
        return
    click.echo(f"{kind} {name}: revoked; its next request is refused")


COMMANDS = [fleet_group]
