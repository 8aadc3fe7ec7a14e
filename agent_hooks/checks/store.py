"""Store area: the SQLite file opens, is intact, current, in WAL mode, writable and private.

The advice never throws data away: a permission problem gets ``chmod``, a
lock gets "find the holder", a directory in the file's place gets "move the
directory aside", and only a file SQLite itself calls damaged gets "move it
aside (all three files, kept for recovery) and start a new one".
"""

from __future__ import annotations

import os
import shlex
import sqlite3
import stat
from typing import Any

from agent_hooks.checks import FAIL, OK, WARN, Check, Context, check
from agent_hooks.paths import Paths
from agent_hooks.store import SCHEMA_VERSION

FILE_MODE, DIR_MODE = 0o600, 0o700


@check("store", order=30)
def store(ctx: Context) -> list[Check]:
    """The store's health; leaves ``ctx.conn`` open when later checks can read it."""
    checks, ctx.conn = check_store(ctx.paths, ctx.cfg)
    return checks


def connect_existing(path: str, timeout_s: float) -> sqlite3.Connection:
    """Open the store without creating it (mode=rw)."""
    return sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=timeout_s, isolation_level=None)


def _q(path: str) -> str:
    return shlex.quote(path)


def _locked(exc: Exception) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def locked_check(path: str, timeout_s: float) -> Check:
    """The line for a store another process holds locked past our busy timeout."""
    return Check("store", FAIL, f"store {path} is locked: another process held it for more than "
                 f"{timeout_s:g} s (the busy timeout), so hooks fail open while it lasts",
                 f"wait and re-run doctor, or find the holder: fuser {_q(path)} (or lsof {_q(path)}); "
                 "do not delete or move the file: it is not damaged", {"state": "locked"})


def reach_problem(path: str) -> Check | None:
    """A store that exists but cannot be used as a file: a directory, or a permission problem."""
    try:
        st = os.stat(path)
    except PermissionError:
        parent = os.path.dirname(path)
        return Check("store", FAIL, f"store {path} cannot be reached: permission denied on {parent}",
                     f"chmod 700 {_q(parent)}", {"state": "permission"})
    if stat.S_ISDIR(st.st_mode):
        aside = f"{path}.dir"
        return Check("store", FAIL, f"store {path} is a directory, not a file: hooks cannot open it",
                     f"look at what is in it, then move it aside (mv {_q(path)} {_q(aside)}) and run "
                     "agent-hook init; nothing the hooks recorded is in a directory", {"state": "directory"})
    if not stat.S_ISREG(st.st_mode):
        return Check("store", FAIL, f"store {path} is not a regular file", f"move it aside (mv {_q(path)} "
                     f"{_q(path + '.other')}) and run agent-hook init", {"state": "not_a_file"})
    mode = stat.S_IMODE(st.st_mode)
    if not (os.access(path, os.R_OK) and os.access(path, os.W_OK)):
        if st.st_uid != os.getuid():
            fix = f"the file belongs to uid {st.st_uid}: sudo chown {os.getuid()} {_q(path)} && chmod 600 {_q(path)}"
        else:
            fix = f"chmod 600 {_q(path)} (the data is intact: do not move or delete it)"
        what = "read" if not os.access(path, os.R_OK) else "written"
        return Check("store", FAIL, f"store {path} cannot be {what}: permission denied (mode {mode:03o})", fix,
                     {"state": "permission", "mode": f"{mode:03o}"})
    return None


def check_store(p: Paths, cfg: dict[str, Any]) -> tuple[list[Check], sqlite3.Connection | None]:
    """Checks of the store, and a connection when it is usable (schema current)."""
    path = p.store
    if not os.path.lexists(path):
        return [Check("store", WARN, f"store {path} does not exist yet",
                      "nothing to do: the first hook call creates it (or run agent-hook init)")], None
    problem = reach_problem(path)
    if problem is not None:
        return [problem], None
    checks: list[Check] = []
    timeout_s = cfg["runtime"]["busy_timeout_ms"] / 1000
    broken = f"{path}.broken"
    fix_corrupt = (f"keep it for recovery and start a new store: mv {_q(path)} {_q(broken)} (and its -wal and -shm "
                   f"files beside it), then agent-hook init; sqlite3 {_q(broken)} .recover can salvage rows")
    try:
        conn = connect_existing(path, timeout_s)
        result = conn.execute("PRAGMA quick_check").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    except sqlite3.OperationalError as exc:
        if _locked(exc):
            return [locked_check(path, timeout_s)], None
        return [Check("store", FAIL, f"store {path} cannot be opened: {exc}",
                      f"check the modes of {os.path.dirname(path)} (700) and of the store's -wal/-shm files (600)",
                      {"state": "unopenable"})], None
    except sqlite3.DatabaseError as exc:
        return [Check("store", FAIL, f"store {path} is damaged: {exc}", fix_corrupt, {"state": "corrupt"})], None
    if result != "ok":
        checks.append(Check("store", FAIL, f"store {path} is damaged: {result}", fix_corrupt, {"state": "corrupt"}))
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
                            f"sqlite3 {_q(path)} 'PRAGMA journal_mode=WAL'"))
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        checks.append(locked_check(path, timeout_s) if _locked(exc) else Check(
            "store", FAIL, f"store is not writable: {exc}", f"check the modes of {os.path.dirname(path)} and "
            f"{path}-wal (chmod 700 the directory, 600 the files)"))
    else:
        checks.append(Check("store", OK, "writable"))
    checks.append(modes_check("store", [path, path + "-wal", path + "-shm", p.error_log],
                              [os.path.dirname(path), p.log_dir]))
    if not usable:
        conn.close()
        return checks, None
    return checks, conn


def modes_check(area: str, files: list[str], dirs: list[str]) -> Check:
    """Exact modes: files 0600 and directories 0700 (the ones that exist)."""
    wrong: list[tuple[str, int, int]] = []
    for want, paths in ((FILE_MODE, files), (DIR_MODE, dirs)):
        for f in dict.fromkeys(paths):
            try:
                mode = stat.S_IMODE(os.stat(f).st_mode)
            except OSError:
                continue
            if mode != want:
                wrong.append((f, mode, want))
    if not wrong:
        return Check(area, OK, "files are 0600, directories 0700")
    # Other users reading a file reads the store; a loose directory only shows the names.
    loose = [w for w in wrong if w[1] & 0o077 and w[2] == FILE_MODE]
    text = ", ".join(f"{f} is {m:03o} (expected {w:03o})" for f, m, w in wrong)
    fix = "; ".join(f"chmod {w:o} {_q(f)}" for f, _, w in wrong)
    data = {"modes": {f: f"{m:03o}" for f, m, _ in wrong}}
    if loose:
        return Check(area, FAIL, f"readable by others: {text}; the store holds prompts, commands and memory",
                     fix, data)
    return Check(area, WARN, f"unexpected modes: {text}", fix, data)
