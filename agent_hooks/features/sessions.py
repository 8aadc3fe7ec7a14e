"""Sessions: who is running, where, and when each was last heard from.

Every hook call upserts its session: cwd, transcript, tmux name, agent, role,
first and last seen, state. States stored here are ``live`` (working),
``awaiting`` (Stop: waiting for input) and ``ended`` (SessionEnd), and the
waiting states ``needs_input`` and ``error`` (features/waiting.py); ``stalled``
is derived by readers from ``last_seen_at``. A call that sets the session
working or awaiting clears what it was waiting on; an ended session keeps it
(a one-shot run that ended on an API error still says so).
"""

from __future__ import annotations

import sqlite3

from agent_hooks.payload import Payload

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

LIVE, AWAITING, ENDED = "live", "awaiting", "ended"


def tmux_session(env: Any) -> str | None:
    """The tmux session name our launcher (or OptimalOS's) set; None when neither variable is set."""
    return env.get("OPTIMALOS_SESSION_TMUX") or env.get("AGENT_HOOKS_TMUX_SESSION") or None


def tmux_pane(env: Any) -> tuple[str | None, str | None]:
    """(socket, pane) of the tmux pane the session runs in, from tmux's own variables: ``$TMUX`` is
    "SOCKET,PID,INDEX" and ``$TMUX_PANE`` "%N". Anything else is ignored (None, None)."""
    pane = env.get("TMUX_PANE") or ""
    if not (pane.startswith("%") and pane[1:].isdigit()):
        return None, None
    sock = (env.get("TMUX") or "").split(",", 1)[0]
    if not sock.startswith("/") or "\n" in sock or len(sock) > 1000:
        sock = ""
    return sock or None, pane


def tmux_command(sock: str | None, *args: str) -> list[str]:
    """A tmux command line aimed at the tmux server behind ``sock`` (the default server without one)."""
    return ["tmux", *(["-S", sock] if sock else []), *args]


def resolve_tmux_name(env: Any, timeout_s: float = 1.0) -> str | None:
    """The name of the tmux session a session started in, asked of tmux itself: for sessions started
    in tmux by hand (no launcher variable). Run at SessionStart only; None when not in tmux or tmux
    does not answer (the session is then recorded without a name, as before)."""
    if tmux_session(env):
        return None
    sock, pane = tmux_pane(env)
    if pane is None:
        return None
    import subprocess

    try:
        proc = subprocess.run(tmux_command(sock, "display-message", "-p", "-t", pane, "#{session_name}"),
                              capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    name = proc.stdout.strip() if proc.returncode == 0 else ""
    return name[:200] or None


def agent_name(env: Any, config: Mapping[str, Any]) -> str:
    return env.get("AGENT_HOOKS_AGENT") or config["identity"]["agent"]


def role(env: Any, config: Mapping[str, Any]) -> str:
    return env.get("AGENT_HOOKS_ROLE") or config["identity"]["role"]


def task_id(env: Any) -> str | None:
    return env.get("AGENT_HOOKS_TASK_ID") or None


def touch(conn: sqlite3.Connection, payload: Payload, env: Any, config: dict[str, Any], at: float,
          state: str | None = None, tmux_name: str | None = None) -> None:
    """Record this hook call on its session (insert or update); ``state`` None keeps it.
    ``tmux_name``: the tmux session's name when the environment does not say it (SessionStart asks tmux)."""
    sock, pane = tmux_pane(env)
    conn.execute(
        """
        INSERT INTO sessions (session_id, cwd, transcript_path, tmux_session, agent, role, state,
                              first_seen_at, last_seen_at, last_event, ended_at, hook_calls, task_id,
                              tmux_pane, tmux_socket)
        VALUES (:sid, :cwd, :tp, :tmux, :agent, :role, coalesce(:state, 'live'), :at, :at, :event,
                CASE WHEN :state = 'ended' THEN :at END, 1, :task, :pane, :sock)
        ON CONFLICT (session_id) DO UPDATE SET
            cwd = coalesce(nullif(excluded.cwd, ''), sessions.cwd),
            transcript_path = coalesce(nullif(excluded.transcript_path, ''), sessions.transcript_path),
            tmux_session = coalesce(excluded.tmux_session, sessions.tmux_session),
            tmux_pane = coalesce(excluded.tmux_pane, sessions.tmux_pane),
            tmux_socket = coalesce(excluded.tmux_socket, sessions.tmux_socket),
            agent = excluded.agent,
            role = excluded.role,
            -- A replayed call (agent_hooks.spool) is older than what came since: it moves nothing back.
            state = CASE WHEN excluded.last_seen_at >= sessions.last_seen_at
                         THEN coalesce(:state, sessions.state) ELSE sessions.state END,
            last_seen_at = max(sessions.last_seen_at, excluded.last_seen_at),
            last_event = CASE WHEN excluded.last_seen_at >= sessions.last_seen_at
                              THEN excluded.last_event ELSE sessions.last_event END,
            ended_at = CASE WHEN excluded.last_seen_at < sessions.last_seen_at THEN sessions.ended_at
                            WHEN :state = 'ended' THEN excluded.last_seen_at
                            WHEN :state IS NULL THEN sessions.ended_at END,
            hook_calls = sessions.hook_calls + 1,
            task_id = coalesce(excluded.task_id, sessions.task_id),
            waiting_on = CASE WHEN :state IS NULL OR :state = 'ended' THEN sessions.waiting_on END,
            waiting_detail = CASE WHEN :state IS NULL OR :state = 'ended' THEN sessions.waiting_detail END,
            waiting_since = CASE WHEN :state IS NULL OR :state = 'ended' THEN sessions.waiting_since END
        """,
        {
            "sid": payload.session_id,
            "cwd": payload.cwd,
            "tp": payload.transcript_path,
            "tmux": tmux_session(env) or tmux_name,
            "pane": pane,
            "sock": sock,
            "agent": agent_name(env, config),
            "role": role(env, config),
            "state": state,
            "at": at,
            "event": payload.event,
            "task": task_id(env),
        },
    )


def log_event(conn: sqlite3.Connection, payload: Payload, at: float, detail: str | None = None) -> None:
    """Journal a non-tool hook call (SessionStart source, PreCompact trigger, ...)."""
    conn.execute(
        "INSERT INTO session_events (session_id, event, detail, at) VALUES (?, ?, ?, ?)",
        (payload.session_id, payload.event, detail, at),
    )


def note_prompt(conn: sqlite3.Connection, payload: Payload, limit: int = 2000) -> None:
    """Keep the session's first prompt: the goal when no task describes one."""
    prompt = payload.get("prompt")
    if prompt:
        conn.execute(
            "UPDATE sessions SET first_prompt = ? WHERE session_id = ? AND first_prompt IS NULL",
            (prompt[:limit], payload.session_id),
        )


_WITH_TASK = ("session_id", "agent", "cwd", "transcript_path", "first_prompt", "compactions",
              "task_id", "description", "progress", "task_state")


def with_task(conn: sqlite3.Connection, session_id: str) -> dict[str, Any]:
    """The session's row joined with its task's (description, progress, task_state); {} if unknown."""
    row = conn.execute(
        "SELECT s.session_id, s.agent, s.cwd, s.transcript_path, s.first_prompt, s.compactions,"
        " s.task_id, t.description, t.progress, t.state"
        " FROM sessions s LEFT JOIN tasks t ON t.task_id = s.task_id WHERE s.session_id = ?",
        (session_id,),
    ).fetchone()
    return dict(zip(_WITH_TASK, row, strict=True)) if row else {}


def subagent_of(payload: Payload) -> str | None:
    """The subagent a hook fired in (its ``agent_id``); None in the main thread."""
    agent_id = payload.get("agent_id")
    return agent_id if isinstance(agent_id, str) and agent_id else None


def withdraw_dialogs(conn: sqlite3.Connection, session_id: str, at: float, note: str,
                     tool_name: str | None = None, agent_id: str | None = None) -> int:
    """The session moved on, so its open permission dialogs and questions were answered at the
    terminal: mark their approval requests withdrawn (features/approvals.py). Gates are left to
    the hook that holds them. ``tool_name`` narrows it to that tool's dialog (its PostToolUse),
    asked by the same thread: ``agent_id`` is the subagent's, None the main thread's.

    Here rather than in features/approvals so the tool events import nothing more: when nothing is
    pending, which is nearly always, it is one probe of a partial index that finds no row.
    """
    sql = ("UPDATE approvals SET state = 'withdrawn', note = ?, answered_via = 'terminal', answered_by = 'terminal',"
           " answered_at = ?, waited_ms = CAST((? - created_at) * 1000 AS INTEGER)"
           " WHERE session_id = ? AND state = 'pending' AND kind != 'gate' AND created_at <= ?")
    # created_at: an event replayed from the spool is older than a dialog opened since; it leaves that one be.
    if tool_name is None:
        return conn.execute(sql, (note, at, at, session_id, at)).rowcount
    return conn.execute(sql + " AND tool_name = ? AND agent_id IS ?",
                        (note, at, at, session_id, at, tool_name, agent_id)).rowcount

