"""A person in the loop: permission dialogs, questions and approval gates held open for an answer.

The store is the meeting point (docs/approvals.md):

* a PermissionRequest (a permission dialog, or an AskUserQuestion question) or a
  PreToolUse that matches an approval gate inserts a ``pending`` row in
  ``approvals`` and hands the transport a :class:`Hold`;
* the transport waits on that row (the executable polls it with ``PRAGMA
  data_version``; the server holds the http request on an event), never on the
  network;
* whoever answers first (the CLI, the server's API, the board, another host
  through the command center) wins by a conditional UPDATE ``WHERE state =
  'pending'``; a late answer is told "already answered";
* the waiting hook wakes, answers the client in its own format and the row
  keeps who answered, where, when and how long it waited. When the person at
  the terminal answers first, the row is marked ``withdrawn`` (the hook was
  stopped, the http request aborted, or the tool's next event arrived).

Standard library only: PermissionRequest imports it on every dialog, PreToolUse
only when a gate is configured.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

from agent_hooks.output import Outcome, one_line

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal

    AnswerResult = Literal["answered", "already", "unknown", "invalid"]

PERMISSION, QUESTION, GATE = "permission", "question", "gate"
KINDS = (PERMISSION, QUESTION, GATE)
PENDING, ALLOWED, DENIED, ANSWERED, WITHDRAWN, EXPIRED = (
    "pending", "allowed", "denied", "answered", "withdrawn", "expired")
STATES = (PENDING, ALLOWED, DENIED, ANSWERED, WITHDRAWN, EXPIRED)
DECISIONS = ("allow", "allow_always", "deny")
# How an answer came: the server's API (the board sends "board", a command center "remote").
VIAS = ("cli", "api", "board", "remote", "terminal", "timeout", "hook")
QUESTION_TOOL = "AskUserQuestion"
MAX_MESSAGE_CHARS = 4000
MAX_INPUT_CHARS = 64 * 1024  # tool_input kept per row; a larger input is kept clipped (the hook still answers)
POLL_S = 0.1  # the executable's look at its row: one PRAGMA, a row read only when something committed

COLUMNS = ("id", "host", "session_id", "kind", "tool_name", "tool_input", "tool_use_id", "questions",
           "permission_suggestions", "gate", "on_timeout", "state", "created_at", "expires_at", "decision",
           "message", "interrupt", "answers", "answered_by", "answered_via", "answered_where", "answered_at",
           "waited_ms", "note")
_SELECT = "SELECT " + ", ".join(COLUMNS) + " FROM approvals"


class AnswerError(ValueError):
    """An answer that cannot be given (bad decision, answers for no question...): HTTP 400, CLI error."""


class Hold:
    """What a handler hands its transport: wait for the answer to ``approval_id`` until ``expires_at``.

    ``base`` is the outcome to give when the answer lets the call go on (a gate allowed:
    the guards' warnings, a handler's updated input). The transport calls :func:`conclude`.
    """

    __slots__ = ("approval_id", "kind", "expires_at", "base", "gate", "on_timeout", "timeout_s", "event")

    def __init__(self, approval_id: str, kind: str, expires_at: float, event: str, base: Outcome | None = None,
                 gate: str | None = None, on_timeout: str = "deny", timeout_s: float = 0.0) -> None:
        self.approval_id = approval_id
        self.kind = kind
        self.expires_at = expires_at
        self.event = event
        self.base = base
        self.gate = gate
        self.on_timeout = on_timeout
        self.timeout_s = timeout_s

    def left_s(self) -> float:
        return max(0.0, self.expires_at - time.time())


def unattended(env: dict[str, str]) -> str | None:
    """Why nobody can answer this session's dialog at its terminal, or None (someone may).

    Measured on 2.1.332: a `claude -p` run gives its hooks CLAUDE_CODE_SESSION_ATTENDED=0 and
    CLAUDE_CODE_ENTRYPOINT=sdk-cli, and still runs PermissionRequest for a call it is about to deny
    (WebFetch, Skill). The interactive client says ATTENDED=1 / ENTRYPOINT=cli; an older client that
    sets neither is taken as attended.
    """
    if env.get("CLAUDE_CODE_SESSION_ATTENDED") == "0":
        return "CLAUDE_CODE_SESSION_ATTENDED=0"
    entry = env.get("CLAUDE_CODE_ENTRYPOINT") or ""
    if entry.startswith("sdk"):
        return f"CLAUDE_CODE_ENTRYPOINT={entry}"
    return None


# -- rows ------------------------------------------------------------------------------


def new_id() -> str:
    """A short random id (48 bits): typed in `agent-hook approve ID`, never guessed."""
    return os.urandom(6).hex()


def _dumps(value: Any, limit: int | None = None) -> str | None:
    if value is None:
        return None
    text = json.dumps(value, ensure_ascii=False, default=str)
    if limit is not None and len(text) > limit:
        text = json.dumps({"_clipped": text[:limit]})
    return text


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def kind_of(tool_name: str) -> str:
    """A PermissionRequest for AskUserQuestion is a question; any other is a permission."""
    return QUESTION if tool_name == QUESTION_TOOL else PERMISSION


def insert(conn: sqlite3.Connection, *, session_id: str, kind: str, tool_name: str, tool_input: Any,
           at: float, wait_s: float, questions: Any = None, suggestions: Any = None, tool_use_id: str | None = None,
           gate: str | None = None, on_timeout: str | None = None, host: str = "", agent_id: str | None = None) -> str:
    """Record a pending request (inside the caller's write transaction); its id.

    ``agent_id``: the subagent that asked (None for the main thread), so only its own finished
    tool call withdraws the dialog (sessions.withdraw_dialogs).
    """
    aid = new_id()
    conn.execute(
        "INSERT INTO approvals (id, host, session_id, kind, tool_name, tool_input, tool_use_id, questions,"
        " permission_suggestions, gate, on_timeout, state, created_at, expires_at, agent_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
        (aid, host, session_id, kind, tool_name, _dumps(tool_input, MAX_INPUT_CHARS), tool_use_id,
         _dumps(questions), _dumps(suggestions), gate, on_timeout, at, at + wait_s, agent_id),
    )
    return aid


# A pending row this long past its expiry has no hook waiting on it any more (the hook was killed, the
# server died): it is shown, and refused, as expired, though no one wrote that down.
STALE_AFTER_S = 5.0


def _row(cur: sqlite3.Cursor, row: tuple[Any, ...] | None, raw: bool = False) -> dict[str, Any] | None:
    if row is None:
        return None
    out = dict(zip(COLUMNS, row, strict=True))
    if not raw and out["state"] == PENDING and out["expires_at"] is not None and out["expires_at"] + STALE_AFTER_S < time.time():
        out["state"] = EXPIRED
        out["note"] = out["note"] or "no hook was waiting any more (it was stopped, or its server went away)"
    return out


def get(conn: sqlite3.Connection, approval_id: str, raw: bool = False) -> dict[str, Any] | None:
    """The row with this exact id, or None (``raw``: as stored, a stale pending row not shown as expired)."""
    cur = conn.execute(_SELECT + " WHERE id = ?", (approval_id,))
    return _row(cur, cur.fetchone(), raw)


def find(conn: sqlite3.Connection, ref: str) -> dict[str, Any] | None:
    """The row ``ref`` names: its id, or a unique prefix of at least 4 characters."""
    row = get(conn, ref)
    if row is not None or len(ref) < 4:
        return row
    cur = conn.execute(_SELECT + " WHERE id LIKE ? ESCAPE '\\' LIMIT 2",
                       (ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",))
    rows = cur.fetchall()
    return _row(cur, rows[0]) if len(rows) == 1 else None


def listing(conn: sqlite3.Connection, state: str = PENDING, session_id: str | None = None,
            limit: int = 500) -> list[dict[str, Any]]:
    """Requests, oldest first: pending ones (``state`` "pending"), or every one ("all", newest ``limit``)."""
    where: list[str] = []
    args: list[Any] = []
    if state == PENDING:
        where.append("state = 'pending' AND (expires_at IS NULL OR expires_at > ?)")
        args.append(time.time() - STALE_AFTER_S)
    elif state != "all":
        where.append("state = ?")
        args.append(state)
    if session_id is not None:
        where.append("session_id = ?")
        args.append(session_id)
    sql = _SELECT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY created_at DESC LIMIT ?"
    cur = conn.execute(sql, (*args, limit))
    rows = [_row(cur, r) for r in cur.fetchall()]
    return [r for r in reversed(rows) if r is not None]


def public(row: dict[str, Any], own_host: str) -> dict[str, Any]:
    """A row as ``GET /api/approvals`` and ``approvals --json`` give it (JSON fields decoded)."""
    return {
        "id": row["id"],
        "host": row["host"] or own_host,
        "session_id": row["session_id"],
        # Local sessions' board cards are keyed by their session id (center/fleetdb.py).
        "card": row["session_id"] if not row["host"] else None,
        "kind": row["kind"],
        "tool_name": row["tool_name"],
        "tool_input": _loads(row["tool_input"]),
        "tool_use_id": row["tool_use_id"],
        "questions": _loads(row["questions"]),
        "suggestions": _loads(row["permission_suggestions"]),
        "gate": row["gate"],
        "on_timeout": row["on_timeout"],
        "state": row["state"],
        "created_at": row["created_at"],
        "expires_at": row["expires_at"],
        "answer": None if row["state"] == PENDING else {
            "decision": row["decision"], "message": row["message"], "interrupt": bool(row["interrupt"]),
            "answers": _loads(row["answers"]), "by": row["answered_by"], "via": row["answered_via"],
            "where": row["answered_where"], "at": row["answered_at"], "waited_ms": row["waited_ms"],
            "note": row["note"],
        },
    }


def summary(row: dict[str, Any], limit: int = 120) -> str:
    """'Bash: rm -rf build' / 'question: Which database?' / 'gate push: Bash: git push' on one line."""
    tool_input = _loads(row.get("tool_input"))
    if row["kind"] == QUESTION:
        qs = _loads(row.get("questions")) or []
        texts = [q.get("question", "") for q in qs if isinstance(q, dict)]
        return one_line("question: " + " / ".join(texts), limit)
    shown = ""
    if isinstance(tool_input, dict):
        for key in ("command", "file_path", "url", "pattern", "path", "description"):
            if isinstance(tool_input.get(key), str):
                shown = tool_input[key]
                break
    text = f"{row['tool_name']}: {shown}" if shown else row["tool_name"]
    if row["kind"] == GATE:
        text = f"gate {row['gate']}: {text}"
    return one_line(text, limit)


# -- answers ---------------------------------------------------------------------------


def parse_answers(pairs: list[str]) -> dict[str, str]:
    """``["Q=LABEL", ...]`` -> ``{Q: LABEL}``; a question given twice gets both labels (multi-select)."""
    out: dict[str, str] = {}
    for pair in pairs:
        question, sep, label = pair.partition("=")
        if not sep or not question.strip() or not label.strip():
            raise AnswerError(f"--answer {pair!r}: expected QUESTION=LABEL")
        question, label = question.strip(), label.strip()
        out[question] = f"{out[question]}, {label}" if question in out else label
    return out


def _match_answers(row: dict[str, Any], answers: Any) -> dict[str, str]:
    """The answers keyed by each question's exact text; a question may be named by its text, its
    header or its number (1-based); a label may be any text (free text answers are allowed)."""
    if not isinstance(answers, dict) or not answers:
        raise AnswerError("a question is answered with answers: {question: label} (one or more)")
    questions = [q for q in (_loads(row.get("questions")) or []) if isinstance(q, dict)]
    by_key: dict[str, str] = {}
    for i, q in enumerate(questions, 1):
        text = str(q.get("question", ""))
        by_key.setdefault(text, text)
        by_key.setdefault(text.casefold(), text)
        if q.get("header"):
            by_key.setdefault(str(q["header"]).casefold(), text)
        by_key.setdefault(str(i), text)
    out: dict[str, str] = {}
    for key, label in answers.items():
        if isinstance(label, list) and label and all(isinstance(x, str) for x in label):
            label = ", ".join(label)  # several options of a multiSelect question
        if not isinstance(label, str) or not label.strip():
            raise AnswerError(f"the answer to {key!r} must be a label (text) or a list of labels")
        question = by_key.get(str(key)) or by_key.get(str(key).casefold())
        if question is None:
            known = "; ".join(str(q.get("question", "")) for q in questions) or "none"
            raise AnswerError(f"no question {key!r} in this request (its questions: {known})")
        out[question] = label.strip()
    return out


def check_answer(row: dict[str, Any], decision: str, message: str | None, answers: Any) -> dict[str, str] | None:
    """Refuse an answer that does not fit the request (AnswerError); the answers to store."""
    if decision not in DECISIONS:
        raise AnswerError(f"decision must be one of {', '.join(DECISIONS)}, got {decision!r}")
    if message is not None and not isinstance(message, str):
        raise AnswerError("message must be text")
    if row["kind"] == QUESTION and decision != "deny":
        return _match_answers(row, answers)
    if answers:
        raise AnswerError(f"answers are for questions; this request is a {row['kind']} ({summary(row, 60)})")
    return None


class Answer:
    """What became of an answer to a request.

    ``result``: ``"answered"`` (this answer is the request's), ``"already"`` (answered, withdrawn or
    expired first), ``"unknown"`` (no request has that id) or ``"invalid"`` (the answer does not fit
    the request). ``row`` is the request as it now is (None when unknown or invalid); ``error`` says
    in words why the answer was not applied.
    """

    __slots__ = ("result", "row", "error")

    def __init__(self, result: AnswerResult, row: dict[str, Any] | None = None, error: str | None = None) -> None:
        self.result = result
        self.row = row
        self.error = error

    @property
    def answered(self) -> bool:
        return self.result == "answered"

    def __repr__(self) -> str:
        return f"Answer({self.result!r}, error={self.error!r})"


def answer(conn: sqlite3.Connection, ref: str, decision: str, *, message: str | None = None,
           interrupt: bool = False, answers: Any = None, by: str = "", via: str = "api", where: str = "",
           at: float | None = None, note: str | None = None) -> Answer:
    """Answer a pending request, inside the caller's write transaction. The first answer wins: a
    conditional UPDATE, so a request answered between our read and our write is ``"already"``.
    ``by`` is who answered, as the caller was authenticated; ``note`` a display note kept beside it."""
    at = time.time() if at is None else at
    row = find(conn, ref)
    if row is None:
        return Answer("unknown", error=f"no approval request {ref!r}")
    if row["state"] != PENDING:
        return Answer("already", row, already(row))
    try:
        stored = check_answer(row, decision, message, answers)
    except AnswerError as exc:
        return Answer("invalid", error=str(exc))
    state = DENIED if decision == "deny" else (ANSWERED if row["kind"] == QUESTION else ALLOWED)
    if decision == "deny" and not (message or "").strip():
        message = f"Denied by {by or via}."
    changed = conn.execute(
        "UPDATE approvals SET state = ?, decision = ?, message = ?, interrupt = ?, answers = ?, answered_by = ?,"
        " answered_via = ?, answered_where = ?, answered_at = ?, waited_ms = ?, note = ? WHERE id = ?"
        " AND state = 'pending'",
        (state, decision, (message or None) and message[:MAX_MESSAGE_CHARS], int(bool(interrupt)), _dumps(stored),
         by[:200], via if via in VIAS else "api", where[:200], at, max(0, int((at - row["created_at"]) * 1000)),
         (note or None) and note[:200], row["id"]),
    ).rowcount
    fresh = get(conn, row["id"]) or row
    if not changed:  # another writer got there between our read and our write
        return Answer("already", fresh, already(fresh))
    return Answer("answered", fresh)


def already(row: dict[str, Any]) -> str:
    """'already answered: allowed by uid 1000 (alice) via cli, 12 s after it was asked' and the like."""
    state = row["state"]
    if state == WITHDRAWN:
        return f"already answered at the terminal or gone: {row.get('note') or 'withdrawn'}"
    if state == EXPIRED:
        return f"no longer waiting: {row.get('note') or 'expired'}"
    who = row.get("answered_by") or row.get("answered_via") or "someone"
    waited = row.get("waited_ms")
    after = f", {waited / 1000:.0f} s after it was asked" if isinstance(waited, int) else ""
    return f"already answered: {state} by {who} via {row.get('answered_via') or '?'}{after}"


def settle(conn: sqlite3.Connection, approval_id: str, state: str, note: str, via: str, at: float,
           decision: str | None = None) -> bool:
    """Close a pending request without a person's answer (expired, withdrawn); False when it was answered first."""
    return conn.execute(
        "UPDATE approvals SET state = ?, note = ?, answered_via = ?, answered_by = ?, answered_at = ?,"
        " decision = coalesce(?, decision), waited_ms = CAST((? - created_at) * 1000 AS INTEGER)"
        " WHERE id = ? AND state = 'pending'",
        (state, note, via, "terminal" if via == "terminal" else "agent-hooks", at, decision, at, approval_id),
    ).rowcount > 0


# -- the answer the client reads ---------------------------------------------------------


def permission_decision(row: dict[str, Any]) -> dict[str, Any] | None:
    """PermissionRequest's ``hookSpecificOutput.decision`` for an answered row (None: no decision)."""
    state = row["state"]
    if state == DENIED:
        return {"behavior": "deny", "message": row["message"] or "Denied.", "interrupt": bool(row["interrupt"])}
    if state == ANSWERED:
        tool_input = _loads(row["tool_input"])
        updated = dict(tool_input) if isinstance(tool_input, dict) else {}
        updated["answers"] = _loads(row["answers"]) or {}
        return {"behavior": "allow", "updatedInput": updated}
    if state == ALLOWED:
        decision: dict[str, Any] = {"behavior": "allow"}
        suggestions = _loads(row["permission_suggestions"])
        if row["decision"] == "allow_always" and isinstance(suggestions, list) and suggestions:
            decision["updatedPermissions"] = always_rules(suggestions)
        return decision
    return None


def always_rules(suggestions: list[Any]) -> list[Any]:
    """What the dialog's own "Yes, and always allow..." applies: the suggested rules and directories.

    A ``setMode`` suggestion is its own choice in the dialog ("switch to auto mode"), which changes
    how the whole session is asked, not this call: it is left out unless it is all there is.
    """
    rules = [s for s in suggestions if not (isinstance(s, dict) and s.get("type") == "setMode")]
    return rules or list(suggestions)


def gate_outcome(row: dict[str, Any], hold: Hold) -> Outcome:
    """PreToolUse's answer for a gated call once it is answered or timed out."""
    base = hold.base or Outcome()
    state = row["state"]
    if state == DENIED:
        out = Outcome()
        who = row.get("answered_by") or row.get("answered_via") or "a person"
        out.deny(f"Approval gate {hold.gate!r}: denied by {who}: {row['message'] or 'no reason given'}")
        if row.get("interrupt"):  # deny and stop the turn: the person takes it from here
            out.stop_reason = f"Approval gate {hold.gate!r}: denied and stopped by {who}: {row['message'] or ''}"
        return out
    if state == EXPIRED and row.get("decision") == "deny":
        out = Outcome()
        out.deny(row.get("note") or f"Approval gate {hold.gate!r}: nobody answered; denied")
        return out
    if state == EXPIRED:
        base.add_context(row.get("note") or f"Approval gate {hold.gate!r}: nobody answered; allowed")
    return base


def timeout_note(hold: Hold) -> str:
    if hold.kind == GATE:
        verb = "allowed" if hold.on_timeout == "allow" else "denied"
        return (f"Approval gate {hold.gate!r}: nobody answered within {hold.timeout_s:g} s, so the call is {verb}"
                + (" (the gate's on_timeout)." if verb == "allowed" else
                   ". Do not retry it unattended; ask the person who set the gate."))
    return "nobody answered here before the hook stopped waiting; the client's own dialog stays open"


def conclude(conn: sqlite3.Connection, hold: Hold, gone: str | None = None, at: float | None = None,
             write: Any = None, why: str | None = None) -> Outcome | None:
    """The answer to give once the wait is over: answered, timed out, or (``gone``) the client stopped waiting.

    A pending row is closed here (expired, or withdrawn with ``gone`` as its note) by a conditional
    UPDATE; if an answer landed first, that answer is given.
    """
    at = time.time() if at is None else at
    row = get(conn, hold.approval_id, raw=True)  # the hook itself is waiting: as stored
    if row is None:
        return hold.base
    if row["state"] == PENDING:
        if gone is not None:
            state, note, via, decision = WITHDRAWN, gone, "terminal", None
        else:
            state, note, via = EXPIRED, (why + "; " if why else "") + timeout_note(hold), "timeout"
            decision = hold.on_timeout if hold.kind == GATE else None
        with _writing(conn, write):
            settle(conn, hold.approval_id, state, note, via, at, decision)
        row = get(conn, hold.approval_id, raw=True) or row
    if hold.kind == GATE:
        out = gate_outcome(row, hold)
        if out.deny_reason is not None and row.get("tool_use_id"):
            # On the call's row too: it was denied, not run (the loop history skips it).
            with _writing(conn, write):
                _call_denied(conn, row, f"gate:{row.get('gate')}", out.deny_reason,
                             "tool_use_id = ?", (row["tool_use_id"],))
        return out
    if gone is not None:
        return None
    permission = permission_decision(row)
    if permission is None:
        return None
    if permission["behavior"] == "deny":
        # The dialog's call never runs and no later hook says so: its row says denied (not "allow
        # pending"), and the session's denied count includes it. PermissionRequest carries no
        # tool_use_id: the asking thread's newest open call of that tool is the one asked about.
        with _writing(conn, write):
            _call_denied(conn, row, "person", permission["message"],
                         "id = (SELECT max(id) FROM tool_calls WHERE session_id = ? AND tool_name = ?"
                         " AND agent_id IS (SELECT agent_id FROM approvals WHERE id = ?) AND outcome = 'pending')",
                         (row["session_id"], row["tool_name"], hold.approval_id))
    out = Outcome()
    out.permission = permission
    return out


def _call_denied(conn: sqlite3.Connection, row: dict[str, Any], rule: str, reason: str, where: str,
                 args: tuple[Any, ...]) -> None:
    """Mark the tool call a person denied (``where``/``args`` find its row in the session) as denied,
    once, and count it in the session's denied total."""
    done = conn.execute(f"UPDATE tool_calls SET outcome = 'denied', decision = 'deny', rule = ?, reason = ?"
                        f" WHERE session_id = ? AND outcome != 'denied' AND {where}",
                        (rule, (reason or "denied")[:2000], row["session_id"], *args)).rowcount
    if done:
        conn.execute("UPDATE sessions SET guard_denied = guard_denied + ? WHERE session_id = ?",
                     (done, row["session_id"]))


def _writing(conn: sqlite3.Connection, write: Any) -> Any:
    """A write transaction: the caller's (the server's, under its write lock), else BEGIN IMMEDIATE here."""
    if write is not None:
        return write()
    from agent_hooks.store import Transaction

    return Transaction(conn)


# -- waiting on the store (the command transport) -----------------------------------------


def wait_local(conn: sqlite3.Connection, hold: Hold, poll_s: float = POLL_S, stop: Any = None) -> str:
    """Wait until the row is no longer pending or the hold expires: "answered" or "timeout".

    One ``PRAGMA data_version`` per poll (it moves only when another connection commits), and a
    read of the row only then. ``stop()`` returning a note ends the wait early ("gone").
    """
    version = None
    while True:
        v = conn.execute("PRAGMA data_version").fetchone()[0]
        if v != version:
            version = v
            row = conn.execute("SELECT state FROM approvals WHERE id = ?", (hold.approval_id,)).fetchone()
            if row is None or row[0] != PENDING:
                return "answered"
        if stop is not None and stop():
            return "gone"
        left = hold.left_s()
        if left <= 0:
            return "timeout"
        time.sleep(min(poll_s, left))


def _client_gone_probe() -> Any:
    """A function saying why the client stopped waiting (None while it waits): our parent process
    changed (the client exited) or the pipe our answer goes out on was closed by its reader."""
    import select

    parent = os.getppid()
    poller = None
    try:
        if not os.isatty(1):
            poller = select.poll()
            poller.register(1, select.POLLERR | select.POLLHUP)
    except (OSError, ValueError):
        poller = None

    def gone() -> str | None:
        if os.getppid() != parent:
            return "the client exited while the request was open"
        if poller is not None:
            try:
                if poller.poll(0):
                    return "the client stopped reading the hook's answer (answered at the terminal)"
            except (OSError, ValueError):
                return None
        return None

    return gone


def hold_command(store_path: str, busy_timeout_ms: int, hold: Hold) -> Outcome | None:
    """The command transport's wait: poll the row on a connection of its own, then conclude.

    SIGTERM, SIGHUP and SIGINT (what a client may send a hook it no longer needs) end the wait
    with the request withdrawn, so it leaves every board at once.
    """
    import signal

    conn = sqlite3.connect(store_path, timeout=busy_timeout_ms / 1000, isolation_level=None)
    stopped: list[str] = []

    def on_signal(signum: int, frame: Any) -> None:
        stopped.append(f"the client stopped the hook (signal {signal.Signals(signum).name}): answered at the terminal")
        raise _Stopped()

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            previous[sig] = signal.signal(sig, on_signal)
        except (ValueError, OSError):  # not the main thread (in-process tests)
            pass
    probe = _client_gone_probe()
    why = None
    try:
        try:
            how = wait_local(conn, hold, stop=lambda: (stopped[0] if stopped else None) or probe())
            if how == "gone":
                why = stopped[0] if stopped else probe()
        except _Stopped:
            why = stopped[0]
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if why else handler)
        return conclude(conn, hold, gone=why)
    finally:
        conn.close()


class _Stopped(Exception):
    pass


def gate_call(ctx: Any, out: Outcome) -> Outcome:
    """PreToolUse after the guards and handlers let a call through: hold it if a gate matches.

    A malformed gate is skipped with a line in the error log (doctor shows it); the others still hold.
    """
    from agent_hooks import fleet
    from agent_hooks.features import gates, sessions

    p = ctx.payload
    found, problems = gates.compiled(ctx.config)
    if problems:
        from agent_hooks.dispatch import log_error

        log_error(ctx.paths, "PreToolUse", "config", "approval gates skipped: " + "; ".join(problems),
                  p.session_id, config=ctx.config)
    if not found:
        return out
    who = {"task": sessions.task_id(ctx.env), "agent": sessions.agent_name(ctx.env, ctx.config),
           "role": sessions.role(ctx.env, ctx.config), "host": fleet.host_name(ctx.config)}
    gate = gates.first_match(found, p.tool_name, p.tool_input, who)
    if gate is None:
        return out
    at = time.time()
    with ctx.store.write() as conn:
        aid = insert(conn, session_id=p.session_id, kind=GATE, tool_name=p.tool_name, tool_input=p.tool_input,
                     at=at, wait_s=gate.timeout_s, tool_use_id=p.tool_use_id, gate=gate.name,
                     on_timeout=gate.on_timeout)
    held = Outcome()
    held.hold = Hold(aid, GATE, at + gate.timeout_s, "PreToolUse", base=out, gate=gate.name,
                     on_timeout=gate.on_timeout, timeout_s=gate.timeout_s)
    return held
