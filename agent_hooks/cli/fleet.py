"""``agent-hook fleet token``, and cancel / uncancel through a command center (``--server URL``)."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

import click

from agent_hooks import fleet
from agent_hooks.cli.common import load_config, paths


def remote(server: str, action: str, session_id: str | None, task_id: str | None, tmux: str | None,
           reason: str | None, host: str | None = None) -> list[str]:
    """POST a cancel / uncancel to the command center at ``server``; the lines to print."""
    import httpx

    cfg = load_config()
    base = fleet.center_base(server) or server.rstrip("/")
    if task_id:
        url = f"{base}/api/tasks/{quote(task_id, safe='')}/{action}"
    else:
        url = f"{base}/api/sessions/{quote(session_id or tmux or '', safe='')}/{action}"
    body: dict[str, Any] = {"reason": reason} if reason else {}
    try:
        r = httpx.post(url, json=body, params={"host": host} if host else None, timeout=10, trust_env=False,
                       headers=fleet.client_headers(paths(), cfg, os.environ))
    except httpx.HTTPError as exc:
        raise click.ClickException(f"command center {base} unreachable: {exc}") from None
    try:
        doc = r.json()
    except ValueError:
        doc = {"error": r.text[:300]}
    if r.status_code != 200:
        raise click.ClickException(f"{base}: HTTP {r.status_code}: {doc.get('error', doc)}")
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
    """This host on a fleet: its name and the fleet token (docs/command-center.md)."""


@fleet_group.command()
@click.option("--new", "new", is_flag=True, help="Write a new random token (0600) and print it.")
def token(new: bool) -> None:
    """Print the fleet token (or write a new one). Every host of a fleet needs the same token in its
    token file (or $AGENT_HOOKS_FLEET_TOKEN); the command center asks for it from any caller that is
    not its own user on loopback."""
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


COMMANDS = [fleet_group]
