"""The shared SQLite store, opened with the standard library only.

One file for every agent of the user on the host. WAL lets readers run
beside the one writer; writers take ``BEGIN IMMEDIATE`` so that a
read-modify-write never upgrades a read lock (the classic SQLITE_BUSY trap);
the busy timeout is shorter than the hook deadline. Schema changes live in
:mod:`agent_hooks.schema` (sqlite-utils), imported only when the file's
``user_version`` is behind :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

import os
import sqlite3
import time

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Must equal len(agent_hooks.schema.MIGRATIONS); a test checks it.
SCHEMA_VERSION = 22


class StoreError(Exception):
    """The store cannot be opened or is not ours."""


class Transaction:
    """``with store.write():`` -> BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error).

    With a gate (:class:`agent_hooks.spool.CommitGate`) the COMMIT goes through it:
    a hook that answered at its deadline and spooled its work never also commits it.
    """

    __slots__ = ("conn", "gate")

    def __init__(self, conn: sqlite3.Connection, gate: Any = None) -> None:
        self.conn = conn
        self.gate = gate

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            try:
                if self.gate is None:
                    self.conn.execute("COMMIT")
                else:
                    self.gate.commit(self.conn)
            except BaseException:
                # A COMMIT that failed (busy: a reader in a store not in WAL mode) leaves the
                # transaction open, and a long-lived connection would hold the lock for good.
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
        elif self.conn.in_transaction:
            self.conn.execute("ROLLBACK")


class Store:
    """A connection to the store, migrated to the current schema."""

    # True for a connection that must never wait (the server's event loop, server/app.py): until its
    # call commits, a busy store raises agent_hooks.dispatch.Deferred instead, and the call runs elsewhere.
    deferrable = False

    def __init__(self, path: str, busy_timeout_ms: int = 2500, migrate: bool = True) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.gate: Any = None  # the CommitGate of the call this store serves, if any
        self.conn = self._connect()
        version = self.schema_version()
        if version < SCHEMA_VERSION:
            if not migrate:
                raise StoreError(
                    f"store schema is at version {version}, expected {SCHEMA_VERSION}: run `agent-hook init`"
                )
            self.conn.close()
            self._migrate()
            self.conn = self._connect()

    def _migrate(self) -> None:
        bring_current(self.path, self.busy_timeout_ms)

    def _connect(self) -> sqlite3.Connection:
        directory = os.path.dirname(self.path)
        if directory and not os.path.isdir(directory):
            os.makedirs(directory, mode=0o700, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_ms / 1000, isolation_level=None)
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def schema_version(self) -> int:
        try:
            return int(self.conn.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: {exc}") from None

    def write(self) -> Transaction:
        return Transaction(self.conn, self.gate)

    def close(self) -> None:
        self.conn.close()


def now() -> float:
    return time.time()


# The errors table keeps the newest rows and drops old ones: config [errors].
KEEP_ERROR_ROWS = 2000
KEEP_ERROR_DAYS = 30.0
MAX_ERROR_MESSAGE = 2000
PRUNE_ERRORS_EVERY = 64


def safe_text(text: object, limit: int) -> str:
    """``text`` cut to ``limit`` chars, lone surrogates replaced: always storable as UTF-8."""
    value = str(text)[:limit]
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def record_error(
    conn: sqlite3.Connection, event: str, kind: str, message: str, session_id: str | None = None,
    keep_rows: int = KEEP_ERROR_ROWS, keep_days: float = KEEP_ERROR_DAYS,
) -> None:
    """Count an internal error in the store (the error log has the details).

    Every field is clipped and made storable, so counting cannot fail on the very
    input that caused the error; every PRUNE_ERRORS_EVERY rows, rows beyond the
    newest ``keep_rows`` or older than ``keep_days`` are dropped.
    """
    at = now()
    cur = conn.execute(
        "INSERT INTO errors (at, event, kind, session_id, message) VALUES (?, ?, ?, ?, ?)",
        (at, safe_text(event, 100), safe_text(kind, 100),
         None if session_id is None else safe_text(session_id, 256), safe_text(message, MAX_ERROR_MESSAGE)),
    )
    rid = int(cur.lastrowid or 0)
    if rid % PRUNE_ERRORS_EVERY == 0:
        conn.execute("DELETE FROM errors WHERE id <= ? OR at < ?", (rid - max(1, keep_rows), at - keep_days * 86400))


def bring_current(path: str, busy_timeout_ms: int = 30000) -> list[str]:
    """Bring the store at ``path`` to the current schema; return the migrations applied.

    Under an exclusive lock, so whoever waited finds the work done. The lock is taken with
    the standard library before sqlite-utils is imported, so when many hooks meet a new
    store only one of them pays; and a new, empty store is created from the schema's
    snapshot (:mod:`agent_hooks.schema_head`) without sqlite-utils at all (~200 ms of CPU
    less than importing it and running every migration). `agent-hook init`, doctor's
    scratch store and every Store that finds its file behind come here.
    """
    import fcntl

    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(path + ".migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        conn = sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None)
        try:
            behind = int(conn.execute("PRAGMA user_version").fetchone()[0]) < SCHEMA_VERSION
        finally:
            conn.close()
        if not behind:
            return []
        from agent_hooks import schema_head

        created = schema_head.create_if_empty(path, SCHEMA_VERSION)
        if created is not None:
            return created
        from agent_hooks.schema import migrate

        return migrate(path, lock=False)
    finally:
        os.close(fd)  # releases the flock
