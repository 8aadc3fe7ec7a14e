"""What sessions cost: the transcript's assistant usage, priced, counted once, read incrementally.

Counted the way ccusage counts it: each assistant line's ``message.usage`` is
priced by its ``message.model`` (agent_hooks/pricing.py); a line is keyed by
message id + request id, so a line repeated (streamed twice, copied into a
resumed or forked transcript, read again) counts once. PostToolUse and Stop
read the session's transcript from the offset they last reached; SubagentStop
reads the subagent's own transcript into its parent session. Only whole lines
are consumed (the last may be half written), at most ``cost.max_read_bytes``
per call. Each new message adds to running totals: the session's, its task's
and the day's (host and agent), which the budget guard reads as one row each.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_hooks.runner import Context

MARKER = b'"usage"'


class Batch:
    """New lines read from one transcript: the messages and where the read stopped."""

    __slots__ = ("path", "session_id", "agent_id", "inode", "start", "end", "messages")

    def __init__(self, path: str, session_id: str, agent_id: str | None, inode: int, start: int, end: int,
                 messages: list[tuple[Any, ...]]) -> None:
        self.path, self.session_id, self.agent_id = path, session_id, agent_id
        self.inode, self.start, self.end, self.messages = inode, start, end, messages


def _epoch(stamp: Any, fallback: float) -> float:
    """Epoch seconds of the client's UTC stamps ('2026-11-25T17:20:15.627Z'), by arithmetic:
    importing datetime would cost every PostToolUse about a millisecond."""
    if isinstance(stamp, str) and len(stamp) >= 19 and stamp[4] == "-" and stamp[10] == "T":
        try:
            y, mo, d = int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10])
            h, mi, sec = int(stamp[11:13]), int(stamp[14:16]), float(stamp[17:].rstrip("Z").split("+")[0] or 0)
        except ValueError:
            return fallback
        if stamp.endswith("Z") or stamp.endswith("+00:00") or len(stamp) <= 23:
            # Days from the civil date (Howard Hinnant's algorithm), proleptic Gregorian.
            y -= mo <= 2
            era = y // 400
            yoe = y - era * 400
            doy = (153 * (mo + (-3 if mo > 2 else 9)) + 2) // 5 + d - 1
            doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
            days = era * 146097 + doe - 719468
            return days * 86400 + h * 3600 + mi * 60 + sec
    return fallback


def day_of(at: float) -> str:
    """The local calendar day of an epoch time, as budgets and `cost daily` count days."""
    import time

    return time.strftime("%Y-%m-%d", time.localtime(at))


def message_of(entry: dict[str, Any], overrides: dict[str, Any], now: float) -> tuple[Any, ...] | None:
    """(key, model, at, input, output, cache writes, of which 1 h, cache reads, usd or None) of an assistant line."""
    from agent_hooks import pricing

    if entry.get("type") != "assistant":
        return None
    msg = entry.get("message")
    if not isinstance(msg, dict) or not isinstance(msg.get("usage"), dict):
        return None
    usage = msg["usage"]
    model = msg.get("model") if isinstance(msg.get("model"), str) else ""
    inp, out, write, write_1h, read, _searches = pricing.tokens(usage)
    if model == "<synthetic>" or not model:
        # The client's own placeholder lines (an error, an interruption): no request was made.
        if not (inp or out or write or read):
            return None
    mid, rid = msg.get("id"), entry.get("requestId")
    if isinstance(mid, str) and isinstance(rid, str):
        key = f"{mid}:{rid}"
    elif isinstance(entry.get("uuid"), str):
        key = "uuid:" + entry["uuid"]  # no ids to de-duplicate on (ccusage counts such lines as they come)
    else:
        return None
    at = _epoch(entry.get("timestamp"), now)
    usd = pricing.price(model, usage, day_of(at), overrides) if model else None
    return (key, model or "unknown", at, inp, out, write, write_1h, read, usd)


def read_new(conn: sqlite3.Connection, path: str, session_id: str, agent_id: str | None, env: Any,
             config: dict[str, Any], now: float) -> Batch | None:
    """The lines appended since the last read (outside any transaction); None when nothing is new."""
    from agent_hooks.features import transcript

    real = transcript.safe_path(path, env, config)
    if real is None:
        return None
    row = conn.execute("SELECT inode, offset FROM cost_offsets WHERE path = ?", (real,)).fetchone()
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        # Not written yet, or never: a subagent the client keeps no transcript of, a session whose
        # first line is still to come. Nothing to count is not an error.
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        start = int(row[1]) if row is not None and row[0] == st.st_ino else 0
        if start > st.st_size:  # rewritten shorter: read it again (the keys keep the counts right)
            start = 0
        if start == st.st_size:
            return None
        want = min(st.st_size - start, int(config["cost"]["max_read_bytes"]))
        os.lseek(fd, start, os.SEEK_SET)
        from agent_hooks.features import files

        data = files.read_upto(fd, want)
    finally:
        os.close(fd)
    cut = data.rfind(b"\n")
    if cut < 0:
        if len(data) < want or want < int(config["cost"]["max_read_bytes"]):
            return None  # one line still being written
        cut = len(data) - 1  # a single line longer than a whole read: skipped, never re-read forever
        data = b""
    overrides = config["cost"].get("prices") or {}
    max_line = int(config["transcript"]["max_line_bytes"])
    messages = []
    for line in data[:cut].split(b"\n"):
        # Only assistant lines carry usage; tool results (the huge lines) are never parsed.
        if MARKER not in line or len(line) > max_line:
            continue
        try:
            entry = json.loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
        if isinstance(entry, dict):
            msg = message_of(entry, overrides, now)
            if msg is not None:
                messages.append(msg)
    return Batch(real, session_id, agent_id, st.st_ino, start, start + cut + 1, messages)


def record(conn: sqlite3.Connection, batch: Batch, now: float) -> float:
    """Insert the batch's messages (each once) and add them to the running totals; the USD added."""
    # A concurrent hook may have taken the same lines: the keys make the second insert a no-op.
    added_usd = 0.0
    unpriced = 0
    days: dict[str, float] = {}
    for key, model, at, inp, out, write, write_1h, read, usd in batch.messages:
        cur = conn.execute(
            "INSERT OR IGNORE INTO cost_messages (key, session_id, agent_id, model, at, input_tokens, output_tokens,"
            " cache_creation_input_tokens, cache_1h_input_tokens, cache_read_input_tokens, usd)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, batch.session_id, batch.agent_id, model, at, inp, out, write, write_1h, read, usd))
        if cur.rowcount != 1:
            continue
        if usd is None:
            unpriced += 1
        elif usd:
            added_usd += usd
            day = day_of(at)
            days[day] = days.get(day, 0.0) + usd
    conn.execute(
        "INSERT INTO cost_offsets (path, session_id, agent_id, inode, offset, updated_at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (path) DO UPDATE SET offset = CASE WHEN cost_offsets.inode = excluded.inode"
        " THEN max(cost_offsets.offset, excluded.offset) ELSE excluded.offset END,"
        " inode = excluded.inode, updated_at = excluded.updated_at",
        (batch.path, batch.session_id, batch.agent_id, batch.inode, batch.end, now))
    if not (added_usd or unpriced):
        return 0.0
    # The session's row, if this call is its first (touch fills in the rest in the same transaction).
    conn.execute("INSERT INTO sessions (session_id, state, first_seen_at, last_seen_at) VALUES (?, 'live', ?, ?)"
                 " ON CONFLICT (session_id) DO NOTHING", (batch.session_id, now, now))
    conn.execute("UPDATE sessions SET cost_usd = coalesce(cost_usd, 0) + ?, cost_unpriced = coalesce(cost_unpriced, 0) + ?"
                 " WHERE session_id = ?", (added_usd, unpriced, batch.session_id))
    if added_usd:
        row = conn.execute("SELECT task_id, agent FROM sessions WHERE session_id = ?", (batch.session_id,)).fetchone()
        task_id, agent = (row[0], row[1]) if row else (None, None)
        if task_id:
            conn.execute("UPDATE tasks SET spent_usd = coalesce(spent_usd, 0) + ? WHERE task_id = ?",
                         (added_usd, task_id))
        for day, usd in days.items():
            for who in ("", agent) if agent else ("",):
                conn.execute("INSERT INTO cost_daily (day, agent, usd) VALUES (?, ?, ?) ON CONFLICT (day, agent)"
                             " DO UPDATE SET usd = usd + excluded.usd", (day, who, usd))
    return added_usd


def prepare(ctx: Context, path: str | None = None, agent_id: str | None = None,
            subagents: bool = False) -> tuple[list[Batch], str | None]:
    """The transcript's new lines for this call, read outside the transaction, and what went wrong.

    ``subagents`` (Stop, SessionEnd): also the session's subagent transcripts read before, whose last
    lines the client may have written after their SubagentStop. On an error ([], message): logged
    here, counted by :func:`apply` in the call's own transaction (doctor shows it), and the call goes
    on; the lines are read next time."""
    if not ctx.config["cost"].get("enabled", True):
        return [], None
    p = ctx.payload
    target = path if path is not None else p.transcript_path
    batches: list[Batch] = []
    try:
        conn = ctx.store.conn
        if target:
            batch = read_new(conn, target, p.session_id, agent_id, ctx.env, ctx.config, ctx.started)
            if batch is not None:
                batches.append(batch)
        if subagents:
            for sub_path, sub_agent in conn.execute(
                    "SELECT path, agent_id FROM cost_offsets WHERE session_id = ? AND agent_id IS NOT NULL",
                    (p.session_id,)).fetchall():
                batch = read_new(conn, sub_path, p.session_id, sub_agent, ctx.env, ctx.config, ctx.started)
                if batch is not None:
                    batches.append(batch)
        return batches, None
    except Exception as exc:  # noqa: BLE001 - cost never stops the agent nor costs the call its record
        import traceback

        from agent_hooks.log import log_error

        message = f"cost: {type(exc).__name__}: {exc}"
        log_error(ctx.paths, p.event, "error", message, p.session_id, traceback.format_exc())
        return batches, message


def apply(conn: sqlite3.Connection, ctx: Context, prepared: tuple[list[Batch], str | None]) -> None:
    """Record what :func:`prepare` read, in the call's transaction (isolated: a bad row costs only itself)."""
    batches, failed = prepared
    if failed:
        from agent_hooks.store import record_error

        record_error(conn, ctx.payload.event, "error", failed, ctx.payload.session_id)
    if batches:
        from agent_hooks.features.isolate import isolated

        for batch in batches:
            isolated(conn, ctx, "cost", record, conn, batch, ctx.started)


def session_usd(conn: sqlite3.Connection, session_id: str) -> tuple[float, int]:
    """(running USD, unpriced messages) of a session."""
    row = conn.execute("SELECT coalesce(cost_usd, 0), coalesce(cost_unpriced, 0) FROM sessions WHERE session_id = ?",
                       (session_id,)).fetchone()
    return (float(row[0]), int(row[1])) if row else (0.0, 0)


def refresh_task_spent(conn: sqlite3.Connection, task_id: str) -> float:
    """Recount a task's running total from its sessions' messages (a budget set or a session
    assigned after the spending); returns it."""
    row = conn.execute("SELECT coalesce(sum(m.usd), 0) FROM cost_messages m JOIN sessions s"
                       " ON s.session_id = m.session_id WHERE s.task_id = ?", (task_id,)).fetchone()
    conn.execute("UPDATE tasks SET spent_usd = ? WHERE task_id = ?", (float(row[0]), task_id))
    return float(row[0])
