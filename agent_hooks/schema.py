"""Ordered, named schema migrations, applied with sqlite-utils.

Run on first use when the store is missing or behind (the hook path imports
this module only then), or by ``agent-hook init``. Each migration runs once;
its name is recorded in ``_migrations`` and the count in ``PRAGMA
user_version``, which is what the stdlib-only hook path checks.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable

import sqlite_utils
from sqlite_utils.migrations import Migrations

from agent_hooks import schema_head
from agent_hooks.schema_head import chmod_private

Migration = Callable[[sqlite_utils.Database], None]
MIGRATION_SET = Migrations("agent-hooks")
# Names in order; len(MIGRATIONS) is the schema version the hook path checks.
MIGRATIONS: list[str] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration (it runs once, in a transaction)."""
    MIGRATIONS.append(fn.__name__)
    return MIGRATION_SET()(fn)


@migration
def m001_sessions_tool_calls_errors(db: sqlite_utils.Database) -> None:
    db.table("sessions").create(
        {
            "session_id": str,
            "cwd": str,
            "transcript_path": str,
            "tmux_session": str,
            "agent": str,
            "role": str,
            "state": str,
            "first_seen_at": float,
            "last_seen_at": float,
            "last_event": str,
            "ended_at": float,
            "hook_calls": int,
            "tool_calls": int,
        },
        pk="session_id",
        not_null=["state", "first_seen_at", "last_seen_at"],
        defaults={"state": "live", "hook_calls": 0, "tool_calls": 0},
        if_not_exists=True,
    )
    db.table("sessions").create_index(["last_seen_at"], if_not_exists=True)
    db.table("sessions").create_index(["tmux_session"], if_not_exists=True)
    db.table("tool_calls").create(
        {
            "id": int,
            "session_id": str,
            "tool_use_id": str,
            "tool_name": str,
            "input_hash": str,
            "output_hash": str,
            "outcome": str,  # pending | success | failure | denied
            "decision": str,  # allow | warn | deny (the guards')
            "rule": str,
            "reason": str,
            "error": str,
            "duration_ms": int,
            "started_at": float,
            "ended_at": float,
        },
        pk="id",
        not_null=["session_id", "tool_name", "input_hash", "outcome", "started_at"],
        defaults={"outcome": "pending"},
        if_not_exists=True,
    )
    db.table("tool_calls").create_index(["session_id", "id"], if_not_exists=True)
    db.table("tool_calls").create_index(["session_id", "tool_use_id"], if_not_exists=True)
    # Non-tool hook calls (SessionStart, PreCompact, Stop, ...): a journal per session.
    db.table("session_events").create(
        {"id": int, "session_id": str, "event": str, "detail": str, "at": float},
        pk="id",
        not_null=["session_id", "event", "at"],
        if_not_exists=True,
    )
    db.table("session_events").create_index(["session_id", "id"], if_not_exists=True)
    db.table("errors").create(
        {"id": int, "at": float, "event": str, "kind": str, "session_id": str, "message": str},
        pk="id",
        not_null=["at", "kind"],
        if_not_exists=True,
    )
    db.table("meta").create({"key": str, "value": str}, pk="key", if_not_exists=True)


@migration
def m002_tasks(db: sqlite_utils.Database) -> None:
    # A task groups sessions (a worker and its retries, a lead's sub-agents).
    db.table("tasks").create(
        {
            "task_id": str,
            "description": str,
            "progress": str,
            "state": str,  # open | cancelled | done
            "cancel_reason": str,
            "cancelled_at": float,
            "created_at": float,
            "updated_at": float,
        },
        pk="task_id",
        not_null=["state", "created_at", "updated_at"],
        defaults={"state": "open"},
        if_not_exists=True,
    )
    sessions = db.table("sessions")
    if "task_id" not in sessions.columns_dict:
        sessions.add_column("task_id", str)
    if "first_prompt" not in sessions.columns_dict:
        sessions.add_column("first_prompt", str)
    sessions.create_index(["task_id"], if_not_exists=True)


@migration
def m003_guards(db: sqlite_utils.Database) -> None:
    # Cancellation of one session (a task's is on tasks), and where the
    # session's loop/polling history starts (`agent-hook session reset-guards`).
    sessions = db.table("sessions")
    for name, kind in (("cancelled_at", float), ("cancel_reason", str), ("guards_since_id", int),
                       ("last_decision", str), ("last_guard_id", int)):
        if name not in sessions.columns_dict:
            sessions.add_column(name, kind)
    # Running totals kept by PreToolUse in the UPDATE it makes anyway, so that
    # `status` reads one row per session instead of scanning every tool call.
    for name in ("guard_warned", "guard_denied"):
        if name not in sessions.columns_dict:
            sessions.add_column(name, int, not_null_default=0)
    # Which polling rule a call matched, and the poll it is (rule + normalised
    # command): the rate limit counts by rule, "no progress" compares outputs by key.
    # agent_id: the subagent a call came from (Claude Code >= 2.1.69 sends it inside
    # subagents), so parallel subagents doing similar work are not one loop history.
    calls = db.table("tool_calls")
    for name in ("poll_rule", "poll_key", "agent_id"):
        if name not in calls.columns_dict:
            calls.add_column(name, str)
    # Partial indexes: an ordinary call of the main agent (most rows) updates none
    # of them, so PreToolUse's insert costs what it did before the guards.
    for name, columns, where in (
        ("idx_tool_calls_poll_key", "session_id, poll_key, id", "poll_key IS NOT NULL"),
        ("idx_tool_calls_poll_rule", "session_id, poll_rule, started_at", "poll_rule IS NOT NULL"),
        ("idx_tool_calls_agent", "session_id, agent_id, id", "agent_id IS NOT NULL"),
    ):
        db.execute(f"CREATE INDEX IF NOT EXISTS {name} ON tool_calls ({columns}) WHERE {where}")
    db.table("tasks").create_index(["state"], if_not_exists=True)


def _require_fts5(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("CREATE VIRTUAL TABLE temp._fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE temp._fts5_probe")
    except sqlite3.OperationalError as exc:
        raise RuntimeError(
            f"this Python's SQLite ({sqlite3.sqlite_version}) has no FTS5, which memory search needs: {exc}. "
            "Use a Python whose sqlite3 module is built with FTS5 (python.org, Debian and Homebrew builds are)."
        ) from None


@migration
def m004_identity_memory(db: sqlite_utils.Database) -> None:
    _require_fts5(db.conn)
    # Every version of every identity file, with where it came from. The current
    # one is the newest whose source is not "conflict" (a session copy kept
    # beside a store-side edit it would otherwise have overwritten).
    db.table("identity_versions").create(
        {
            "id": int,
            "agent": str,
            "name": str,
            "version": int,
            "content": str,
            "sha256": str,
            "chars": int,
            "source": str,  # manual | self_edit | session_sync | conflict
            "session_id": str,
            "path": str,
            "at": float,
        },
        pk="id",
        not_null=["agent", "name", "version", "content", "sha256", "chars", "source", "at"],
        if_not_exists=True,
    )
    db.table("identity_versions").create_index(["agent", "name", "version"], unique=True, if_not_exists=True)
    # What the session started from, per file: the hash on disk after SessionStart
    # and the store version it matched. Stop syncs only files that moved from it.
    db.table("identity_baselines").create(
        {"session_id": str, "name": str, "agent": str, "path": str, "sha256": str, "version_id": int,
         "injected_version_id": int, "at": float},
        pk=("session_id", "name"),
        not_null=["agent", "path", "at"],
        if_not_exists=True,
    )
    # The last content we wrote to a path: a file that differs from it was changed
    # by someone else and is backed up before we overwrite it.
    db.table("identity_written").create(
        {"path": str, "agent": str, "name": str, "sha256": str, "at": float},
        pk="path",
        not_null=["agent", "name", "sha256", "at"],
        if_not_exists=True,
    )
    # Refused writes, conflicts and unsafe paths, reported at the agent's next SessionStart.
    db.table("identity_reports").create(
        {
            "id": int,
            "agent": str,
            "name": str,
            "kind": str,  # rejected | conflict | unsafe
            "session_id": str,
            "detail": str,
            "sha256": str,
            "chars": int,
            "at": float,
            "reported_at": float,
            "reported_session": str,
        },
        pk="id",
        not_null=["agent", "name", "kind", "detail", "at"],
        if_not_exists=True,
    )
    db.table("identity_reports").create_index(["agent", "reported_at"], if_not_exists=True)
    db.table("memory_docs").create(
        {
            "id": int,
            "path": str,
            "root": str,  # the memory directory it was found in
            "name": str,
            "scope": str,  # agent | shared
            "agent": str,
            "sha256": str,
            "size": int,
            "mtime_ns": int,
            "session_id": str,
            "indexed_at": float,
        },
        pk="id",
        not_null=["path", "root", "name", "scope", "agent", "sha256", "indexed_at"],
        if_not_exists=True,
    )
    db.table("memory_docs").create_index(["path"], unique=True, if_not_exists=True)
    db.table("memory_docs").create_index(["root"], if_not_exists=True)
    # rowid = memory_docs.id. Porter stemming so "deploys" finds "deploy".
    db.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5("
        "name, path, content, scope UNINDEXED, agent UNINDEXED, tokenize = 'porter unicode61')"
    )


@migration
def m005_continuity(db: sqlite_utils.Database) -> None:
    # Goal reminders count compactions per session.
    sessions = db.table("sessions")
    if "compactions" not in sessions.columns_dict:
        sessions.add_column("compactions", int, not_null_default=0)
    if "last_compact_at" not in sessions.columns_dict:
        sessions.add_column("last_compact_at", float)
    # One summary per session, replaced at each Stop; source extractive | command.
    db.table("session_summaries").create(
        {
            "session_id": str,
            "agent": str,
            "task_id": str,
            "summary": str,
            "source": str,
            "at": float,
        },
        pk="session_id",
        not_null=["summary", "source", "at"],
        if_not_exists=True,
    )
    if not db.table("session_summaries_fts").exists():
        # Triggers keep the index in step with every writer (Stop, the summarizer worker).
        db.table("session_summaries").enable_fts(["summary", "agent", "task_id"], create_triggers=True,
                                           tokenize="porter unicode61")
    db.table("cleanup_runs").create(
        {
            "id": int,
            "session_id": str,
            "command": str,
            "exit_code": int,
            "timed_out": int,
            "output_tail": str,
            "duration_ms": int,
            "started_at": float,
        },
        pk="id",
        not_null=["session_id", "command", "started_at"],
        if_not_exists=True,
    )
    db.table("cleanup_runs").create_index(["session_id", "id"], if_not_exists=True)


@migration
def m006_outbox(db: sqlite_utils.Database) -> None:
    # Lifecycle events waiting for the command center (agent_hooks.forward). A hook
    # inserts in its own write transaction; the drainer deletes a row once delivered,
    # so the table holds only what is pending ('queued') or given up ('dead').
    db.table("outbox").create(
        {
            "id": int,
            "event_id": str,  # stable id, sent as Idempotency-Key
            "session_key": str,  # delivery order is kept per key
            "hook_event": str,
            "event": str,  # contract event name
            "body": str,  # the JSON body, exactly as it will be sent
            "created_at": float,
            "state": str,  # queued | dead
            "attempts": int,  # failing answers so far (never counts an unreachable server)
            "next_at": float,  # not before (backoff)
            "last_try_at": float,
            "last_status": int,
            "last_error": str,
            "dead_at": float,
        },
        pk="id",
        not_null=["event_id", "session_key", "event", "body", "created_at", "state"],
        defaults={"state": "queued", "attempts": 0, "next_at": 0.0},
        if_not_exists=True,
    )
    db.table("outbox").create_index(["event_id"], unique=True, if_not_exists=True)
    db.table("outbox").create_index(["state", "id"], if_not_exists=True)
    db.table("outbox").create_index(["session_key", "state", "id"], if_not_exists=True)
    # Last event queued per session: heartbeat coalescing of tool_use.
    db.table("forward_sessions").create(
        {"session_key": str, "last_event": str, "last_state": str, "last_at": float, "last_running_at": float},
        pk="session_key",
        not_null=["last_at"],
        if_not_exists=True,
    )
    db.table("forward_sessions").create_index(["last_at"], if_not_exists=True)


@migration
def m007_lineage(db: sqlite_utils.Database) -> None:
    # Forks: when a session started as a fork, and the session it was forked from.
    sessions = db.table("sessions")
    if "forked_at" not in sessions.columns_dict:
        sessions.add_column("forked_at", float)
    if "parent_session_id" not in sessions.columns_dict:
        sessions.add_column("parent_session_id", str)

@migration
def m008_command_center(db: sqlite_utils.Database) -> None:
    # The command center (agent_hooks/server, docs/command-center.md). One row per
    # board card: this host's sessions (local = 1: their details stay in `sessions`,
    # this row holds only the contract state) and other hosts' sessions, which
    # arrive through ingest and are kept with the host they came from.
    db.table("fleet_sessions").create(
        {
            "id": str,  # card id: a local session's session_id; a random id for an ingested one
            "host": str,  # "" for this host's own sessions
            "local": int,
            "session_id": str,  # the direct session id, when one is known
            "tmux_session": str,
            "agent_type": str,
            "label": str,
            "prompt": str,
            "task_id": str,
            "depends_on": str,  # JSON list
            "state": str,  # idle | running | awaiting_review | completed | failed
            "last_event": str,
            "metadata": str,
            "events": int,
            "tool_events": int,
            "cancelled_at": float,  # a cancel issued here for an ingested session
            "cancel_reason": str,
            "cancel_seq": int,  # its control's sequence number (delivered once the host confirms it)
            "created_at": float,
            "updated_at": float,
        },
        pk="id",
        not_null=["host", "local", "state", "created_at", "updated_at"],
        defaults={"host": "", "local": 0, "state": "idle", "events": 0, "tool_events": 0},
        if_not_exists=True,
    )
    db.table("fleet_sessions").create_index(["host", "tmux_session"], if_not_exists=True)
    db.table("fleet_sessions").create_index(["session_id"], if_not_exists=True)
    db.table("fleet_sessions").create_index(["updated_at"], if_not_exists=True)
    # Every event applied to a card, in order (ignored ones too: to_state NULL).
    db.table("fleet_events").create(
        {"id": int, "fleet_id": str, "event": str, "from_state": str, "to_state": str, "metadata": str,
         "source": str, "idem_key": str, "at": float},
        pk="id",
        not_null=["fleet_id", "event", "source", "at"],
        if_not_exists=True,
    )
    db.table("fleet_events").create_index(["fleet_id", "id"], if_not_exists=True)
    db.execute("CREATE UNIQUE INDEX IF NOT EXISTS idx_fleet_events_idem ON fleet_events (idem_key)"
               " WHERE idem_key IS NOT NULL")
    # Cancel / uncancel issued on this command center, for the hosts that subscribe to it.
    db.table("fleet_controls").create(
        {"seq": int, "host": str, "kind": str, "action": str, "fleet_id": str, "session_id": str,
         "tmux_session": str, "task_id": str, "reason": str, "at": float},
        pk="seq",
        not_null=["host", "kind", "action", "at"],
        if_not_exists=True,
    )
    db.table("fleet_controls").create_index(["host", "seq"], if_not_exists=True)
    # Subscribed hosts: when last heard, and the last control each confirmed applying.
    db.table("fleet_hosts").create(
        {"host": str, "last_seen_at": float, "applied_seq": int},
        pk="host",
        not_null=["last_seen_at"],
        if_not_exists=True,
    )
    # Every hook call of this host, in order (a trigger on `sessions`): the server
    # replays it through forward.event_map and the contract's state machine, so a
    # local card moves exactly as the same events would move it on a command center.
    # Capped at 20000 rows by the trigger itself, so it stays small with no server.
    db.table("local_feed").create(
        {"id": int, "session_id": str, "hook_event": str, "at": float},
        pk="id",
        if_not_exists=True,
    )
    for name, when in (("local_feed_insert", "AFTER INSERT ON sessions"),
                       ("local_feed_update", "AFTER UPDATE OF last_seen_at ON sessions")):
        db.execute(
            f"CREATE TRIGGER IF NOT EXISTS {name} {when} BEGIN"
            " INSERT INTO local_feed (session_id, hook_event, at) VALUES (NEW.session_id, NEW.last_event, NEW.last_seen_at);"
            " DELETE FROM local_feed WHERE id <= (SELECT max(id) FROM local_feed) - 20000;"
            " END"
        )
    # Sessions recorded before this migration get a card in the state their own state implies.
    db.execute(
        "INSERT OR IGNORE INTO fleet_sessions (id, host, local, session_id, tmux_session, agent_type, state,"
        " last_event, events, created_at, updated_at)"
        " SELECT session_id, '', 1, session_id, tmux_session, 'claude-code',"
        " CASE state WHEN 'ended' THEN 'completed' WHEN 'awaiting' THEN 'awaiting_review' ELSE 'running' END,"
        " NULL, 0, first_seen_at, last_seen_at FROM sessions"
    )


@migration
def m009_identity_workspaces(db: sqlite_utils.Database) -> None:
    # The workspace SessionStart wrote identity files into, by device and inode: Stop and
    # SessionEnd refuse to sync from a workspace replaced since (features/workspace_check.py).
    db.table("identity_workspaces").create(
        {"session_id": str, "path": str, "dev": int, "ino": int, "at": float},
        pk="session_id",
        not_null=["path", "dev", "ino", "at"],
        if_not_exists=True,
    )
    db.table("identity_workspaces").create_index(["at"], if_not_exists=True)


@migration
def m010_spool(db: sqlite_utils.Database) -> None:
    # Calls replayed from the spool (agent_hooks/spool.py), keyed by the call's id and
    # inserted in the same transaction as its work: a line replayed twice counts once.
    db.table("spool_applied").create({"call_id": str, "at": float}, pk="call_id", not_null=["at"], if_not_exists=True)
    db.table("spool_applied").create_index(["at"], if_not_exists=True)


@migration
def m011_persist(db: sqlite_utils.Database) -> None:
    # Persistence (features/persist.py): a task may hold its workers at Stop. persist NULL
    # means "as [persist] default says"; continuations counts the Stop blocks the task cost.
    tasks = db.table("tasks")
    for name, kind in (("persist", int), ("max_continuations", int), ("done_note", str), ("done_at", float),
                       ("blocked_reason", str), ("blocked_at", float), ("last_bypass", str),
                       ("last_bypass_at", float)):
        if name not in tasks.columns_dict:
            tasks.add_column(name, kind)
    if "continuations" not in tasks.columns_dict:
        tasks.add_column("continuations", int, not_null_default=0)
    # Per session: consecutive holds (the chain stop_hook_active reports), the last persist
    # decision with its reason, the context-pressure notice, and what the session waits on
    # (needs_input / error / awaiting, the tool asked about or the error's kind).
    sessions = db.table("sessions")
    for name, kind in (("persist_chain", int), ("persist_last", str), ("persist_last_at", float),
                       ("context_pct", float), ("pressure_noticed_at", float), ("waiting_on", str),
                       ("waiting_detail", str), ("waiting_since", float)):
        if name not in sessions.columns_dict:
            sessions.add_column(name, kind)
    # SubagentStart / SubagentStop: a session's running and finished subagents.
    db.table("subagents").create(
        {"session_id": str, "agent_id": str, "agent_type": str, "started_at": float, "stopped_at": float,
         "last_message": str},
        pk=("session_id", "agent_id"),
        not_null=["session_id", "agent_id"],
        if_not_exists=True,
    )


@migration
def m012_approvals(db: sqlite_utils.Database) -> None:
    # A person in the loop (features/approvals.py, docs/approvals.md): every permission dialog,
    # question and approval gate a hook held open, and how it was answered. The waiting hook
    # polls its own row; the first answer wins by a conditional UPDATE (WHERE state = 'pending').
    db.table("approvals").create(
        {
            "id": str,  # random, URL-safe: what `agent-hook approve ID` and POST /api/approvals/<id> name
            "host": str,  # "" for this host
            "session_id": str,
            "kind": str,  # permission | question | gate
            "tool_name": str,
            "tool_input": str,  # JSON
            "tool_use_id": str,  # PreToolUse (gates) only: PermissionRequest carries none
            "questions": str,  # JSON list (AskUserQuestion)
            "permission_suggestions": str,  # JSON list, sent back as updatedPermissions by "always allow"
            "gate": str,  # the gate's name (kind gate)
            "on_timeout": str,  # gate: deny | allow
            "state": str,  # pending | allowed | denied | answered | withdrawn | expired
            "created_at": float,
            "expires_at": float,
            # The answer.
            "decision": str,  # allow | allow_always | deny
            "message": str,
            "interrupt": int,
            "answers": str,  # JSON {question: label}
            "answered_by": str,  # "uid 1000 (alice)", "terminal", "hook"
            "answered_via": str,  # cli | api | board | remote | terminal | timeout
            "answered_where": str,  # the host (or address) it came from
            "answered_at": float,
            "waited_ms": int,
            "note": str,  # how a withdrawn or expired request ended
        },
        pk="id",
        not_null=["host", "session_id", "kind", "tool_name", "state", "created_at"],
        defaults={"host": "", "state": "pending", "interrupt": 0},
        if_not_exists=True,
    )
    db.table("approvals").create_index(["session_id", "created_at"], if_not_exists=True)
    db.table("approvals").create_index(["created_at"], if_not_exists=True)
    # Partial: only pending rows (a handful at most), so the "withdraw what the terminal answered"
    # check other events make finds nothing in one index probe.
    db.execute("CREATE INDEX IF NOT EXISTS idx_approvals_pending ON approvals (session_id, created_at) WHERE state = 'pending'")


@migration
def m013_board_tmux_commands(db: sqlite_utils.Database) -> None:
    # The board: where a session runs in tmux (its pane and the tmux server's socket, from
    # $TMUX_PANE / $TMUX: a reply is typed there), the command (or file path) each tool call ran,
    # clipped, and what another host's server reports about its own sessions (JSON, fleet_sessions).
    sessions = db.table("sessions")
    for name in ("tmux_pane", "tmux_socket"):
        if name not in sessions.columns_dict:
            sessions.add_column(name, str)
    if "command" not in db.table("tool_calls").columns_dict:
        db.table("tool_calls").add_column("command", str)
    fleet = db.table("fleet_sessions")
    for name, kind in (("details", str), ("details_at", float)):
        if name not in fleet.columns_dict:
            fleet.add_column(name, kind)


@migration
def m014_cost(db: sqlite_utils.Database) -> None:
    # What sessions cost (features/cost.py, docs/cost.md). One row per priced assistant message,
    # keyed as ccusage de-duplicates (message id + request id), so a line copied into a resumed or
    # forked transcript, or read twice, counts once. usd is NULL for a model we cannot price.
    db.table("cost_messages").create(
        {"key": str, "session_id": str, "agent_id": str, "model": str, "at": float, "input_tokens": int,
         "output_tokens": int, "cache_creation_input_tokens": int, "cache_1h_input_tokens": int,
         "cache_read_input_tokens": int, "usd": float},
        pk="key",
        not_null=["session_id", "model", "at"],
        if_not_exists=True,
    )
    db.table("cost_messages").create_index(["session_id", "at"], if_not_exists=True)
    db.table("cost_messages").create_index(["at"], if_not_exists=True)
    # How far each transcript (a session's, or a subagent's) has been read.
    db.table("cost_offsets").create(
        {"path": str, "session_id": str, "agent_id": str, "inode": int, "offset": int, "updated_at": float},
        pk="path", not_null=["session_id", "offset"], if_not_exists=True,
    )
    db.table("cost_offsets").create_index(["session_id"], if_not_exists=True)
    # Running totals the budget guard reads in one indexed row each.
    for name, kind in (("cost_usd", float), ("cost_unpriced", int)):
        if name not in db.table("sessions").columns_dict:
            db.table("sessions").add_column(name, kind, not_null_default=0)
    if "cost_noticed" not in db.table("sessions").columns_dict:
        db.table("sessions").add_column("cost_noticed", str)
    for name in ("budget_usd", "spent_usd"):
        if name not in db.table("tasks").columns_dict:
            db.table("tasks").add_column(name, float)
    # The command center: each card's running cost, as its host's forwarded events carry it.
    if "fleet_sessions" in db.table_names() and "cost_usd" not in db.table("fleet_sessions").columns_dict:
        db.table("fleet_sessions").add_column("cost_usd", float)
    # Spend per local day: agent "" is the whole host.
    db.table("cost_daily").create({"day": str, "agent": str, "usd": float}, pk=("day", "agent"),
                            not_null=["usd"], if_not_exists=True)


@migration
def m015_cost_samples(db: sqlite_utils.Database) -> None:
    # The board's burn rate and cost chart for another host's card: its running cost at each event
    # that raised it (a local card reads its own cost_messages instead).
    db.table("fleet_cost_samples").create({"fleet_id": str, "at": float, "usd": float},
                                    not_null=["fleet_id", "at", "usd"], if_not_exists=True)
    db.table("fleet_cost_samples").create_index(["fleet_id", "at"], if_not_exists=True)


@migration
def m016_memory_vectors(db: sqlite_utils.Database) -> None:
    # Embeddings beside the FTS5 rows, so search finds notes by meaning (features/vectors.py):
    # kind memory (key: the file's path, which survives a reindex) or session (key: session id).
    # sha256 is the text's when embedded and model the embedder's id: either differing -> stale.
    # vector: the unit vector as little-endian float16 (512 bytes for 256 dimensions).
    db.table("memory_vectors").create(
        {"kind": str, "key": str, "sha256": str, "model": str, "vector": bytes, "at": float},
        pk=("kind", "key"),
        not_null=["sha256", "model", "vector", "at"],
        if_not_exists=True,
    )
    # max(at) is part of the fingerprint a search checks before reusing its matrix: an index, not a scan.
    db.table("memory_vectors").create_index(["at"], if_not_exists=True)


@migration
def m017_approvals_agent(db: sqlite_utils.Database) -> None:
    # The subagent a dialog came from (its hooks carry agent_id; the main thread's carry none), so a
    # subagent's finished tool call withdraws its own open dialog, never the main thread's.
    db.table("approvals").add_column("agent_id", str)


@migration
def m018_fleet_credentials(db: sqlite_utils.Database) -> None:
    # A credential per paired host and per paired device (center/credentials.py). Only a hash of each
    # secret is kept; the credential names its row by id ("ah1.<id>.<secret>"), whose hash is then
    # compared in constant time. A revoked row stays, so a revoked caller is told so.
    db.table("fleet_credentials").create(
        {"id": str, "kind": str, "name": str, "secret_sha256": str, "paired_at": float, "paired_from": str,
         "last_seen_at": float, "last_address": str, "revoked_at": float},
        pk="id",
        not_null=["kind", "name", "secret_sha256", "paired_at"],
        if_not_exists=True,
    )
    db.execute("CREATE UNIQUE INDEX IF NOT EXISTS idx_fleet_credentials_live ON fleet_credentials (kind, name)"
               " WHERE revoked_at IS NULL")
    # One-time pairing codes (`agent-hook fleet pair`): their hash, what they pair, until when.
    db.table("fleet_pairing_codes").create(
        {"code_sha256": str, "kind": str, "name": str, "created_at": float, "expires_at": float,
         "used_at": float, "used_from": str},
        pk="code_sha256",
        not_null=["kind", "name", "created_at", "expires_at"],
        if_not_exists=True,
    )
    # What people and hosts did through the command center (answers, replies, cancels) and who did it,
    # as the credential said: never a name the caller wrote in a header or a body.
    db.table("fleet_actions").create(
        {"id": int, "at": float, "action": str, "target": str, "card": str, "host": str, "status": int,
         "by_kind": str, "by_name": str, "by_address": str, "note": str},
        pk="id",
        not_null=["at", "action", "by_kind", "by_name"],
        if_not_exists=True,
    )
    db.table("fleet_actions").create_index(["card", "id"], if_not_exists=True)
    # How each subscribed host last authenticated (a paired credential, or the shared fleet token): doctor
    # names the hosts still on the shared token.
    db.table("fleet_hosts").add_column("auth", str)


@migration
def m019_fleet_cost(db: sqlite_utils.Database) -> None:
    # The command center's ledger of every other host's priced messages (center/ledger.py), keyed
    # as the host keyed them (message id + request id), per host: a report sent again adds nothing.
    # agent and task_id are the session's as its host last said (a session assigned to a task later
    # moves its spend with it). This host's own messages stay in cost_messages.
    db.table("fleet_cost_messages").create(
        {"host": str, "key": str, "session_id": str, "agent_id": str, "agent": str, "task_id": str, "model": str,
         "at": float, "input_tokens": int, "output_tokens": int, "cache_creation_input_tokens": int,
         "cache_1h_input_tokens": int, "cache_read_input_tokens": int, "usd": float, "received_at": float},
        pk=("host", "key"),
        not_null=["session_id", "model", "at"],
        if_not_exists=True,
    )
    db.table("fleet_cost_messages").create_index(["host", "session_id"], if_not_exists=True)
    db.table("fleet_cost_messages").create_index(["at"], if_not_exists=True)
    db.table("fleet_cost_messages").create_index(["task_id"], if_not_exists=True)
    db.table("fleet_cost_messages").create_index(["agent", "at"], if_not_exists=True)
    # Budgets that hold fleet-wide, as this host last learned them from its command center (or, on the
    # command center, as it computed them): the budget guard reads them beside its own. elsewhere_usd
    # is what the rest of the fleet spent against the budget (this host's own spend it counts itself).
    db.table("fleet_budgets").create(
        {"kind": str, "key": str, "name": str, "limit_usd": float, "elsewhere_usd": float, "day": str,
         "center": str, "updated_at": float},
        pk=("kind", "key"),
        not_null=["name", "limit_usd", "elsewhere_usd", "updated_at"],
        if_not_exists=True,
    )
    # A budget reached, or a forecast that crosses its limit, once each (per limit and period): what a
    # notifier picks up (notified_at NULL until it has).
    db.table("fleet_cost_alerts").create(
        {"id": int, "kind": str, "subject": str, "limit_usd": float, "spent_usd": float, "period": str,
         "at": float, "due_at": float, "message": str, "notified_at": float},
        pk="id",
        not_null=["kind", "subject", "limit_usd", "period", "at", "message"],
        if_not_exists=True,
    )
    db.execute("CREATE UNIQUE INDEX IF NOT EXISTS idx_fleet_cost_alerts_once"
               " ON fleet_cost_alerts (kind, subject, limit_usd, period)")
    db.execute("CREATE INDEX IF NOT EXISTS idx_fleet_cost_alerts_pending ON fleet_cost_alerts (at)"
               " WHERE notified_at IS NULL")


@migration
def m020_notifications(db: sqlite_utils.Database) -> None:
    # Telling a person (agent_hooks/notify, docs/notifications.md): one row per subject (a request's id, or
    # a session's "failed/stalled/budget/finished" moment) and channel (an Apprise URL's digest, or a push
    # subscription's), drained by the resident server with retries; next_at NULL: nothing more to send
    # (delivered and not to be sent again, given up, or answered first). The channel's URL is never stored.
    db.table("notify_outbox").create(
        {"id": int, "subject": str, "kind": str, "channel": str, "channel_name": str, "title": str, "body": str,
         "link": str, "tag": str, "state": str, "attempts": int, "sends": int, "created_at": float,
         "next_at": float, "last_at": float, "sent_at": float, "last_error": str, "last_answer": str},
        pk="id",
        not_null=["subject", "kind", "channel", "state", "created_at"],
        defaults={"attempts": 0, "sends": 0},
        if_not_exists=True,
    )
    db.execute("CREATE UNIQUE INDEX IF NOT EXISTS idx_notify_outbox_subject ON notify_outbox (subject, channel)")
    db.execute("CREATE INDEX IF NOT EXISTS idx_notify_outbox_due ON notify_outbox (next_at) WHERE next_at IS NOT NULL")
    db.table("notify_outbox").create_index(["channel", "last_at"], if_not_exists=True)
    # Devices subscribed from the board ("Notify me"): the browser's PushSubscription, and which paired
    # device (or the owner) subscribed it.
    db.table("push_subscriptions").create(
        {"channel": str, "endpoint": str, "p256dh": str, "auth": str, "device": str, "created_at": float,
         "last_ok_at": float, "last_error": str},
        pk="channel",
        not_null=["endpoint", "p256dh", "auth", "created_at"],
        if_not_exists=True,
    )
    # On a command center's copy of another host's request: whether that host tells its person itself
    # (then this center does not: one notification per request), and the delivery it reported (JSON).
    db.table("approvals").add_column("notified_by_host", int)
    db.table("approvals").add_column("notify_state", str)


@migration
def m021_launches(db: sqlite_utils.Database) -> None:
    # Sessions started from the command center (center/launch.py): one row per launch, its card's id
    # (the session's own id), the host that runs it, its control, and what became of it: starting,
    # started, or refused with why. Who asked is in fleet_actions.
    db.table("fleet_launches").create(
        {"card_id": str, "host": str, "seq": int, "state": str, "error": str, "cwd": str, "permission_mode": str,
         "at": float, "settled_at": float},
        pk="card_id",
        not_null=["host", "state", "at"],
        if_not_exists=True,
    )
    db.table("fleet_launches").create_index(["seq"], if_not_exists=True)
    # What each subscribed host says it may launch (its report): {"roots", "permission_modes", "default_mode"}.
    db.table("fleet_hosts").add_column("launch", str)


@migration
def m022_fleet_shared_state(db: sqlite_utils.Database) -> None:
    # What several command centers on one fleet store (PostgreSQL) share, rather than each keep in its process.
    # What the center's limits kept out of each host (center/limits.py): its pending requests left out now,
    # and its cards left out and requests refused since ``since``; written by whichever center saw it.
    db.table("fleet_left_out").create(
        {"host": str, "approvals": int, "cards": int, "refused": int, "since": float, "updated_at": float},
        pk="host",
        not_null=["approvals", "cards", "refused"],
        defaults={"approvals": 0, "cards": 0, "refused": 0},
        if_not_exists=True,
    )
    # The fleet's budgets and the board's cost header, as the one center that counts them (center/lease.py)
    # last counted them: the others take them from here. name: "budgets" | "cost_view"; doc: JSON.
    db.table("fleet_shared").create({"name": str, "doc": str, "at": float}, pk="name", not_null=["doc"],
                                    if_not_exists=True)
    # A host's word on a control too large for a notification between centers (control.py): the center
    # that waits for it reads it here, by id.
    db.table("fleet_replies").create({"id": int, "seq": int, "host": str, "doc": str, "at": float}, pk="id",
                                     not_null=["seq", "doc", "at"], if_not_exists=True)


def migrate(path: str, lock: bool = True, step_by_step: bool = False) -> list[str]:
    """Bring the store at ``path`` to the current schema; return the migrations applied.

    ``lock=False`` is for a caller that already holds ``PATH.migrate.lock``
    (the hook path takes it with fcntl before importing this module). An empty store is
    created from the snapshot of the current schema (:mod:`agent_hooks.schema_head`)
    unless ``step_by_step`` (what writes and checks that snapshot).
    """
    import contextlib

    from filelock import FileLock

    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    # One migrator at a time: many hooks may find a new store at once.
    guard = FileLock(path + ".migrate.lock", timeout=30) if lock else contextlib.nullcontext()
    with guard:
        conn = sqlite3.connect(path, timeout=30)
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] >= len(MIGRATIONS):
                return []
            created = None if step_by_step else schema_head.create_if_empty(path, len(MIGRATIONS))
            if created is not None:
                pending = created
            else:
                db = sqlite_utils.Database(conn)
                db.enable_wal()
                pending = [m.name for m in MIGRATION_SET.pending(db)]
                MIGRATION_SET.apply(db)
                conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
                conn.commit()
        finally:
            conn.close()
        chmod_private(path)
        chmod_private(path + ".migrate.lock")
    return pending


def write_head() -> int:
    """Rewrite data/schema.sql, the snapshot a new store is created from (agent_hooks/schema_head.py),
    from a store migrated step by step: run after adding a migration."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "store.db")
        migrate(path, step_by_step=True)
        conn = sqlite3.connect(path)
        try:
            text = schema_head.dump(conn, list(MIGRATIONS))
        finally:
            conn.close()
    with open(schema_head.HEAD_FILE, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"{schema_head.HEAD_FILE}: {len(MIGRATIONS)} migrations")
    return 0


if __name__ == "__main__":
    raise SystemExit(write_head())
