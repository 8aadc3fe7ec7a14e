"""Shared pieces of the CLI: the environment's paths, configuration and store."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sqlite3
from collections.abc import Collection, Iterator
from typing import Any

import click

from agent_hooks import config as config_mod
from agent_hooks.paths import Paths
from agent_hooks.store import Store, StoreError


class Exit:
    """Exit statuses of every command (docs/commands.md): one meaning each."""

    OK = 0
    ERROR = 1  # a user error or a failed operation, with its message on stderr
    USAGE = 2  # click's: a missing or bad argument or option
    NOT_FOUND = 3  # the session, task, agent, file or version named is not recorded


class NotFound(click.ClickException):
    """What the user named is not recorded (exit 3, whatever the command)."""

    exit_code = Exit.NOT_FOUND


def paths() -> Paths:
    return Paths(os.environ)


def load_config() -> dict[str, Any]:
    try:
        return config_mod.load(paths(), os.environ)
    except config_mod.ConfigError as exc:
        raise click.ClickException(f"invalid configuration: {exc}") from None


def open_store(write: bool = False) -> Store | None:
    """The store; None when it does not exist yet and ``write`` is false.

    Read-only commands never migrate: a store behind the code is an error that
    names the fix. Commands that write create and migrate it.
    """
    os.umask(0o077)
    p = paths()
    if not write and not os.path.exists(p.store):
        return None
    cfg = load_config()
    try:
        return Store(p.store, cfg["runtime"]["busy_timeout_ms"], migrate=write)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # sqlite3.DatabaseError: corrupt file, not a database
        raise click.ClickException(f"cannot open the store {p.store}: {exc}") from None


@contextlib.contextmanager
def writing() -> Iterator[sqlite3.Connection]:
    """``with writing() as conn:`` one write transaction on the store (created or
    migrated first when needed), and the store closed afterwards."""
    store = open_store(write=True)
    assert store is not None  # write=True creates it
    try:
        with store.write() as conn:
            yield conn
    finally:
        store.close()


def open_fleet_store(write: bool = False) -> Any:
    """The command center's fleet store: PostgreSQL when [center] database names it (migrated), else the
    host's store (:func:`open_store`)."""
    from agent_hooks.center import fleetstore

    url = fleetstore.database(load_config())
    if not fleetstore.is_postgres(url):
        return open_store(write)
    try:
        return fleetstore.PgStore(url)
    except Exception as exc:  # noqa: BLE001 - psycopg's errors: away, refused, a bad URL
        raise click.ClickException(f"the fleet's PostgreSQL ({fleetstore.describe(url)}): {exc}") from None


@contextlib.contextmanager
def fleet_writing() -> Iterator[Any]:
    """:func:`writing` on the fleet store (:func:`open_fleet_store`)."""
    store = open_fleet_store(write=True)
    try:
        with store.write() as conn:
            yield conn
    finally:
        store.close()


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 error', '2 errors'."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def center_json(server: str, method: str, path: str, *, ok: Collection[int] | None = None, headers: Any = None,
                failover: bool = True, **kwargs: Any) -> tuple[str, int, dict[str, Any]]:
    """One request to a command center and its answer, as every CLI command that talks to one makes it:
    (the base URL that answered, the HTTP status, the answer's JSON object).

    :func:`to_center` sends it (this host's credential for that center, else the fleet token, unless
    ``headers`` says otherwise; the next of forward.url's centers when it cannot be reached, unless not
    ``failover``). An answer that is not a JSON object (a proxy's page, a list) becomes ``{"error": its
    text}``. A refused credential (401, 403) and a server's failure (5xx) are always an error naming the
    center; so is, with ``ok``, any other status outside it. The caller reads the rest (a 404 or 409 may be
    an answer of its own)."""
    base, r = to_center(server, method, path, headers=headers, failover=failover, **kwargs)
    try:
        doc = r.json()
    except ValueError:
        doc = {"error": r.text[:300]}
    if not isinstance(doc, dict):
        doc = {"error": str(doc)[:300]}
    if r.status_code in (401, 403) or r.status_code >= 500 or (ok is not None and r.status_code not in ok):
        raise click.ClickException(f"{base}: HTTP {r.status_code}: {doc.get('error', doc)}")
    return base, r.status_code, doc


def current_center() -> str | None:
    """The host's current command center (the store's row, forward/centers.py) as a base URL, when
    forward.url names several; None without a store or a list. Read-only, and never an error."""
    import sqlite3

    from agent_hooks import fleet
    from agent_hooks.forward import centers

    urls = centers.ingest_urls(load_config()["forward"])
    p = paths()
    if len(urls) < 2 or not os.path.exists(p.store):
        return None
    try:
        conn = sqlite3.connect(f"file:{p.store}?mode=ro", uri=True, timeout=1.0)
        try:
            return fleet.center_base(centers.read(conn, urls).url)
        finally:
            conn.close()
    except sqlite3.Error:  # a store being created, or not one: the named center, as without a list
        return None


def to_center(server: str, method: str, path: str, headers: Any = None, failover: bool = True,
              **kwargs: Any) -> tuple[str, Any]:
    """One request to the command center ``--server`` names: (its base URL, the httpx response).

    When that center is one of forward.url's several, it names the fleet: the host's current center
    (the one its senders use, agent_hooks.forward.centers) is asked first, then the named one, then
    the others of the list in order, each only when the one before could not be reached (no
    connection, or none made in time: nothing was sent). The one that answered is returned. Any other
    failure (a timeout after sending, a reset) is said, not retried: the request may have been taken.
    ``headers(base)`` gives each center's headers (default: this host's credential for it, else the
    fleet token, as agent_hooks.fleet decides)."""
    import httpx

    from agent_hooks import fleet
    from agent_hooks.forward.centers import ingest_urls

    base = fleet.center_base(server) or server.rstrip("/")
    cfg = load_config()
    listed = [b for b in (fleet.center_base(u) for u in ingest_urls(cfg["forward"])) if b]
    tries = [base]
    if failover and any(fleet.same_center(b, base) for b in listed):
        current = current_center()
        first = [current] if current and not fleet.same_center(current, base) else []
        tries = [*first, base, *(b for b in listed if not any(fleet.same_center(b, t) for t in [*first, base]))]
    wait = kwargs.get("timeout")
    if len(tries) > 1 and isinstance(wait, (int, float)):
        # A center whose machine is down answers nothing at all: the next is asked after 3 s, not after
        # the whole timeout (a connection on loopback or a LAN takes milliseconds).
        kwargs["timeout"] = httpx.Timeout(wait, connect=min(float(wait), 3.0))
    problems = []
    for target in tries:
        sent = headers(target) if headers is not None else fleet.client_headers(paths(), cfg, os.environ, url=target)
        try:
            return target, httpx.request(method, target + path, headers=sent, trust_env=False, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            problems.append(f"{target}: {exc or type(exc).__name__}")
        except httpx.HTTPError as exc:
            raise click.ClickException(f"command center {target} unreachable: {exc}") from None
    raise click.ClickException("command center unreachable: " + "; ".join(problems))
