"""The spool: work a hook owed when it had to answer before its write committed.

Fail-open must not mean lost. When the deadline passes, or the store stays busy
past its timeout, the hook still answers at once, but first appends what it
owed (its payload, event, time and the environment its handler reads) as one
line to ``STATE/spool/pending.jsonl``: append-only, 0600, bounded by
``spool.max_bytes``. Whoever comes next replays it: a hook that finds the file
starts a detached replayer (``python -m agent_hooks.spool``), and the drainer
replays too. ``status`` counts what was spooled and what was replayed.

Exactly once. Every call carries a :class:`CommitGate` through its write
transaction (``store.Transaction`` commits through it):

* the hook's worker commits only while holding the gate, and not at all once
  the main thread has taken it at the deadline ("abandoned"): then either the
  work committed (nothing is spooled) or it never will (it is spooled);
* a replay commits the handler's work together with a row in
  ``spool_applied`` keyed by the call's id, so a line replayed twice (a
  replayer killed between commit and cleanup) is recorded once.

Standard library only: hooks import this module.
"""

from __future__ import annotations

import _thread
import json
import os
import sqlite3
import sys
import time

from agent_hooks.paths import Paths, ensure_dir

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PENDING = "pending.jsonl"
TAKEN_PREFIX = "taken-"
LOCK_NAME = "spool.lock"
STARTING_NAME = "spool.starting"
MAX_TRIES = 5
# Environment a handler reads (agent, role, task, tmux, transcript roots, PATH for workers).
_ENV_PREFIXES = ("AGENT_HOOKS", "OPTIMALOS_", "CLAUDE", "XDG_")
_ENV_NAMES = frozenset({"HOME", "PATH", "USER", "LANG", "TMUX", "TMUX_PANE"})
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL")

# Events whose handler the replayer runs: event -> module under agent_hooks.events.
EVENT_MODULES = {
    "SessionStart": "session_start", "SessionEnd": "session_end", "UserPromptSubmit": "user_prompt_submit",
    "PreToolUse": "pre_tool_use", "PostToolUse": "post_tool_use", "PostToolUseFailure": "post_tool_use_failure",
    "PreCompact": "pre_compact", "Stop": "stop", "Notification": "notification",
}


class Abandoned(Exception):
    """The hook answered at its deadline and spooled this work: this commit must not happen."""


class AlreadyApplied(Exception):
    """A replayed call whose work is already in the store."""


class CommitGate:
    """Decides, under one lock, between the worker's commit and the main thread's spool."""

    __slots__ = ("lock", "abandoned", "committed", "call_id")

    def __init__(self, call_id: str | None = None) -> None:
        self.lock = _thread.allocate_lock()
        self.abandoned = False
        self.committed = False
        self.call_id = call_id  # set for a replay: recorded with the work, once

    def commit(self, conn: sqlite3.Connection) -> None:
        """COMMIT the open transaction, unless the call was abandoned (or, replayed, already applied)."""
        with self.lock:
            if self.abandoned:
                conn.execute("ROLLBACK")
                raise Abandoned("answered at the deadline; the work was spooled")
            if self.call_id is not None:
                try:
                    conn.execute("INSERT INTO spool_applied (call_id, at) VALUES (?, ?)", (self.call_id, time.time()))
                except sqlite3.IntegrityError:
                    conn.execute("ROLLBACK")
                    raise AlreadyApplied(self.call_id) from None
                _bump(conn, "replayed")
            conn.execute("COMMIT")
            self.committed = True

    def abandon(self, wait_s: float) -> bool | None:
        """Main thread, at the deadline: True when the work is committed, False when it never will
        be (the gate is kept closed), None when a commit is still running after ``wait_s``."""
        if not self.lock.acquire(timeout=max(0.001, wait_s)):
            return None
        if self.committed:
            self.lock.release()
            return True
        self.abandoned = True  # set under the lock: any later commit sees it and rolls back
        self.lock.release()
        return False


def spool_dir(paths: Paths) -> str:
    return os.path.join(paths.state_dir, "spool")


def pending_path(paths: Paths) -> str:
    return os.path.join(spool_dir(paths), PENDING)


def has_work(paths: Paths) -> bool:
    """Is anything owed? One listing of a directory that is usually absent or empty
    (a file a crashed replayer took is owed too)."""
    try:
        names = os.listdir(spool_dir(paths))
    except OSError:
        return False
    return any(n == PENDING or n.startswith(TAKEN_PREFIX) for n in names)


def transient(exc: BaseException) -> bool:
    """A store that is busy or locked: the same work will succeed later."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    text = str(exc).lower()
    return "locked" in text or "busy" in text


# SQLite's primary result codes of a store that cannot be written now but may be later: SQLITE_PERM,
# SQLITE_READONLY (a 0444 file, a read-only mount, -wal/-shm files left read-only), SQLITE_IOERR,
# SQLITE_FULL, SQLITE_CANTOPEN (a directory that cannot be reached).
_UNWRITABLE_CODES = frozenset({3, 8, 10, 13, 14})


def unwritable(exc: BaseException) -> bool:
    """A store that cannot be written (read-only, unreachable, full): the same work can succeed once
    it is fixed, so the call is kept rather than reported and dropped. Not a busy store (``transient``)."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int):
            return (code & 0xFF) in _UNWRITABLE_CODES
        text = str(exc).lower()
        return any(w in text for w in ("readonly", "read-only", "unable to open", "disk i/o", "disk is full"))
    # Opening it: its directory cannot be made or reached.
    return isinstance(exc, (PermissionError, IsADirectoryError, NotADirectoryError, FileNotFoundError))


def env_subset(env: Any) -> dict[str, str]:
    """The environment a handler reads, without anything named like a secret."""
    kept = {}
    for name, value in env.items():
        if (name in _ENV_NAMES or name.startswith(_ENV_PREFIXES)) and not any(w in name for w in _SECRET_WORDS):
            kept[name] = value
    return kept


def _new_id() -> str:
    return os.urandom(12).hex()


def save(paths: Paths, config: dict[str, Any], event: str, data: bytes, started: float, env: Any,
         tries: int = 0, call_id: str | None = None, answered: str | None = None) -> str | None:
    """Append one owed call to the spool; returns why it could not (full, unwritable), or None.

    ``answered``: "deny" when the call was answered with a deny it could not check (strict guards,
    ``guards.fail_closed``): the replay records it as denied, not as a call that ran."""
    entry = {"v": 1, "id": call_id or _new_id(), "event": event, "at": started, "tries": tries,
             "env": env_subset(env), "data": data.decode("utf-8", "surrogateescape")}
    if answered:
        entry["answered"] = answered
    line = (json.dumps(entry) + "\n").encode("ascii")  # one line: every control character escaped
    limit = int(config["spool"]["max_bytes"])
    try:
        return _append(paths, line, limit)
    except OSError as exc:
        return f"cannot write the spool: {exc}"


def _append(paths: Paths, line: bytes, limit: int) -> str | None:
    import fcntl

    ensure_dir(spool_dir(paths))
    path = pending_path(paths)
    for _ in range(5):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            # The replayer renames the file under this lock: a writer that got the old
            # file after the rename would write where nobody reads, so it checks and retries.
            fcntl.flock(fd, fcntl.LOCK_EX)
            st = os.fstat(fd)
            try:
                current = os.stat(path)
            except FileNotFoundError:
                continue
            if (current.st_dev, current.st_ino) != (st.st_dev, st.st_ino):
                continue
            if st.st_size + len(line) > limit:
                return f"the spool is full ({st.st_size} bytes; spool.max_bytes is {limit})"
            os.write(fd, line)
            return None
        finally:
            os.close(fd)
    return "the spool file kept moving"


def kick(paths: Paths, env: Any, grace_s: float = 10.0) -> bool:
    """Start a detached replayer unless one runs or was started less than ``grace_s`` ago; never waits."""
    import fcntl

    ensure_dir(paths.lock_dir)
    lock = os.path.join(paths.lock_dir, LOCK_NAME)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a replayer holds it
    finally:
        os.close(fd)
    starting = os.path.join(paths.lock_dir, STARTING_NAME)
    try:
        if time.time() - os.stat(starting).st_mtime < grace_s:
            return False
        os.unlink(starting)
    except OSError:
        pass
    try:
        # O_EXCL: of a burst of hooks that all found the spool, one starts the replayer.
        os.close(os.open(starting, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:
        return False
    from agent_hooks.features.detach import spawn

    spawn("agent_hooks.spool", [], env)
    return True


# -- replay (the replayer process, the drainer) -------------------------------------------


def _bump(conn: sqlite3.Connection, name: str, n: int = 1) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET"
        " value = CAST(coalesce(CAST(meta.value AS INTEGER), 0) + ? AS TEXT)",
        (f"spool.{name}", str(n), n),
    )


def _take(paths: Paths) -> None:
    """Move the pending file aside (under its lock) so new lines start a new file."""
    import fcntl

    path = pending_path(paths)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_size:
            os.replace(path, os.path.join(spool_dir(paths), f"{TAKEN_PREFIX}{time.time_ns()}-{os.getpid()}.jsonl"))
    finally:
        os.close(fd)


def counts(paths: Paths, conn: sqlite3.Connection | None) -> dict[str, int]:
    """What ``status`` shows: spooled (ever), pending (not replayed yet), replayed, duplicates, failed."""
    pending = 0
    try:
        names = os.listdir(spool_dir(paths))
    except OSError:
        names = []
    for name in names:
        if name == PENDING or (name.startswith(TAKEN_PREFIX) and name.endswith(".jsonl")):
            try:
                with open(os.path.join(spool_dir(paths), name), "rb") as f:
                    pending += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
            except OSError:
                pass
    meta: dict[str, str] = {}
    if conn is not None:
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'spool.%'").fetchall())
        except sqlite3.Error:
            pass

    def num(key: str) -> int:
        try:
            return int(meta.get(f"spool.{key}") or 0)
        except ValueError:
            return 0

    return {"spooled": num("taken") + pending, "pending": pending, "replayed": num("replayed"),
            "duplicates": num("duplicates"), "failed": num("failed")}


def replay(paths: Paths, config: dict[str, Any]) -> dict[str, int] | None:
    """Apply every spooled call once; None when another replayer is at it."""
    import fcntl

    ensure_dir(paths.lock_dir)
    lock_fd = os.open(os.path.join(paths.lock_dir, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None
        try:
            os.unlink(os.path.join(paths.lock_dir, STARTING_NAME))
        except OSError:
            pass
        return _replay_locked(paths, config)
    finally:
        os.close(lock_fd)


def _replay_locked(paths: Paths, config: dict[str, Any]) -> dict[str, int]:
    from agent_hooks.store import Store

    done = {"taken": 0, "replayed": 0, "duplicates": 0, "failed": 0, "retried": 0}
    directory = spool_dir(paths)
    store = None
    try:
        # Lines keep coming while we replay (the store is busy: that is why they were spooled).
        for _round in range(20):
            _take(paths)
            try:
                taken = sorted(n for n in os.listdir(directory)
                               if n.startswith(TAKEN_PREFIX) and n.endswith(".jsonl"))
            except OSError:
                taken = []
            if not taken:
                break
            if store is None:
                # A detached replayer can wait for the store far longer than a hook.
                store = Store(paths.store, max(int(config["runtime"]["busy_timeout_ms"]), 30000))
            _replay_files(store, paths, config, directory, taken, done)
        if store is not None:
            with store.write() as conn:
                if done["duplicates"]:
                    _bump(conn, "duplicates", done["duplicates"])
                if done["failed"]:
                    _bump(conn, "failed", done["failed"])
                conn.execute("DELETE FROM spool_applied WHERE at < ?", (time.time() - 30 * 86400,))
    finally:
        if store is not None:
            store.gate = None
            store.close()
    return done


def _replay_files(store: Any, paths: Paths, config: dict[str, Any], directory: str, taken: list[str],
                  done: dict[str, int]) -> None:
    for name in taken:
        path = os.path.join(directory, name)
        with open(path, "rb") as f:
            lines = [line for line in f.read().split(b"\n") if line.strip()]
        with store.write() as conn:
            _bump(conn, "taken", len(lines))
        done["taken"] += len(lines)
        for line in lines:
            done[_apply(store, paths, config, line)] += 1
        os.unlink(path)


def _apply(store: Any, paths: Paths, config: dict[str, Any], line: bytes) -> str:
    """Run one spooled call's handler; 'replayed', 'duplicates', 'retried' or 'failed'."""
    import importlib

    from agent_hooks.context import Context
    from agent_hooks.log import log_error
    from agent_hooks.payload import PayloadError, parse

    try:
        entry = json.loads(line)
        event = entry["event"]
        data = entry["data"].encode("utf-8", "surrogateescape")
        payload = parse(data, event, int(config["runtime"]["max_payload_bytes"]))
        handler = importlib.import_module(f"agent_hooks.events.{EVENT_MODULES[event]}").handle
    except (ValueError, KeyError, TypeError, AttributeError, PayloadError) as exc:
        log_error(paths, "spool", "error", f"unreadable spool entry dropped: {type(exc).__name__}: {exc}",
                  config=config)
        return "failed"
    env = entry.get("env") if isinstance(entry.get("env"), dict) else {}
    ctx = Context(payload, config, paths, env)
    ctx.started = float(entry.get("at") or time.time())
    ctx.replayed = True
    ctx.replay_answer = entry.get("answered") if isinstance(entry.get("answered"), str) else None
    ctx._store = store
    store.gate = CommitGate(str(entry["id"]))
    try:
        handler(ctx)
    except AlreadyApplied:
        return "duplicates"
    except Exception as exc:  # noqa: BLE001 - one bad entry must not stop the rest
        _rollback(store)
        tries = int(entry.get("tries") or 0) + 1
        why = f"{type(exc).__name__}: {exc}"
        if transient(exc) and tries < MAX_TRIES:
            problem = save(paths, config, event, data, ctx.started, env, tries, str(entry["id"]),
                           ctx.replay_answer)
            if problem is None:
                return "retried"
            why += f"; spooling it again failed: {problem}"  # its taken file goes next: say so
        import traceback

        log_error(paths, event, "error", f"spooled call not replayed: {why}",
                  payload.session_id, traceback.format_exc(), config)
        return "failed"
    finally:
        store.gate = None
    return "replayed"


def _rollback(store: Any) -> None:
    try:
        if store.conn.in_transaction:
            store.conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def main(argv: list[str] | None = None) -> int:
    """``python -m agent_hooks.spool``: replay the spool (what a hook starts, detached)."""
    from agent_hooks import config as config_mod
    from agent_hooks.log import log_error

    os.umask(0o077)
    paths = Paths(os.environ)
    config, _problems = config_mod.load_lenient(paths, os.environ)
    try:
        replay(paths, config)
    except Exception as exc:  # noqa: BLE001 - detached: the log is the only place to tell
        import traceback

        log_error(paths, "spool", "error", f"{type(exc).__name__}: {exc}", trace=traceback.format_exc(),
                  config=config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
