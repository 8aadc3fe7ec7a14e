"""``agent-hook launch``: start a Claude Code session in a named tmux session, here or on another host."""

from __future__ import annotations

import os
from typing import Any

import click

from agent_hooks import fleet
from agent_hooks.cli.common import center_json, echo_json, load_config, paths
from agent_hooks.config import LAUNCH_MODES


def _post(base: str, body: dict[str, Any], token: str | None) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    _base, status, doc = center_json(base, "POST", "/api/sessions", headers=lambda _b: headers, json=body, timeout=30)
    return status, doc


def _here(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """No server runs here: launch in this process (the same checks; the card comes with its first hook)."""
    from agent_hooks.center import launch as launch_mod

    p, cfg = paths(), load_config()
    host = fleet.host_name(cfg)
    try:
        item = launch_mod.parse(body)
    except launch_mod.LaunchError as exc:
        return 400, {"error": str(exc)}
    problem = launch_mod.run(item, cfg, dict(os.environ), p.data_dir, host)
    doc = {"id": item.session_id, "host": host, "tmux_session": item.tmux}
    if problem:
        return 409, {**doc, "state": "refused", "error": problem}
    return 201, {**doc, "state": "started", "applied": "here, without a server: the card comes with its first hook"}


@click.command()
@click.option("--host", default=None, metavar="NAME", help="The host to start it on (another host subscribed to this"
              " command center, or --server's); default: this host.")
@click.option("--server", default=None, metavar="URL", help="The command center to ask (default: this host's server).")
@click.option("--cwd", "cwd", required=True, metavar="DIR",
              help="The directory it starts in; it must be inside the host's [launch] roots.")
@click.option("--task", "task_id", default=None, metavar="ID", help="The task it works on ($AGENT_HOOKS_TASK_ID).")
@click.option("--agent", default=None, metavar="NAME", help="The agent's name ($AGENT_HOOKS_AGENT).")
@click.option("--name", "label", default=None, metavar="LABEL",
              help="Its label on the board; the tmux session is agent-LABEL (default: agent-<its id>).")
@click.option("--permission-mode", "mode", default=None, type=click.Choice(LAUNCH_MODES),
              help="The client's permission mode; the host must allow it ([launch] permission_modes).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.argument("prompt", nargs=-1, required=True)
def launch(host: str | None, server: str | None, cwd: str, task_id: str | None, agent: str | None,
           label: str | None, mode: str | None, as_json: bool, prompt: tuple[str, ...]) -> None:
    """Start a Claude Code session in a new tmux session: agent-hook launch --cwd DIR -- PROMPT.

    The interactive client runs in tmux session agent-LABEL (attach with `tmux attach -t agent-LABEL`), in
    DIR, with the task and agent set for the hooks and PROMPT as its first prompt; its card on the board is
    the session's id, printed here. The host decides from its own [launch] settings (roots, client,
    permission modes) and refuses anything else, saying why. With --host the command center (this host's
    server, or --server) sends it to that host; without, it starts here, through this host's server when
    one runs (the card shows at once) or directly.
    """
    body: dict[str, Any] = {"cwd": os.path.abspath(os.path.expanduser(cwd)), "prompt": " ".join(prompt),
                            "task_id": task_id, "agent": agent, "label": label, "permission_mode": mode}
    if host:
        body["host"] = host
    body = {k: v for k, v in body.items() if v is not None}
    p, cfg = paths(), load_config()
    if server:
        # Another command center: as its owner (the fleet token). A host's own credential may not launch.
        base = fleet.center_base(server) or server.rstrip("/")
        status, doc = _post(base, body, fleet.token(p, cfg))
    else:
        from agent_hooks.server import local

        info = local.read_info(p) or {}
        port = int(info.get("port") or cfg["serve"]["port"])
        if info and local.pid_alive(info.get("pid")) and local.answers(port):
            status, doc = _post(f"http://127.0.0.1:{port}", body, None)  # the owner, by uid on loopback
        elif host and host != fleet.host_name(cfg):
            raise click.ClickException(f"no server runs here to send it to host {host}: start it (agent-hook server"
                                       " start) on the command center, or give --server URL")
        else:
            status, doc = _here(body)
    if as_json:
        echo_json({"status": status, **doc})
    if status >= 400:
        raise click.ClickException(f"not launched: {doc.get('error', doc)}")
    if not as_json:
        click.echo(doc.get("id"))  # the card's id alone on stdout, for scripts
        note = "started" if status == 201 else str(doc.get("applied") or doc.get("state"))
        click.echo(f"tmux session {doc.get('tmux_session')} on {doc.get('host') or 'this host'}: {note}", err=True)


COMMANDS = [launch]
