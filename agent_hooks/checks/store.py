"""Store area: the SQLite file opens, is intact, current, in WAL mode, writable and private."""

from __future__ import annotations

import os
import sqlite3
import stat
from typing import Any

from agent_hooks.checks import FAIL, OK, WARN, Check, Context, check
from agent_hooks.paths import Paths
from agent_hooks.store import SCHEMA_VERSION


@check("store", order=30)
def store(ctx: Context) -> list[Check]:
    """The store's health; leaves ``ctx.conn`` open when later checks can read it."""
    checks, ctx.conn = check_store(ctx.paths, ctx.cfg)
    return checks


def connect_existing(path: str, timeout_s: float) -> sqlite3.Connection:
    """Open the store without creating it (mode=rw)."""
    return sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=timeout_s, isolation_level=None)


def check_store(p: Paths, cfg: dict[str, Any]) -> tuple[list[Check], sqlite3.Connection | None]:
    """Checks of the store, and a connection when it is usable (schema current)."""
    path = p.store
    if not os.path.exists(path):
        return [Check("store", WARN, f"store {path} does not exist yet",
                      "nothing to do: the first hook call creates it (or run agent-hook init)")], None
    checks: list[Check] = []
    fix_corrupt = f"move it aside (mv {path} {path}.broken) and run agent-hook init"
    try:
        conn = connect_existing(path, cfg["runtime"]["busy_timeout_ms"] / 1000)
        result = conn.execute("PRAGMA quick_check").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        return [Check("store", FAIL, f"store {path} cannot be read: {exc} (corrupt?)", fix_corrupt)], None
    if result != "ok":
        checks.append(Check("store", FAIL, f"store {path} is damaged: {result}", fix_corrupt))
        conn.close()
        return checks, None
    checks.append(Check("store", OK, f"store {path} opens, integrity ok"))
    usable = True
    if version == SCHEMA_VERSION:
        checks.append(Check("store", OK, f"schema current (version {version})"))
    elif version < SCHEMA_VERSION:
        usable = False
        checks.append(Check("store", FAIL, f"schema at version {version}, this code needs {SCHEMA_VERSION}",
                            "agent-hook init (the next hook call also migrates it)"))
    else:
        usable = False
        checks.append(Check("store", FAIL, f"schema at version {version} is newer than this code ({SCHEMA_VERSION})",
                            "upgrade the package: re-run install.sh from a newer checkout"))
    if mode.lower() == "wal":
        checks.append(Check("store", OK, "WAL journal on"))
    else:
        checks.append(Check("store", FAIL, f"journal mode is {mode}, not WAL: readers block the writer",
                            f"sqlite3 {path} 'PRAGMA journal_mode=WAL'"))
    writable = os.access(path, os.W_OK) and bool(os.stat(path).st_mode & stat.S_IWUSR)
    if writable:
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            writable = False
            checks.append(Check("store", FAIL, f"store is not writable: {exc}",
                                "check the file's owner and mode, or what holds the lock"))
        else:
            checks.append(Check("store", OK, "writable"))
    else:
        checks.append(Check("store", FAIL, "store file is read-only", f"chmod 600 {path}"))
    loose = []
    for f in (path, path + "-wal", path + "-shm", p.error_log, p.config_file):
        try:
            if stat.S_IMODE(os.stat(f).st_mode) & 0o077:
                loose.append(f"{f} ({stat.S_IMODE(os.stat(f).st_mode):o})")
        except FileNotFoundError:
            pass
    if loose:
        checks.append(Check("store", FAIL, f"readable by others: {', '.join(loose)}",
                            "chmod 600 " + " ".join(x.split(" (")[0] for x in loose)))
    else:
        checks.append(Check("store", OK, "files are 0600"))
    if not usable:
        conn.close()
        return checks, None
    return checks, conn
