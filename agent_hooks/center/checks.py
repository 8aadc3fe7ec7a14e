"""Doctor's checks of the command center: the board answers, the fleet token and this host's credential
are safe, the subscription to a command center is connected, and who still uses the shared fleet token
(this host towards its command center; hosts that poll this one with it). Loopback GETs only; nothing
is written."""

from __future__ import annotations

from typing import Any

from agent_hooks import fleet
from agent_hooks.paths import Paths


def _get(port: int, path: str) -> tuple[int, bytes] | None:
    import http.client

    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2.0)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()
    except OSError:
        return None


def launch_checks(cfg: dict[str, Any]) -> list[Any]:
    """[launch]: off, or what this host may launch and whether its client and tmux are there."""
    import os
    import shutil

    from agent_hooks.center import launch
    from agent_hooks.checks import OK, WARN, Check

    roots = launch.roots(cfg)
    given = [r for r in cfg.get("launch", {}).get("roots") or [] if isinstance(r, str) and r.strip()]
    if not given:
        return [Check("launch", OK, "launching is off (no [launch] roots)")]
    out = []
    if len(roots) < len(given):
        out.append(Check("launch", WARN, f"{len(given) - len(roots)} of the [launch] roots is not an existing"
                         " absolute directory: left out", "fix [launch] roots in config.toml"))
    env = dict(os.environ)
    if launch.client_path(cfg, env) is None:
        out.append(Check("launch", WARN, f"the client {cfg['launch'].get('claude')!r} ([launch] claude) is not an"
                         " executable on PATH: every launch is refused", "set [launch] claude to its absolute path"))
    if shutil.which("tmux") is None:
        out.append(Check("launch", WARN, "tmux is not installed: every launch is refused", "apt-get install tmux"))
    if not launch.modes(cfg):
        out.append(Check("launch", WARN, "[launch] permission_modes allows none: every launch is refused",
                         'permission_modes = ["default", "acceptEdits", "plan"]'))
    if not out:
        out.append(Check("launch", OK, f"launching in {', '.join(roots)} (modes: {', '.join(launch.modes(cfg))})"))
    return out


def board_checks(paths: Paths, cfg: dict[str, Any]) -> list[Any]:
    """The command center's lines for doctor."""
    import json

    from agent_hooks.checks import FAIL, OK, WARN, Check
    from agent_hooks.server import local, process

    checks: list[Any] = []
    problem = fleet.token_problem(paths, cfg)
    if problem:
        checks.append(Check("board", FAIL, f"fleet token: {problem}", f"chmod 600 {fleet.token_path(paths, cfg)}"))
    checks.extend(pairing_checks(paths, cfg))
    checks.extend(launch_checks(cfg))
    listen = str(cfg["fleet"]["listen"] or "")
    if listen and not fleet.token(paths, cfg):
        checks.append(Check("board", FAIL, f"[fleet] listen = {listen!r} but no fleet token: the server refuses to start",
                            "agent-hook fleet token --new"))
    if listen not in ("", "127.0.0.1", "::1", "localhost") and not [n for n in cfg["fleet"].get("names") or [] if isinstance(n, str) and n.strip()]:
        checks.append(Check("board", WARN, f"[fleet] listen = {listen!r} but [fleet] names is empty: other hosts"
                            " are refused (403) whatever name they call this server by",
                            "list the names other hosts use for it: [fleet] names = [\"cc.example.org\"]"))
    info = local.read_info(paths) or {}
    port = int(info.get("port") or cfg["serve"]["port"])
    if process.health(paths, cfg) is None:
        checks.append(Check("board", OK, "board not served (the server is not running)", "agent-hook server start"))
        return checks + openclaw_checks(cfg, None)
    url = f"http://127.0.0.1:{port}/"
    page, data, static = _get(port, "/"), _get(port, "/api/board"), _get(port, "/static/board.js")
    if not page or page[0] != 200 or b"Command center" not in page[1] or not static or static[0] != 200:
        checks.append(Check("board", FAIL, f"the board at {url} does not load"
                            f" (/ {page[0] if page else 'no answer'}, /static/board.js {static[0] if static else 'no answer'})",
                            "see " + local.log_file(paths)))
        return checks
    try:
        cards = len(json.loads(data[1])["cards"]) if data and data[0] == 200 else None
    except (ValueError, KeyError):
        cards = None
    if cards is None:
        checks.append(Check("board", FAIL, f"the board at {url} loads but /api/board does not answer"
                            f" ({data[0] if data else 'no answer'})", "see " + local.log_file(paths)))
        return checks
    checks.append(Check("board", OK, f"board at {url}: {cards} session(s), as host {fleet.host_name(cfg)!r}"))
    status = _get(port, "/api/fleet/status")
    doc: Any = {}
    try:
        doc = json.loads(status[1]) if status and status[0] == 200 else {}
        sub, rep, gateway = doc.get("subscription"), doc.get("report"), doc.get("openclaw")
        kept_out = (doc.get("limits") or {}).get("left_out") or {}
    except (ValueError, AttributeError):
        sub, rep, gateway, kept_out = None, None, None, {}
    for host, counts in sorted(kept_out.items()) if isinstance(kept_out, dict) else ():
        if isinstance(counts, dict):
            said = [f"{counts[k]} {what}" for k, what in (("approvals", "pending request(s) left out"),
                                                        ("cards", "card(s) left out or dropped"),
                                                        ("refused", "request(s) refused (429)")) if counts.get(k)]
            checks.append(Check("board", WARN, f"host {host}: {', '.join(said)} by the command center's limits (fleet.max_*)",
                                "see docs/command-center.md, Limits: fleet.max_hosts, max_cards_per_host,"
                                " max_requests_per_host, max_rows"))
    if sub:
        if sub.get("connected"):
            checks.append(Check("board", OK, f"subscribed to the command center {sub['center']}"
                                f" ({sub.get('applied', 0)} control(s) applied)"))
        else:
            checks.append(Check("board", WARN, f"not connected to the command center {sub['center']}:"
                                f" {sub.get('last_error') or 'connecting'}; cancellations issued there wait",
                                "check forward.url and the fleet token on both hosts"))
    checks.extend(openclaw_checks(cfg, gateway if isinstance(gateway, dict) else None))
    on_token = doc.get("hosts_on_shared_token") if isinstance(doc, dict) else None
    if on_token:
        checks.append(Check("board", WARN, f"host(s) {', '.join(map(str, on_token))} still poll this command center"
                            " with the shared fleet token: each acts as the owner here, and anyone holding the token"
                            " can speak for them",
                            "pair each (agent-hook fleet pair --host NAME here, then fleet join on it), then"
                            " `agent-hook fleet token --new` (docs/command-center.md, Moving a fleet to pairing)"))
    if rep and rep.get("last_error"):
        checks.append(Check("board", WARN, f"reporting sessions and approval requests to {rep['center']} fails:"
                            f" {rep['last_error']}; its board shows this host's cards bare and not its requests",
                            "check forward.url and the fleet token; a command center without /api/fleet/report"
                            " (not agent-hooks) answers 404: set fleet.report = false"))
    return checks


def pairing_checks(paths: Paths, cfg: dict[str, Any]) -> list[Any]:
    """This host's credential: safe (0600), readable, for the command center forward.url names; else,
    when it still talks to that center with the shared fleet token, a warning that says how to pair it."""
    import os

    from agent_hooks.checks import FAIL, OK, WARN, Check

    out: list[Any] = []
    problem = fleet.credential_problem(paths)
    if problem:
        out.append(Check("board", FAIL, f"fleet credential: {problem}", f"chmod 600 {fleet.credential_path(paths)}"))
    cred = fleet.read_credential(paths)
    if cred is None and os.path.exists(fleet.credential_path(paths)):
        out.append(Check("board", FAIL, f"fleet credential: {fleet.credential_path(paths)} cannot be read as one:"
                         " this host sends no credential to its command center",
                         "pair it again (agent-hook fleet join URL --code CODE)"))
    from agent_hooks.forward.centers import ingest_urls

    fwd = cfg["forward"]
    bases = [b for b in (fleet.center_base(u) for u in ingest_urls(fwd)) if b] if fwd.get("enabled") else []
    if not bases:
        return out
    base = bases[0]
    if cred is not None and len(bases) > 1:
        # Several command centers: the credential goes to those recorded with it at pairing, no others.
        covered = [b for b in bases if fleet.credential_for(paths, b) is not None]
        left = [b for b in bases if b not in covered]
        if covered and not left:
            out.append(Check("board", OK, f"paired as host {cred['host']!r}; the credential goes to all"
                             f" {len(bases)} command centers of forward.url"))
            return out
        if covered:
            out.append(Check("board", WARN, f"the credential in {fleet.credential_path(paths)} goes to"
                             f" {', '.join(covered)} but not to {', '.join(left)}: this host is not known there by"
                             " its credential once it moves on to that center",
                             f"pair again naming every center of the fleet: agent-hook fleet join {covered[0]}"
                             f" --code CODE {' '.join('--also ' + b for b in bases if b != covered[0])}"))
            return out
    if cred is not None and fleet.credential_for(paths, base) is not None:
        out.append(Check("board", OK, f"paired with the command center {base} as host {cred['host']!r}"))
        return out
    if cred is not None:
        out.append(Check("board", WARN, f"the credential in {fleet.credential_path(paths)} is for {cred['center']},"
                         f" not for the command center forward.url names ({base}): it is not sent there",
                         f"pair with {base} (agent-hook fleet join {base} --code CODE), or point forward.url"
                         " back at the center that paired this host"))
    if fleet.token(paths, cfg):
        out.append(Check("board", WARN, f"this host talks to the command center {base} with the shared fleet token:"
                         " there it acts as the owner, and anyone holding the token can speak for it",
                         f"on the command center: agent-hook fleet pair --host {fleet.host_name(cfg)}; here:"
                         f" agent-hook fleet join {base} --code CODE (docs/command-center.md, Moving a fleet"
                         " to pairing)"))
    return out


def openclaw_checks(cfg: dict[str, Any], status: dict[str, Any] | None) -> list[Any]:
    """The OpenClaw gateway's lines: its settings, and the running server's connection (none when unset)."""
    import os

    from agent_hooks.checks import FAIL, OK, WARN, Check
    from agent_hooks.openclaw import settings

    problems = settings.problems(cfg, os.environ)
    out = [Check("board", FAIL, f"OpenClaw gateway: {p}", "see docs/openclaw.md") for p in problems]
    clear = settings.cleartext_problem(cfg) if settings.configured(cfg) else None
    if clear:
        out.append(Check("board", WARN, f"OpenClaw gateway: {clear}", "see docs/openclaw.md"))
    if not settings.configured(cfg) or problems or status is None:
        return out
    lost = _openclaw_losses(status)
    if status.get("state") == "connected" and lost:
        out.append(Check("board", WARN, f"OpenClaw gateway {status.get('url')}: connected, but {lost}",
                         "see the server's log; max_events_per_s and max_frame_bytes in [openclaw] bound what"
                         " is taken (docs/openclaw.md)"))
    elif status.get("state") == "connected":
        out.append(Check("board", OK, f"OpenClaw gateway {status.get('url')}: connected, scopes"
                         f" {', '.join(status.get('scopes') or [])} ({status.get('events', 0)} event(s),"
                         f" {status.get('dropped', 0)} dropped)"))
    else:
        out.append(Check("board", WARN, f"OpenClaw gateway {status.get('url')}: {status.get('state')}"
                         f" ({status.get('last_error') or 'no answer yet'}); its agents' cards do not move meanwhile",
                         "is `openclaw gateway` running there, and is the token right?"))
    return out


def _openclaw_losses(status: dict[str, Any]) -> str:
    """What the gateway's events lost since the server started, in words ("" when nothing): events that
    could not be recorded (the store), could not be read (malformed) or were over the bounds (dropped)."""
    parts = []
    if status.get("write_errors"):
        error = f" (last: {status['last_write_error']})" if status.get("last_write_error") else ""
        parts.append(f"{status['write_errors']} event(s) could not be recorded{error}")
    if status.get("malformed"):
        parts.append(f"{status['malformed']} frame(s) could not be read")
    if status.get("dropped"):
        parts.append(f"{status['dropped']} event(s) dropped over the bounds")
    return "; ".join(parts)


# -- the fleet store ([center] database) -----------------------------------------------------------------

CONNECT_TIMEOUT_S = 3  # libpq's connect_timeout (whole seconds, 2 at least): doctor waits no longer


def fleet_store_checks(paths: Paths, cfg: dict[str, Any]) -> list[Any]:
    """Where the command center keeps the fleet: the embedded SQLite store (one line), or PostgreSQL: the
    password not in a config.toml others can read, the database reachable and migrated, and the running
    server's listener connected (read from its /status)."""
    from agent_hooks import config as config_mod
    from agent_hooks.center import fleetstore
    from agent_hooks.checks import FAIL, OK, Check

    out: list[Any] = _password_exposed(paths)
    url = fleetstore.database(cfg)
    if not url:
        out.append(Check("center", OK, f"the fleet is in the embedded SQLite store ({paths.store}):"
                         " [center] database is not set"))
    elif not fleetstore.is_postgres(url):  # config.load refuses it; the server runs on the SQLite store meanwhile
        out.append(Check("center", FAIL, f"{config_mod.database_problem(cfg)}: the command center keeps the fleet"
                         f" in the embedded SQLite store ({paths.store}) instead",
                         'database = "postgresql://USER@HOST/DATABASE" in [center], or "" for the embedded store'))
    else:
        out.extend(_postgres_checks(url))
    return out + _server_store_checks(paths, cfg, url if fleetstore.is_postgres(url) else "")


def _password_exposed(paths: Paths) -> list[Any]:
    """A warning when config.toml's [center] database carries a password and others may read the file."""
    import os
    import shlex
    import stat
    import tomllib

    from agent_hooks.center import fleetstore
    from agent_hooks.checks import WARN, Check

    path = paths.config_file
    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []  # no file, or one the config area already says is broken
    center = raw.get("center")
    url = center.get("database") if isinstance(center, dict) else None
    mode = stat.S_IMODE(st.st_mode)
    if not isinstance(url, str) or not fleetstore.password(url) or not mode & 0o077:
        return []
    return [Check("center", WARN, f"[center] database in {path} carries the database's password, and the file is"
                  f" readable by others (mode {mode:03o}): they can read and change the whole fleet",
                  f"chmod 600 {shlex.quote(path)}; better, take the password out of the URL: put it in a 0600"
                  " password file (~/.pgpass of the server's user, or ?passfile=/path/to/it in the URL, or"
                  " PGPASSFILE), or give the whole URL in the server's environment (AGENT_HOOKS__CENTER__DATABASE);"
                  " see docs/command-center.md, When one machine is not enough", {"mode": f"{mode:03o}"})]


def _postgres_checks(url: str) -> list[Any]:
    """The database reachable (a short timeout), and every named migration applied to it. Reads only."""
    from agent_hooks import schema
    from agent_hooks.center import fleetstore
    from agent_hooks.checks import FAIL, OK, WARN, Check

    where = fleetstore.describe(url)
    try:
        import psycopg
    except ImportError:
        return [Check("center", FAIL, f"[center] database names PostgreSQL ({where}), but psycopg is not installed:"
                      " the command center does not start", "pip install 'agent-hooks[postgres]'")]
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                             application_name="agent-hooks doctor") as conn:
            if conn.execute("SELECT to_regclass('_migrations')").fetchone()[0] is None:  # type: ignore[index]
                applied: set[str] = set()
            else:
                applied = {r[0] for r in conn.execute("SELECT name FROM _migrations").fetchall()}
    except psycopg.Error as exc:
        why = fleetstore.error_text(exc, url)
        hint = (" (a password file others can read is ignored: chmod 600 it)"
                if "no password supplied" in why or "password authentication failed" in why else "")
        return [Check("center", FAIL, f"the fleet's PostgreSQL at {where} cannot be reached: {why}; the command center"
                      " answers 503 meanwhile (hosts keep their events and send them again)",
                      f"start PostgreSQL there, or fix [center] database (host, port, user, database; the password"
                      f" from a 0600 password file){hint}; then agent-hook doctor again", {"database": where})]
    missing = [m for m in schema.MIGRATIONS if m not in applied]
    unknown = sorted(applied - set(schema.MIGRATIONS))
    out: list[Any] = []
    if missing:
        names = ", ".join(missing[:12]) + (f" and {len(missing) - 12} more" if len(missing) > 12 else "")
        out.append(Check("center", FAIL, f"the fleet's PostgreSQL at {where}: {len(missing)} of the"
                         f" {len(schema.MIGRATIONS)} migrations not applied ({names}): the command center's"
                         " reads and writes there fail", "agent-hook server stop; agent-hook server start (a command"
                         " center applies them when it starts, once, under a lock)",
                         {"database": where, "missing": missing}))
    if unknown:
        out.append(Check("center", WARN, f"the fleet's PostgreSQL at {where} has migrations this agent-hooks does not"
                         f" know ({', '.join(unknown)}): a newer one migrated it",
                         "install the agent-hooks version the other command centers run", {"unknown": unknown}))
    if not out:
        out.append(Check("center", OK, f"the fleet's PostgreSQL at {where}: reachable, all"
                         f" {len(schema.MIGRATIONS)} migrations applied", "", {"database": where}))
    return out


def _server_store_checks(paths: Paths, cfg: dict[str, Any], url: str) -> list[Any]:
    """The running server's fleet store, from its /status: the one config.toml names, and with PostgreSQL
    its listener (LISTEN/NOTIFY) connected. Nothing while no server runs (the server area says so)."""
    import time

    from agent_hooks.center import fleetstore
    from agent_hooks.checks import FAIL, OK, WARN, Check
    from agent_hooks.server import local, process

    st = process.status(paths, cfg)
    running = st.get("fleet_store") if st.get("up") else None
    if not isinstance(running, dict):
        return []  # not running, or not ours to ask (another uid)
    restart = "agent-hook server stop; agent-hook server start"
    if running.get("backend") != ("postgresql" if url else "sqlite") or \
            (url and running.get("database") != fleetstore.describe(url)):
        now = running.get("database") or "the embedded SQLite store"
        said = fleetstore.describe(url) if url else "the embedded SQLite store"
        return [Check("center", WARN, f"the running server keeps the fleet in {now}, but [center] database names"
                      f" {said}: it started before the setting changed", restart)]
    if not url:
        return []

    def at(ts: Any) -> str:
        return time.strftime("%H:%M:%S", time.localtime(ts)) if isinstance(ts, (int, float)) else "?"

    listener = running.get("listener") or {}
    error = f"; last error {at(listener.get('last_error_at'))}: {listener['last_error']}" \
        if listener.get("last_error") else ""
    if listener.get("connected"):
        again = f", {listener['reconnects']} reconnect(s)" if listener.get("reconnects") else ""
        return [Check("center", OK, f"the server's listener (LISTEN/NOTIFY) on {running.get('database')}: connected"
                      f" since {at(listener.get('since'))}, {listener.get('notifications', 0)} notification(s)"
                      f" received{again}{error}", "", {"listener": listener})]
    return [Check("center", FAIL, f"the server's listener (LISTEN/NOTIFY) on {running.get('database')} is not"
                  f" connected{error or ': connecting'}: answers, reports and controls taken by other command"
                  " centers do not reach this one's hosts and boards until it is",
                  "is PostgreSQL up and reachable (the line above)? the listener reconnects by itself every"
                  f" half second; see {local.log_file(paths)}", {"listener": listener})]
