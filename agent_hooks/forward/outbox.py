"""The durable outbox, hook side (stdlib only).

:func:`forward` runs inside the event module's write transaction: the row is
committed together with the rest of the hook's work, or not at all; then
:func:`maybe_start_drainer` starts the drainer, detached, when none is alive.
The hook never waits on the network and never waits for the drainer.

Liveness is one ``flock`` probe on the drainer's lock file: the drainer holds
it (through filelock) for as long as it runs, and the kernel drops it when the
process dies, even by SIGKILL. A stale pid file cannot fool it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

from agent_hooks.features.isolate import isolated
from agent_hooks.forward import eventmap
from agent_hooks.paths import Paths
from agent_hooks.store import record_error

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LOCK_NAME = "drain.lock"
# The drainer writes the time before which hooks should not start it again
# (it gave up on an unreachable server, or the configuration is invalid).
RESUME_NAME = "drain.resume"
# Set by the hook that starts a drainer, removed by the drainer once it holds the
# lock: hooks of a burst (serialized by the store's write lock) do not each start
# one while the first is still importing.
STARTING_NAME = "drain.starting"

def lock_path(paths: Paths) -> str:
    return os.path.join(paths.lock_dir, LOCK_NAME)


def resume_path(paths: Paths) -> str:
    return os.path.join(paths.lock_dir, RESUME_NAME)


def starting_path(paths: Paths) -> str:
    return os.path.join(paths.lock_dir, STARTING_NAME)


def new_event_id() -> str:
    """A random UUID4 as 32 hex digits (built by hand: importing uuid costs more)."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return b.hex()


def coalesce(last: tuple[str | None, float | None] | None, event: str, at: float, interval: float) -> bool:
    """True when this event can be dropped: a tool_use heartbeat of a session that is
    already running and had a heartbeat (or its start) less than ``interval`` ago."""
    if event != eventmap.HEARTBEAT_EVENT or last is None:
        return False
    last_state, last_running_at = last
    if last_state != eventmap.RUNNING or last_running_at is None:
        return False
    return at - last_running_at < interval


def enqueue(conn: sqlite3.Connection, session_key: str, hook_event: str, event: str,
            body: dict[str, Any], at: float, heartbeat_interval_s: float = 0.0) -> str | None:
    """Queue one event (inside the caller's transaction); returns its id, or None if coalesced."""
    row = conn.execute(
        "SELECT last_state, last_running_at FROM forward_sessions WHERE session_key = ?", (session_key,)
    ).fetchone()
    if coalesce(row, event, at, heartbeat_interval_s):
        return None
    event_id = new_event_id()
    conn.execute(
        "INSERT INTO outbox (event_id, session_key, hook_event, event, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (event_id, session_key, hook_event, event, json.dumps(body, ensure_ascii=False), at),
    )
    state = eventmap.CONTRACT_EVENTS.get(event)
    # last_running_at: when what we queued last put the session in "running" (start, tool_use, ...).
    conn.execute(
        """
        INSERT INTO forward_sessions (session_key, last_event, last_state, last_at, last_running_at)
        VALUES (:k, :e, :s, :at, CASE WHEN :s = 'running' THEN :at END)
        ON CONFLICT (session_key) DO UPDATE SET
            last_event = :e,
            last_state = coalesce(:s, forward_sessions.last_state),
            last_at = :at,
            last_running_at = CASE WHEN :s = 'running' THEN :at ELSE forward_sessions.last_running_at END
        """,
        {"k": session_key, "e": event, "s": state, "at": at},
    )
    return event_id


def _queue(conn: sqlite3.Connection, ctx: Any, event: str) -> str | None:
    tmux = None
    if eventmap.tmux_session(ctx.env) is None and ctx.env.get("TMUX_PANE"):
        # Started in tmux by hand: SessionStart asked tmux for the name and recorded it.
        row = conn.execute("SELECT tmux_session FROM sessions WHERE session_id = ?",
                           (ctx.payload.session_id,)).fetchone()
        tmux = row[0] if row else None
    body = eventmap.build_body(ctx.payload, event, ctx.env, ctx.config, tmux)
    if body is None:
        return None
    # The session's running cost (features/cost.py), so the command center can sum the fleet.
    row = conn.execute("SELECT cost_usd FROM sessions WHERE session_id = ?", (ctx.payload.session_id,)).fetchone()
    if row is not None and row[0]:
        body["cost_usd"] = round(float(row[0]), 6)
    key = body.get("tmux_session") or ctx.payload.session_id
    return enqueue(conn, key, ctx.payload.event, event, body, ctx.started,
                   float(ctx.config["forward"]["heartbeat_interval_s"]))


def forward(conn: sqlite3.Connection, ctx: Any) -> str | None:
    """Queue this hook call's event for the command center, if configured to.

    Called by every event module inside its ``with ctx.store.write()`` block. A
    failure here is counted and rolled back to a savepoint, so it never costs the
    hook the rest of its work.
    """
    config = ctx.config
    fwd = config["forward"]
    if not fwd["enabled"] or not fwd["url"]:
        return None  # off, or no command center named: nothing is queued for nobody
    payload = ctx.payload
    event = eventmap.contract_event(config, payload.event)
    if event is None:
        return None
    # In a savepoint: a failure is logged and counted, and never costs the hook its work.
    event_id = isolated(conn, ctx, "forward", _queue, conn, ctx, event)
    if event_id is not None and fwd["autostart"]:
        # Still inside the transaction, on purpose: while we hold the write lock, a
        # drainer that is just exiting cannot finish its last look at the queue (a
        # write transaction) before our row is committed. See drain's exit protocol.
        try:
            maybe_start_drainer(ctx.paths, ctx.env, grace_s=float(fwd["start_grace_s"]))
        except Exception as exc:  # noqa: BLE001 - the event is queued; the next hook retries
            record_error(conn, payload.event, "forward", f"starting the drainer: {exc}", payload.session_id)
    return event_id


def drainer_alive(paths: Paths) -> bool:
    """True when a drainer holds the lock (one non-blocking flock probe)."""
    import fcntl

    try:
        fd = os.open(lock_path(paths), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops a lock the probe may have won
    return False


def resume_at(paths: Paths) -> float:
    try:
        with open(resume_path(paths), encoding="ascii") as f:
            return float(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0.0


def maybe_start_drainer(paths: Paths, env: Any = None, force: bool = False, grace_s: float = 5.0) -> bool:
    """Start the drainer detached unless one is alive, starting, or asked for a pause; never waits."""
    if drainer_alive(paths):
        return False
    now = time.time()
    if not force:
        if now < resume_at(paths):
            return False
        try:
            if now - os.stat(starting_path(paths)).st_mtime < grace_s:
                return False
        except OSError:
            pass
    from agent_hooks.features.detach import spawn

    try:
        os.makedirs(paths.lock_dir, mode=0o700, exist_ok=True)
        os.close(os.open(starting_path(paths), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    except OSError:
        pass
    # Detached, streams on /dev/null, cwd "/", AGENT_HOOKS_HOME made absolute.
    spawn("agent_hooks.forward.drain", [], os.environ if env is None else env)
    return True
