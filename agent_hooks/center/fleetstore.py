"""The command center's fleet store: one interface, two backends (SQLite, the default; PostgreSQL).

The center's modules (fleetdb, report, relay, control, credentials, ledger, ...) run plain SQL over one
connection with ``conn.execute(sql, params)``. With SQLite that connection is the host's own store, as it
always was. With ``[center] database = "postgresql://..."`` it is a :class:`PgConnection`: a thin adapter
over a psycopg 3 connection that speaks the same dialect the center's SQL is written in:

* ``?`` placeholders become ``%s`` (and a literal ``%`` is doubled), outside quoted strings;
* ``INSERT OR IGNORE INTO t ...`` becomes ``INSERT INTO t ... ON CONFLICT DO NOTHING``;
* ``x IS NOT ?`` / ``x IS ?`` become ``IS DISTINCT FROM`` / ``IS NOT DISTINCT FROM``;
* ``LIMIT -1`` becomes ``LIMIT ALL``, ``char(n)`` ``chr(n)``; ``BEGIN IMMEDIATE`` becomes ``BEGIN``; a ``bool`` parameter is sent as the integer SQLite would store.

What the translation does not cover, the schema does (:func:`migrate`): the two-argument scalar
``max(a, b)`` / ``min(a, b)`` of SQLite are functions of the database, and every table without an
integer primary key has a ``rowid`` column, as every SQLite table has. The center's SQL itself is written
to run on both (``ON CONFLICT (...) DO UPDATE``, ``RETURNING``): the code never branches on the database,
except where the two differ in kind rather than in spelling: how another process's commit is noticed
(SQLite: ``PRAGMA data_version``; PostgreSQL: LISTEN/NOTIFY, :class:`Listener`), and what the writer
thread checkpoints.

Migrations run from the same named list (agent_hooks/schema.py) for both. PostgreSQL's form of each is
derived, not written twice: the migration is run on an in-memory SQLite database and what it added
(tables, columns, indexes) is created in PostgreSQL with the matching types. Each name is recorded in
``_migrations`` once applied, under an advisory lock, so several centers starting at once migrate once.
The host's own tables are created too, and stay empty: a center on PostgreSQL has no local sessions
(docs/command-center.md, "When one machine is not enough").

psycopg is imported only here, and only when the database names PostgreSQL (the ``postgres`` extra).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agent_hooks import config as config_mod

log = logging.getLogger("agent_hooks.center.fleetstore")

CHANNEL = "agent_hooks_fleet"
# Guards the schema's migration between centers starting at once (pg_advisory_xact_lock's key).
MIGRATE_LOCK = 0x61686D67  # "ahmg"
# Guards the control sequence: a host's cursor never passes a control that commits later (see add_control).
CONTROLS_LOCK = 0x61686374  # "ahct"


def database(config: dict[str, Any]) -> str:
    """``[center] database``: "" (the host's SQLite store) or a PostgreSQL URL."""
    return str((config.get("center") or {}).get("database") or "").strip()


def is_postgres(url: str) -> bool:
    return url.startswith(config_mod.POSTGRES_SCHEMES)


def describe(url: str) -> str:
    """The database's URL without its password (for logs and doctor)."""
    return config_mod.hide_password(url)


def error_text(exc: BaseException, url: str) -> str:
    """An error's first line, without the database's password should it quote the URL."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    secret = password(url)
    return text.replace(secret, "***") if secret else text


def password(url: str) -> str | None:
    """The password a PostgreSQL URL carries (``user:password@`` or ``?password=``), or None."""
    from urllib.parse import parse_qs, unquote, urlsplit

    try:
        parts = urlsplit(url)
        if parts.password:
            return unquote(parts.password)
    except ValueError:
        return None
    found = parse_qs(parts.query).get("password")
    return found[0] if found and found[0] else None


class Dialect:
    """What differs between the two backends in kind: the center's SQL is the same for both."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def postgres(self) -> bool:
        return self.name == "postgresql"


SQLITE = Dialect("sqlite")
POSTGRES = Dialect("postgresql")


def dialect(conn: Any) -> Dialect:
    return getattr(conn, "dialect", SQLITE)


# -- the SQL dialect ---------------------------------------------------------------------------

_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?|%|[^'\"?%]+", re.S)
_IS_PARAM = re.compile(r"\bIS\s+(NOT\s+)?\?", re.I)
_INSERT_IGNORE = re.compile(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO\b", re.I)
_RETURNING = re.compile(r"\bRETURNING\b", re.I)


@functools.lru_cache(maxsize=2048)
def translate(sql: str, params: bool = True) -> str:
    """The center's SQL (SQLite's spelling) as PostgreSQL reads it (see the module docstring)."""
    text = sql.strip()
    if re.match(r"^BEGIN\s+IMMEDIATE\b", text, re.I):
        return "BEGIN"
    if _INSERT_IGNORE.match(text):
        text = _INSERT_IGNORE.sub("INSERT INTO", text, count=1)
        m = _RETURNING.search(text)
        text = (text[:m.start()] + "ON CONFLICT DO NOTHING " + text[m.start():]) if m \
            else text.rstrip().rstrip(";") + " ON CONFLICT DO NOTHING"
    text = re.sub(r"\bLIMIT\s+-1\b", "LIMIT ALL", text, flags=re.I)
    text = re.sub(r"\bchar\(", "chr(", text)
    text = _IS_PARAM.sub(lambda m: "IS NOT DISTINCT FROM ?" if not m.group(1) else "IS DISTINCT FROM ?", text)
    if not params:
        return text
    out = []
    for tok in _TOKEN.findall(text):
        out.append("%s" if tok == "?" else tok.replace("%", "%%") if tok[0] in "%'\"" else tok)
    return "".join(out)


def _param(value: Any) -> Any:
    # SQLite stores True as 1; PostgreSQL would refuse a boolean for an integer column.
    return int(value) if isinstance(value, bool) else value


_RIDES_ALONG = re.compile(r"^\s*(BEGIN|SAVEPOINT|RELEASE)\b", re.I)
_ENDS = re.compile(r"^\s*(COMMIT|ROLLBACK)\s*;?\s*$", re.I)


class PgConnection:
    """A psycopg connection that runs the center's SQL as sqlite3's would (see the module docstring).

    Autocommit, as the center's sqlite3 connections are (``isolation_level=None``): transactions are the
    caller's ``BEGIN`` ... ``COMMIT``, savepoints included.

    Each statement is a round trip the caller waits for, and the writer thread opens a savepoint around
    every job: ``BEGIN``, ``SAVEPOINT`` and ``RELEASE`` (which return nothing) are held back and sent in one
    pipeline with the next statement, so they cost no round trip of their own. An error of one of them
    is raised by that next statement, inside the same job. ``COMMIT`` and ``ROLLBACK`` end whatever was held
    back (both release every savepoint); a transaction whose ``BEGIN`` was never sent is not sent to end."""

    dialect = POSTGRES

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self._held: list[bytes] = []

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Any:
        if params is None or (not isinstance(params, dict) and len(params) == 0):
            if _RIDES_ALONG.match(sql):
                self._held.append(translate(sql, params=False).encode())
                return _NO_ROWS
            if _ENDS.match(sql):
                return self._end(sql.strip().rstrip(";").upper())
            return self._send(translate(sql, params=False).encode(), None)
        args: Any = {k: _param(v) for k, v in params.items()} if isinstance(params, dict) \
            else [_param(v) for v in params]
        return self._send(translate(sql).encode(), args)

    @contextmanager
    def _pipeline(self, needed: bool = False) -> Iterator[None]:
        """What was held back, sent ahead of what the block sends, in one pipeline (one round trip);
        nothing held and no pipeline ``needed``: the block as it is."""
        held, self._held = self._held, []
        if not held and not needed:
            yield
            return
        with self.raw.pipeline():
            for statement in held:
                self.raw.execute(statement, prepare=False)
            yield

    @property
    def _begin_held(self) -> bool:
        """The transaction's BEGIN is still held back: to the server there is no transaction yet."""
        return any(h.upper().startswith(b"BEGIN") for h in self._held)

    def _send(self, query: bytes, args: Any) -> Any:
        with self._pipeline():
            return self.raw.execute(query, prepare=False) if args is None else self.raw.execute(query, args)

    def _end(self, word: str) -> Any:
        if self._begin_held:
            self._held = []
            return _NO_ROWS  # the transaction never reached the server: nothing to end
        self._held = []  # COMMIT and ROLLBACK release every savepoint
        return self.raw.execute(word.encode(), prepare=False)

    def run_all(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
        """Several statements in one pipeline (one round trip), with what was held back; their cursors."""
        with self._pipeline(needed=True):
            return [self.raw.execute(translate(sql).encode(), [_param(v) for v in params])
                    for sql, params in statements]

    def executemany(self, sql: str, seq: Any) -> Any:
        cur = self.raw.cursor()
        rows = [[_param(v) for v in row] for row in seq]
        if rows:
            with self._pipeline():  # psycopg's executemany is a pipeline of its own
                cur.executemany(translate(sql).encode(), rows)
        return cur

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        if self._begin_held:
            return True
        return bool(self.raw.info.transaction_status != TransactionStatus.IDLE)

    def commit(self) -> None:
        if self.in_transaction:
            self.execute("COMMIT")

    def rollback(self) -> None:
        if self.in_transaction:
            self.execute("ROLLBACK")

    def close(self) -> None:
        self._held = []
        self.raw.close()


class _NoRows:
    """What a statement held back (or one not sent) returns: no rows, nothing changed."""

    rowcount = 0
    description = None

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Iterator[Any]:
        return iter(())


_NO_ROWS = _NoRows()


# libpq's keepalives: a connection whose database vanished without a word (a partition, a dead machine) is
# found dead in about a minute, not at the next write the kernel gives up on (the listener only reads).
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}


def _connect_args(application: str) -> dict[str, Any]:
    return {"autocommit": True, "application_name": application, "connect_timeout": 10, **_KEEPALIVES}


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the extra is not installed
        raise RuntimeError("[center] database names PostgreSQL, but psycopg is not installed:"
                           " pip install 'agent-hooks[postgres]'") from exc
    return psycopg


def connect(url: str, application: str = "agent-hooks center") -> PgConnection:
    """A new autocommit connection to the fleet's PostgreSQL database."""
    return PgConnection(_psycopg().connect(url, **_connect_args(application)))


class _PgTransaction:
    """``with store.write() as conn:``: BEGIN ... COMMIT (ROLLBACK on error), as store.Transaction does."""

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def __enter__(self) -> PgConnection:
        self.conn.execute("BEGIN")
        return self.conn

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.rollback()
                raise
        else:
            self.conn.rollback()


class PgStore:
    """The fleet store on PostgreSQL, in the shape the hub and the notifier use a ServerStore in: a
    connection of its own (``PgStore(url)``), or one borrowed from the process's pool (:func:`borrowed`)."""

    dialect = POSTGRES

    def __init__(self, url: str, migrate_now: bool = True, conn: PgConnection | None = None) -> None:
        self.url = url
        self.conn = conn if conn is not None else connect(url)
        self.generation = 0
        if migrate_now:
            try:
                migrate(self.conn)
            except BaseException:
                self.conn.close()
                raise

    def write(self) -> _PgTransaction:
        return _PgTransaction(self.conn)

    def moved(self) -> bool:
        return False

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass


def unreachable(exc: BaseException) -> bool:
    """True for PostgreSQL being down or unreachable (its connection lost): the work can succeed later."""
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))


# -- the schema ----------------------------------------------------------------------------------

_TYPES = {"INTEGER": "bigint", "INT": "bigint", "REAL": "double precision", "FLOAT": "double precision",
          "TEXT": "text", "BLOB": "bytea", "": "text", "NUMERIC": "double precision"}
# Scalar two-argument max/min (SQLite's), for the center's SQL that uses them.
_FUNCTIONS = [
    f"CREATE OR REPLACE FUNCTION {name}(a {kind}, b {kind}) RETURNS {kind} LANGUAGE sql IMMUTABLE PARALLEL SAFE"
    f" AS $$ SELECT {pg}(a, b) $$"
    for name, pg in (("max", "GREATEST"), ("min", "LEAST"))
    for kind in ("double precision", "bigint", "text")
]


def _shape(conn: sqlite3.Connection) -> dict[str, Any]:
    """What a SQLite database holds that PostgreSQL should: tables (columns, primary key), indexes."""
    tables: dict[str, Any] = {}
    indexes: dict[str, str] = {}
    virtual = [n for n, s in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
               if s and s.upper().startswith("CREATE VIRTUAL")]
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid"):
        if name.startswith(("sqlite_", "_")) or name in virtual or any(name.startswith(v + "_") for v in virtual):
            continue
        cols = [(c[1], str(c[2]).upper(), bool(c[3]), c[4], int(c[5]))
                for c in conn.execute(f"PRAGMA table_info('{name}')")]
        tables[name] = cols
    for name, table, sql in conn.execute("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index'"):
        if sql and table in tables:
            indexes[name] = sql
    return {"tables": tables, "indexes": indexes}


def _column(name: str, kind: str, notnull: bool, default: Any) -> str:
    text = f'"{name}" {_TYPES.get(kind, "text")}'
    if default is not None:
        text += f" DEFAULT {default}"
    if notnull:
        text += " NOT NULL"
    return text


def _create(name: str, cols: list[tuple[str, str, bool, Any, int]]) -> list[str]:
    pk = [c for c in sorted(cols, key=lambda c: c[4]) if c[4]]
    parts = []
    for col, kind, notnull, default, key in cols:
        if len(pk) == 1 and key and kind.startswith("INT"):
            # SQLite's INTEGER PRIMARY KEY is the rowid: numbered when not given.
            parts.append(f'"{col}" bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY')
        else:
            parts.append(_column(col, kind, notnull, default))
    if not (len(pk) == 1 and pk[0][1].startswith("INT")):
        parts.append('"rowid" bigint GENERATED BY DEFAULT AS IDENTITY')
        if pk:
            parts.append("PRIMARY KEY (" + ", ".join(f'"{c[0]}"' for c in pk) + ")")
    return [f'CREATE TABLE IF NOT EXISTS "{name}" (' + ", ".join(parts) + ")"]


def _index(sql: str) -> str:
    # SQLite's CREATE INDEX reads the same in PostgreSQL, once it may be run again.
    sql = re.sub(r"^CREATE\s+(UNIQUE\s+)?INDEX\s+(?!IF)", lambda m: f"CREATE {m.group(1) or ''}INDEX IF NOT EXISTS ",
                 sql.strip(), flags=re.I)
    return sql.replace("[", '"').replace("]", '"')


@functools.lru_cache(maxsize=1)
def postgres_migrations() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each named migration (agent_hooks/schema.py) as PostgreSQL's statements: what it added to a SQLite
    database, with PostgreSQL's types. A migration that only touches what PostgreSQL has no use for
    (triggers, full-text tables, data) is an empty step, still recorded by its name."""
    import sqlite_utils

    from agent_hooks import schema

    conn = sqlite3.connect(":memory:", isolation_level=None)
    db = sqlite_utils.Database(conn)
    before = _shape(conn)
    steps: list[tuple[str, tuple[str, ...]]] = []
    for m in schema.MIGRATION_SET._migrations:
        m.fn(db)
        after = _shape(conn)
        sql: list[str] = []
        for name, cols in after["tables"].items():
            old = before["tables"].get(name)
            if old is None:
                sql += _create(name, cols)
                continue
            known = {c[0] for c in old}
            for col, kind, notnull, default, _key in cols:
                if col not in known:
                    sql.append(f'ALTER TABLE "{name}" ADD COLUMN IF NOT EXISTS {_column(col, kind, notnull, default)}')
        for name, text in after["indexes"].items():
            if name not in before["indexes"]:
                sql.append(_index(text))
        steps.append((m.name, tuple(sql)))
        before = after
    conn.close()
    return tuple(steps)


def migrate(conn: PgConnection) -> list[str]:
    """Bring the fleet's PostgreSQL database to the current schema; the migrations applied."""
    done: list[str] = []
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATE_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name text PRIMARY KEY, applied_at double precision)")
        applied = {r[0] for r in conn.execute("SELECT name FROM _migrations").fetchall()}
        if not applied:
            for statement in _FUNCTIONS:
                conn.execute(statement)
        for name, statements in postgres_migrations():
            if name in applied:
                continue
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))
            done.append(name)
        if done:
            _notify_triggers(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.rollback()
        raise
    return done


# -- wake-ups across processes: LISTEN/NOTIFY ------------------------------------------------------

# Each change a center must hear of from another: the table, and the payload its trigger sends
# ("<topic>:<key>"): a card changed, a host's control was recorded, requests or the ledger changed.
_TRIGGERS = {
    "fleet_sessions": ("card", "coalesce(NEW.id, OLD.id)"),
    "fleet_controls": ("control", "coalesce(NEW.host, OLD.host)"),
    "approvals": ("approvals", "coalesce(NEW.host, OLD.host)"),
    "fleet_cost_messages": ("cost", "coalesce(NEW.host, OLD.host)"),
    "fleet_credentials": ("credentials", "''"),
    "fleet_left_out": ("left_out", "coalesce(NEW.host, OLD.host)"),
    "fleet_shared": ("shared", "coalesce(NEW.name, OLD.name)"),
}


# Columns whose change alone tells no center anything: an update of only these sends no notification. A
# host's report rewrites every card's details_at (when it was reported) even when nothing else changed: one
# notification per card per report to every center, about 800 a second at 1,000 hosts, for cards that are the same.
_QUIET = {"fleet_sessions": ("details_at",)}


def _notify_triggers(conn: PgConnection) -> None:
    for table, (topic, key) in _TRIGGERS.items():
        fn = f"agent_hooks_notify_{table}"
        conn.execute(
            f"CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" PERFORM pg_notify('{CHANNEL}', '{topic}:' || {key}); RETURN NULL; END $$")
        conn.execute(f'DROP TRIGGER IF EXISTS {fn} ON "{table}"')
        conn.execute(f'DROP TRIGGER IF EXISTS {fn}_update ON "{table}"')
        quiet = _QUIET.get(table)
        if not quiet:
            conn.execute(f'CREATE TRIGGER {fn} AFTER INSERT OR UPDATE OR DELETE ON "{table}"'
                         f" FOR EACH ROW EXECUTE FUNCTION {fn}()")
            continue
        conn.execute(f'CREATE TRIGGER {fn} AFTER INSERT OR DELETE ON "{table}" FOR EACH ROW EXECUTE FUNCTION {fn}()')
        drop = " - ".join(f"'{c}'" for c in quiet)
        conn.execute(f'CREATE TRIGGER {fn}_update AFTER UPDATE ON "{table}" FOR EACH ROW'
                     f" WHEN ((to_jsonb(OLD) - {drop}) IS DISTINCT FROM (to_jsonb(NEW) - {drop}))"
                     f" EXECUTE FUNCTION {fn}()")


def notify(conn: Any, topic: str, key: str) -> None:
    """Tell every center (this one too) of ``topic:key``, at the commit of the caller's transaction. A
    no-op on SQLite: there is one process."""
    if dialect(conn).postgres:
        conn.execute("SELECT pg_notify(?, ?)", (CHANNEL, f"{topic}:{key}"[:7900]))


class Listener:
    """LISTENs on the fleet's channel on the server's event loop (psycopg's async connection: no thread,
    no hop between threads) and hands each notification (topic, key) to ``on_notice``, on the loop; on a
    lost connection it reconnects (``on_reconnect`` then: what it missed is unknown, so the caller looks
    at everything again)."""

    def __init__(self, url: str, on_notice: Callable[[list[tuple[str, str]]], None],
                 on_reconnect: Callable[[], None]) -> None:
        self.url = url
        self.on_notice = on_notice
        self.on_reconnect = on_reconnect
        self.stopping = False
        self.task: asyncio.Task[None] | None = None
        self.ready: asyncio.Event | None = None
        # For /status and doctor: since when it listens (wall clock; None while it does not), how many
        # notifications it took, how often it reconnected, and the last failure (kept once connected again).
        self.connected_since: float | None = None
        self.notifications = 0
        self.reconnects = 0
        self.last_error: str | None = None
        self.last_error_at: float | None = None

    def status(self) -> dict[str, Any]:
        """What /status shows of the listener (see the attributes set in ``__init__``)."""
        return {"connected": self.connected_since is not None, "since": self.connected_since,
                "notifications": self.notifications, "reconnects": self.reconnects,
                "last_error": self.last_error, "last_error_at": self.last_error_at}

    async def start(self, wait_s: float = 10.0) -> Listener:
        """Start listening; return once it listens, or after ``wait_s`` (PostgreSQL away: it keeps trying)."""
        self.ready = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run(), name="agent-hooks-fleet-listen")
        try:
            await asyncio.wait_for(self.ready.wait(), wait_s)
        except TimeoutError:
            pass
        return self

    async def stop(self) -> None:
        self.stopping = True
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping: nothing left to tell
                pass

    async def _run(self) -> None:
        psycopg = _psycopg()
        failed_before = False
        while not self.stopping:
            conn: Any = None
            try:
                conn = await psycopg.AsyncConnection.connect(self.url, **_connect_args("agent-hooks center listener"))
                await conn.execute(f"LISTEN {CHANNEL}".encode())
                if failed_before:
                    self.reconnects += 1
                    self.on_reconnect()
                self.connected_since = time.time()
                assert self.ready is not None
                self.ready.set()
                failed_before = False
                async for n in conn.notifies():
                    self.notifications += 1
                    topic, _, key = n.payload.partition(":")
                    self.on_notice([(topic, key)])
                raise psycopg.OperationalError("the listener's connection closed")
            except Exception as exc:  # noqa: BLE001 - PostgreSQL away: tried again, said once
                self.connected_since = None
                self.last_error, self.last_error_at = error_text(exc, self.url), time.time()
                if not failed_before:
                    log.warning("the fleet's PostgreSQL listener lost its connection (%s); reconnecting", exc)
                failed_before = True
            finally:
                self.connected_since = None
                if conn is not None:
                    try:
                        await conn.close()
                    except Exception:  # noqa: BLE001
                        pass
            if not self.stopping:
                await asyncio.sleep(0.5)


def run_all(conn: Any, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
    """Run ``statements`` (SQL, parameters) in order; their cursors. On PostgreSQL they go in one pipeline
    (one round trip for all, where the writer thread would wait for each); on SQLite one after another,
    which costs nothing more. For statements that do not depend on each other's results."""
    if isinstance(conn, PgConnection):
        return conn.run_all(statements)
    return [conn.execute(sql, params) for sql, params in statements]


@contextmanager
def transaction(conn: Any) -> Iterator[Any]:
    conn.execute("BEGIN")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


# -- where the center's code finds its store ----------------------------------------------------------

def postgres_of(state: Any) -> str | None:
    """The fleet's PostgreSQL URL when ``[center] database`` names one, else None (the SQLite store)."""
    url = database(state.config)
    return url if is_postgres(url) else None


def open_store(state: Any) -> Any:
    """A new connection to the fleet store: a PgStore, or the server's own SQLite ServerStore."""
    url = postgres_of(state)
    return PgStore(url) if url else state.open_store()


class Pool:
    """The process's connections to the fleet's PostgreSQL for what the server's threads read and write (a
    paired credential's check, a session's page): psycopg_pool's pool, so that however many threads serve
    requests, the database sees at most ``[center] pool_size`` connections from this center, each opened
    once and lent out one use at a time. A connection PostgreSQL dropped is found before it is lent and
    replaced; a borrower waits at most ``POOL_WAIT_S`` (then psycopg_pool.PoolTimeout: answered 503,
    as PostgreSQL away is)."""

    def __init__(self, url: str, size: int) -> None:
        _psycopg()
        from psycopg_pool import ConnectionPool

        self.url = url
        # check: a connection is looked at (an empty query) before it is lent, so one PostgreSQL dropped
        # (a restart, an idle timeout) is replaced there, not met by a request that would then fail.
        self.pool = ConnectionPool(url, min_size=1, max_size=max(1, size),
                                   kwargs=_connect_args("agent-hooks center pool"), timeout=POOL_WAIT_S,
                                   check=ConnectionPool.check_connection, name="agent-hooks-fleet", open=False)
        self.pool.open(wait=False)

    @contextmanager
    def store(self) -> Iterator[PgStore]:
        with self.pool.connection() as raw:
            yield PgStore(self.url, migrate_now=False, conn=PgConnection(raw))

    def close(self) -> None:
        self.pool.close(timeout=1.0)


POOL_WAIT_S = 5.0
_pools: dict[str, Pool] = {}
_pools_lock = threading.Lock()


def pool_of(state: Any, url: str) -> Pool:
    """The process's pool for ``url`` (made at the first use)."""
    pool = _pools.get(url)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(url)
            if pool is None:
                pool = _pools[url] = Pool(url, int((state.config.get("center") or {}).get("pool_size") or 10))
    return pool


def close_pools() -> None:
    """At the server's shutdown: every pool's connections closed."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        try:
            pool.close()
        except Exception:  # noqa: BLE001 - at shutdown, nothing is left to tell
            pass


@contextmanager
def borrowed(state: Any) -> Iterator[Any]:
    """The fleet store for one piece of work on a server thread: a connection lent by the process's pool
    (PostgreSQL), else the thread's SQLite store (``state.store()``). Its ``conn`` and ``write()`` are the
    store's; it is given back when the block ends."""
    url = postgres_of(state)
    if not url:
        yield state.store()
        return
    with pool_of(state, url).store() as store:
        yield store


def errors() -> tuple[type[BaseException], ...]:
    """The exceptions a fleet store's work raises for the store itself (either backend)."""
    # psycopg's only once imported (a center on PostgreSQL): a SQLite center never imports it.
    psycopg = sys.modules.get("psycopg")
    return (sqlite3.Error,) if psycopg is None else (sqlite3.Error, psycopg.Error)
