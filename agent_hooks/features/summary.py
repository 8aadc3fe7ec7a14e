"""Session summaries: what each session did, stored per session and searchable.

At every Stop the hook builds a deterministic extractive summary from the
payload's ``last_assistant_message`` (the transcript may lag behind it) and
the transcript's tail (first prompt, files changed by Write/Edit, Bash
commands, failed tool results) plus the failures recorded in ``tool_calls``,
and upserts it into ``session_summaries`` (indexed by ``session_summaries_fts``
through triggers). Transcript reading is capped in bytes and time, and done
before the write transaction.

When ``summary.summarizer_command`` is set, Stop then starts a detached
worker (:mod:`agent_hooks.features.summarize_worker`) that feeds a transcript
excerpt to that command with a timeout; a successful run (exit 0, non-empty
stdout) replaces the extractive text (``source = 'command'``).
"""

from __future__ import annotations

import sqlite3

from agent_hooks.features import detach, sessions, transcript
from agent_hooks.output import one_line
from agent_hooks.payload import Payload

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EXTRACTIVE, COMMAND = "extractive", "command"
WORKER_MODULE = "agent_hooks.features.summarize_worker"


def _listing(label: str, items: list[str], max_items: int, item_chars: int) -> str:
    shown = [one_line(i, item_chars) for i in items[-max_items:]]
    more = f" (+{len(items) - len(shown)} earlier)" if len(items) > len(shown) else ""
    return f"{label} ({len(items)}){more}: " + "; ".join(shown)


def extractive(session: dict[str, Any], found: dict[str, Any] | None, last_message: str | None,
               db_failures: list[dict[str, Any]], config: dict[str, Any], partial: bool = False,
               cut: bool = False) -> str:
    """The extractive summary text. Pure: same inputs, same text.

    ``session``: session_id, agent, task_id, description, first_prompt;
    ``found``: :func:`transcript.facts` (None when the transcript was unreadable);
    ``db_failures``: rows of tool_calls with outcome failure (tool_use_id, tool, error).
    """
    scfg = config["summary"]
    max_items = int(scfg["max_items"])
    found = found or {}
    lines = []
    head = f"Session {session.get('session_id', '?')}"
    if session.get("agent"):
        head += f" by agent {session['agent']}"
    if session.get("task_id"):
        head += f", task {session['task_id']}"
    lines.append(head)
    if session.get("description"):
        lines.append(f"Task: {one_line(session['description'], 400)}")
    goal = session.get("first_prompt") or found.get("first_prompt")
    if goal:
        lines.append(f"Goal (first prompt): {one_line(goal, 400)}")
    last_prompt = found.get("last_prompt")
    if last_prompt and last_prompt != goal:
        lines.append(f"Last prompt: {one_line(last_prompt, 300)}")
    outcome = last_message or found.get("last_reply")
    if outcome:
        lines.append(f"Outcome: {one_line(outcome, 800)}")
    if found.get("files"):
        lines.append(_listing("Files touched", found["files"], max_items, 200))
    if found.get("commands"):
        lines.append(_listing("Commands run", found["commands"], max_items, 160))
    failures: dict[str, dict[str, Any]] = dict(found.get("failures") or {})
    for i, row in enumerate(db_failures):
        key = row.get("tool_use_id") or f"db-{i}"
        if key not in failures:
            failures[key] = {"tool": row.get("tool") or "?", "what": "", "error": row.get("error") or "failed"}
    if failures:
        items = []
        for f in failures.values():
            what = f" `{one_line(f['what'], 80)}`" if f.get("what") else ""
            items.append(f"{f.get('tool', '?')}{what}: {one_line(f.get('error'), 160)}")
        lines.append(_listing("Failures", items, max_items, 260))
    open_todos = transcript.open_todos(found.get("todos"))
    if open_todos:
        lines.append(_listing("Open todos", [t["content"] for t in open_todos], max_items, 120))
    if partial:
        lines.append("(transcript only partly parsed: over the time budget)")
    elif cut:
        lines.append("(only the newest part of a long transcript was read)")
    text = "\n".join(lines)
    max_chars = int(scfg["max_chars"])
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def session_row(conn: sqlite3.Connection, session_id: str) -> dict[str, Any]:
    return sessions.with_task(conn, session_id) or {"session_id": session_id}


def db_failures(conn: sqlite3.Connection, session_id: str, limit: int) -> list[dict[str, Any]]:
    return [
        {"tool_use_id": r[0], "tool": r[1], "error": r[2]}
        for r in conn.execute(
            "SELECT tool_use_id, tool_name, error FROM tool_calls WHERE session_id = ? AND outcome = 'failure'"
            " ORDER BY id DESC LIMIT ?",
            (session_id, limit),
        )
    ][::-1]


def prepare(payload: Payload, env: Any, config: dict[str, Any]) -> dict[str, Any] | None:
    """Read the transcript for the summary (capped; before any transaction). None when disabled."""
    if not config["summary"]["enabled"] or detach.nested(env):
        return None
    loaded = transcript.load(payload.transcript_path, env, config, int(config["transcript"]["parse_budget_ms"]))
    found = transcript.facts(loaded["entries"]) if loaded["path"] else None
    return {"facts": found, "partial": loaded["partial"], "cut": loaded["cut"]}


def save(conn: sqlite3.Connection, session_id: str, agent: str | None, task_id: str | None, text: str,
         source: str, at: float) -> None:
    # ON CONFLICT DO UPDATE (never INSERT OR REPLACE): the update trigger keeps the FTS index right.
    conn.execute(
        "INSERT INTO session_summaries (session_id, agent, task_id, summary, source, at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (session_id) DO UPDATE SET agent = excluded.agent, task_id = excluded.task_id,"
        " summary = excluded.summary, source = excluded.source, at = excluded.at",
        (session_id, agent, task_id, text, source, at),
    )


def record(conn: sqlite3.Connection, payload: Payload, prepared: dict[str, Any] | None,
           config: dict[str, Any], at: float) -> None:
    """Upsert the extractive summary at Stop (inside the Stop transaction; string work only)."""
    if prepared is None:
        return
    session = session_row(conn, payload.session_id)
    fails = db_failures(conn, payload.session_id, int(config["summary"]["max_items"]) * 2)
    text = extractive(session, prepared["facts"], payload.get("last_assistant_message"), fails, config,
                      prepared["partial"], prepared.get("cut", False))
    save(conn, payload.session_id, session.get("agent"), session.get("task_id"), text, EXTRACTIVE, at)


def after_stop(payload: Payload, env: Any, config: dict[str, Any]) -> None:
    """Start the summarizer worker when a command is configured (never waits for it)."""
    command = config["summary"]["summarizer_command"]
    if not config["summary"]["enabled"] or not command or detach.nested(env):
        return
    detach.spawn(WORKER_MODULE, [payload.session_id], env)


def get(conn: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT session_id, agent, task_id, summary, source, at FROM session_summaries WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    if row is None:
        return None
    return dict(zip(("session_id", "agent", "task_id", "summary", "source", "at"), row, strict=True))


def _fts_query(query: str, joiner: str) -> str:
    import re  # search is a CLI path; the hooks never pay for re

    words = re.findall(r"\w+", query, flags=re.UNICODE)
    return joiner.join(f'"{w}"' for w in words)


def search(conn: sqlite3.Connection, query: str, limit: int = 10, any_word: bool = True) -> list[dict[str, Any]]:
    """Summaries matching ``query`` (all words, else any word unless ``any_word`` is False), best first.

    Each hit: name, path (the transcript), snippet, score (higher is better),
    kind ``session``, plus session_id, agent, task_id, source, at.
    """
    hits: list[dict[str, Any]] = []
    for joiner in (" ", " OR ") if any_word else (" ",):
        match = _fts_query(query, joiner)
        if not match:
            return []
        rows = conn.execute(
            "SELECT ss.session_id, ss.agent, ss.task_id, ss.source, ss.at, s.transcript_path,"
            " snippet(session_summaries_fts, 0, '[', ']', '…', 16), bm25(session_summaries_fts)"
            " FROM session_summaries_fts"
            " JOIN session_summaries ss ON ss.rowid = session_summaries_fts.rowid"
            " LEFT JOIN sessions s ON s.session_id = ss.session_id"
            " WHERE session_summaries_fts MATCH ? ORDER BY bm25(session_summaries_fts) LIMIT ?",
            (match, int(limit)),
        ).fetchall()
        for sid, agent, task, source, at, path, snippet, rank in rows:
            name = f"session {sid[:8]}" + (f" ({agent})" if agent else "") + (f" task {task}" if task else "")
            hits.append({"name": name, "path": path, "snippet": snippet, "score": -float(rank),
                         "kind": "session", "session_id": sid, "agent": agent, "task_id": task,
                         "source": source, "at": at})
        if hits or joiner == " OR ":
            break
    return hits
