"""Persistence: Stop holds a worker while its task persists and is open, bounded, with every bypass.

oh-my-claudecode's persistent-mode continues an agent from its Stop
hook, checks its bypasses first, and adds session isolation, staleness and
circuit breakers, because a Stop hook that blocks wrongly deadlocks the
client. Here the goal is the task in the shared store (a lead assigns it and
can see it), and only the sessions working on it are held.

Order of the checks (the first that applies wins; each is recorded with its
reason on the session and the task, and in the session journal):

1. the task is cancelled, done or blocked (or the session itself was cancelled), or its money
   budget (``task budget``) is spent;
2. ``stop_hook_active`` and this session's chain of holds reached its limit
   (the budget, and always below the client's own ``CLAUDE_CODE_STOP_HOOK_BLOCK_CAP``);
3. the task's continuation budget is spent;
4. the context is nearly full (the transcript's latest usage): let compaction happen;
5. the user interrupted the turn;
6. the turn ended on an API error (rate limit, auth, overload);
7. the task is stale: no progress, prompt or tool call for ``persist.stale_after_s``;
8. the session is a lead's.

Otherwise Stop blocks with a reason that names the task, its latest progress
and exactly how to finish. :func:`decide` is pure; :func:`read` and
:func:`record` are the store's edges; :func:`transcript_state` the file's.
"""

from __future__ import annotations

import json
import sqlite3

from agent_hooks.output import one_line

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

HOLD = "hold"
# Bypass kinds, in the order they are checked.
CANCELLED, DONE, BLOCKED = "cancelled", "done", "blocked"
STOP_HOOK_ACTIVE, BUDGET, CONTEXT, INTERRUPT, API_ERROR, STALE, LEAD = (
    "stop_hook_active", "budget", "context", "interrupt", "api_error", "stale", "lead")
SPENT = "spent"  # the task's money budget (features/budget.py), not its continuation budget
BYPASSES = (CANCELLED, DONE, BLOCKED, SPENT, STOP_HOOK_ACTIVE, BUDGET, CONTEXT, INTERRUPT, API_ERROR, STALE, LEAD)

CLIENT_CAP_VAR = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"
CLIENT_CAP_DEFAULT = 8
INTERRUPT_PREFIX = "[Request interrupted by user"
API_ERROR_PREFIX = "API Error"
ONE_M_SUFFIX = "[1m]"


class Snapshot:
    """What the decision needs about a session and its task (one read, see :func:`read`)."""

    __slots__ = ("session_id", "role", "session_cancelled", "task_id", "task_state", "persist",
                 "max_continuations", "continuations", "description", "progress", "task_updated_at",
                 "chain", "first_seen_at", "last_tool_at", "last_prompt_at", "waiting_on", "waiting_since",
                 "budget_usd", "spent_usd")

    def __init__(self, *, session_id: str, task_id: str, role: str | None = None, session_cancelled: bool = False,
                 task_state: str = "open", persist: int | None = None, max_continuations: int | None = None,
                 continuations: int = 0, description: str | None = None, progress: str | None = None,
                 task_updated_at: float | None = None, chain: int = 0, first_seen_at: float | None = None,
                 last_tool_at: float | None = None, last_prompt_at: float | None = None,
                 waiting_on: str | None = None, waiting_since: float | None = None,
                 budget_usd: float | None = None, spent_usd: float = 0.0) -> None:
        self.session_id = session_id
        self.role = role
        self.session_cancelled = session_cancelled
        self.task_id = task_id  # read() gives no snapshot for a session without a (recorded) task
        self.task_state = task_state
        self.persist = persist  # the task's column; None: the [persist] default (enabled_for)
        self.max_continuations = max_continuations  # None: the [persist] default (budget_of)
        self.continuations = continuations
        self.description = description
        self.progress = progress
        self.task_updated_at = task_updated_at
        self.chain = chain
        self.first_seen_at = first_seen_at
        self.last_tool_at = last_tool_at
        self.last_prompt_at = last_prompt_at
        self.waiting_on = waiting_on
        self.waiting_since = waiting_since
        self.budget_usd = budget_usd
        self.spent_usd = spent_usd

    def last_activity(self) -> float | None:
        """The newest of: task progress, the session's last tool call or prompt, its start."""
        times = [t for t in (self.task_updated_at, self.last_tool_at, self.last_prompt_at, self.first_seen_at)
                 if t is not None]
        return max(times) if times else None


class Decision:
    """``kind`` is HOLD or a bypass; ``reason`` is the model's instruction (hold) or the record (bypass)."""

    __slots__ = ("kind", "reason", "used", "budget", "chain")

    def __init__(self, kind: str, reason: str, used: int = 0, budget: int = 0, chain: int = 0) -> None:
        self.kind = kind
        self.reason = reason
        self.used = used
        self.budget = budget
        self.chain = chain  # consecutive holds of the session after this decision

    @property
    def hold(self) -> bool:
        return self.kind == HOLD

    def __repr__(self) -> str:
        return f"Decision({self.kind!r}, {self.reason!r})"


class TranscriptState:
    """From the transcript's tail: context used, and how the turn ended."""

    __slots__ = ("context_pct", "tokens", "window", "interrupted", "api_error", "answer")

    def __init__(self, context_pct: float | None = None, tokens: int | None = None, window: int | None = None,
                 interrupted: bool = False, api_error: str | None = None, answer: str | None = None) -> None:
        self.context_pct = context_pct
        self.tokens = tokens
        self.window = window
        self.interrupted = interrupted
        self.api_error = api_error
        self.answer = answer  # the text of the newest assistant line (None: no assistant line yet)

    def shows(self, last_assistant_message: str) -> bool:
        """Whether the transcript has caught up with the turn that Stop reports."""
        want, have = last_assistant_message.strip(), (self.answer or "").strip()
        return bool(have) and (have in want or want in have)


def enabled_for(task_persist: int | None, config: dict[str, Any]) -> bool:
    """Whether a task with this ``persist`` column persists (NULL: the ``[persist] default``)."""
    cfg = config["persist"]
    if not cfg.get("enabled", True):
        return False
    return bool(cfg.get("default", False)) if task_persist is None else bool(task_persist)


def budget_of(snap: Snapshot, config: dict[str, Any]) -> int:
    value = snap.max_continuations if snap.max_continuations is not None else config["persist"]["max_continuations"]
    return max(0, int(value))


def chain_limit(budget: int, env: Any) -> int:
    """Consecutive holds allowed: the budget, and below the client's own cap (0 there = no cap)."""
    try:
        cap = int(env.get(CLIENT_CAP_VAR) or CLIENT_CAP_DEFAULT)
    except ValueError:
        cap = CLIENT_CAP_DEFAULT
    return min(budget, cap - 1) if cap > 0 else budget


def read(conn: sqlite3.Connection, session_id: str) -> Snapshot | None:
    """The session and its task; None when the session has no task (nothing to hold)."""
    row = conn.execute(
        "SELECT s.role, s.cancelled_at, s.task_id, t.state, t.persist, t.max_continuations,"
        " coalesce(t.continuations, 0), t.description, t.progress, t.updated_at, coalesce(s.persist_chain, 0),"
        " s.first_seen_at, s.waiting_on, s.waiting_since, t.budget_usd, coalesce(t.spent_usd, 0),"
        " t.task_id IS NOT NULL"
        " FROM sessions s LEFT JOIN tasks t ON t.task_id = s.task_id WHERE s.session_id = ?",
        (session_id,),
    ).fetchone()
    # A task id nobody recorded (a typo in $AGENT_HOOKS_TASK_ID): `task done` cannot end it and its
    # budget cannot be counted, so holding would block every turn with no way out.
    if row is None or not row[2] or not row[-1]:
        return None
    last_tool = conn.execute(
        "SELECT started_at FROM tool_calls WHERE session_id = ? ORDER BY id DESC LIMIT 1", (session_id,)
    ).fetchone()
    last_prompt = conn.execute(
        "SELECT at FROM session_events WHERE session_id = ? AND event = 'UserPromptSubmit' ORDER BY id DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    (role, s_cancelled, task_id, state, persist, max_cont, used, description, progress, updated_at, chain,
     first_seen, waiting_on, waiting_since, budget_usd, spent_usd, _) = row
    return Snapshot(session_id=session_id, role=role, session_cancelled=s_cancelled is not None, task_id=task_id,
                    task_state=state or "open", persist=persist, max_continuations=max_cont,
                    continuations=int(used), description=description, progress=progress,
                    task_updated_at=updated_at, chain=int(chain), first_seen_at=first_seen,
                    last_tool_at=last_tool[0] if last_tool else None,
                    last_prompt_at=last_prompt[0] if last_prompt else None,
                    waiting_on=waiting_on, waiting_since=waiting_since, budget_usd=budget_usd,
                    spent_usd=spent_usd)


def decide(snap: Snapshot, config: dict[str, Any], env: Any, now: float, stop_hook_active: bool,
           seen: TranscriptState, last_message: str = "") -> Decision | None:
    """Hold or let go (with the bypass and its reason); None when the task does not persist. Pure."""
    if not enabled_for(snap.persist, config):
        return None
    cfg = config["persist"]
    task = snap.task_id
    budget = budget_of(snap, config)
    used = snap.continuations
    chain = snap.chain if stop_hook_active else 0

    def let_go(kind: str, why: str) -> Decision:
        return Decision(kind, why, used, budget)

    if snap.task_state in (CANCELLED, DONE, BLOCKED):
        return let_go(snap.task_state, f"task {task} is {snap.task_state}")
    if snap.session_cancelled:
        return let_go(CANCELLED, "the session was cancelled")
    if snap.budget_usd and (snap.spent_usd or 0) >= snap.budget_usd:
        return let_go(SPENT, f"task {task}'s budget of ${snap.budget_usd:.2f} is spent (${snap.spent_usd:.2f})")
    limit = chain_limit(budget, env)
    if stop_hook_active and chain >= limit:
        return let_go(STOP_HOOK_ACTIVE, f"held {chain} {'time' if chain == 1 else 'times'} in a row, the most"
                                        f" allowed in a row ({limit}, below the client's own cap); its next"
                                        " turn may be held again")
    if used >= budget:
        return let_go(BUDGET, f"continuation budget spent ({used} of {budget})")
    stop_pct = float(cfg["context_stop_pct"])
    if seen.context_pct is not None and seen.context_pct >= stop_pct:
        return let_go(CONTEXT, f"context {seen.context_pct:.0f}% full (>= {stop_pct:g}%): let compaction happen")
    if seen.interrupted:
        return let_go(INTERRUPT, "the user interrupted the turn")
    api_error = seen.api_error or (snap.waiting_on == "error" and "error") or (
        last_message.startswith(API_ERROR_PREFIX) and one_line(last_message, 80))
    if api_error:
        return let_go(API_ERROR, f"the turn ended on an API error ({api_error})")
    stale_after = float(cfg["stale_after_s"])
    active = snap.last_activity()
    if stale_after > 0 and active is not None and now - active > stale_after:
        return let_go(STALE, f"stale: no progress, prompt or tool call for {int(now - active)} s"
                             f" (> {int(stale_after)} s)")
    if (snap.role or "") == "lead":
        return let_go(LEAD, "a lead's session is never held")
    return Decision(HOLD, hold_reason(snap, used + 1, budget), used + 1, budget, chain + 1)


def shell_word(text: str) -> str:
    """``text`` as one shell word the model can paste into a command, quoted the way the
    guards' exemptions for `task done` / `task blocked` / `task progress` recognise
    (features/cancellation.py): bare, in single quotes, else in double quotes."""
    if text and all(c.isalnum() or c in "_.:@-" for c in text):
        return text
    if "'" not in text:
        return f"'{text}'"
    if not any(c in text for c in '"$`\\'):
        return f'"{text}"'
    import shlex

    return shlex.quote(text)  # still one word; no exemption matches it


def hold_reason(snap: Snapshot, n: int, budget: int) -> str:
    """What the model reads when Stop is blocked: the task, its progress, how to finish."""
    task = shell_word(snap.task_id)
    what = one_line(snap.description, 600) or "(no description recorded)"
    progress = one_line(snap.progress, 600) or "none recorded yet"
    return (
        f"Your task {task} is still open (agent-hooks persistence, continuation {n} of {budget}), so do not stop"
        f" yet. Task: {what} Latest progress: {progress}. Carry on with the work. When it is finished, run"
        f" exactly: agent-hook task done {task} --note '<what you did>'. If you cannot finish it, run:"
        f" agent-hook task blocked {task} '<why>'. Either command ends the task; then you may stop."
    )


# Why a session was let go, in a person's words (the record keeps the kind for scripts and tests).
_LET_GO = {CANCELLED: "cancelled", DONE: "the task is done", BLOCKED: "the task is blocked",
           STOP_HOOK_ACTIVE: "held too often in a row", BUDGET: "its budget is spent",
           SPENT: "its money budget is spent",
           CONTEXT: "its context is nearly full", INTERRUPT: "a person interrupted it",
           API_ERROR: "an API error", STALE: "no progress", LEAD: "a lead's session"}


def let_go_label(record_text: str | None) -> str | None:
    """Why a recorded bypass let the session stop, in a few words (None for a hold or nothing)."""
    if not record_text or not record_text.startswith("bypass "):
        return None
    return _LET_GO.get(record_text[7:].partition(":")[0])


def for_person(record_text: str | None) -> str | None:
    """A recorded decision (``held 2/5``, ``bypass budget: ...``) as a person reads it:
    ``held at Stop (continuation 2 of 5)``, ``let go, allowed to stop (its budget is spent): ...``."""
    if not record_text:
        return None
    if record_text.startswith("held "):
        used, _, budget = record_text[5:].partition("/")
        return f"held at Stop (continuation {used} of {budget})" if budget else record_text
    if record_text.startswith("bypass "):
        kind, _, why = record_text[7:].partition(": ")
        label = _LET_GO.get(kind)
        if label is not None:
            return f"let go, allowed to stop ({label}): {why}" if why else f"let go, allowed to stop ({label})"
    return record_text


def record(conn: sqlite3.Connection, snap: Snapshot, decision: Decision, at: float,
           context_pct: float | None = None) -> None:
    """Write the decision: a hold counts a continuation; a bypass is kept with its reason."""
    if context_pct is not None:
        conn.execute("UPDATE sessions SET context_pct = ? WHERE session_id = ?", (context_pct, snap.session_id))
    if decision.hold:
        conn.execute("UPDATE tasks SET continuations = coalesce(continuations, 0) + 1 WHERE task_id = ?",
                     (snap.task_id,))
        text = f"held {decision.used}/{decision.budget}"
    else:
        text = f"bypass {decision.kind}: {decision.reason}"
        conn.execute("UPDATE tasks SET last_bypass = ?, last_bypass_at = ? WHERE task_id = ?",
                     (text, at, snap.task_id))
    conn.execute("UPDATE sessions SET persist_chain = ?, persist_last = ?, persist_last_at = ? WHERE session_id = ?",
                 (decision.chain, text, at, snap.session_id))
    conn.execute("INSERT INTO session_events (session_id, event, detail, at) VALUES (?, 'Stop', ?, ?)",
                 (snap.session_id, f"persist.{decision.kind}: {one_line(decision.reason, 300)}", at))


# -- the transcript's tail ----------------------------------------------------------------------

def _window(model: str | None, config: dict[str, Any]) -> int:
    if isinstance(model, str) and model.endswith(ONE_M_SUFFIX):
        return 1_000_000
    return max(1, int(config["persist"]["context_window_tokens"]))


def _entries_newest_first(lines: list[bytes], max_line_bytes: int) -> Iterator[dict[str, Any]]:
    """Parsed JSON objects, newest line first; parsing stops where the caller stops (lazy)."""
    for line in reversed(lines):
        if not line.strip() or len(line) > max_line_bytes:
            continue
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError):  # a line nested too deep is skipped too
            continue
        if isinstance(obj, dict):
            yield obj


def _texts(entry: dict[str, Any]) -> list[str]:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):  # a line of another shape: no text (never an error at Stop)
        return []
    return [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]


def scan(entries_newest_first: Iterable[dict[str, Any]], config: dict[str, Any]) -> TranscriptState:
    """Latest usage, interrupt and API error from transcript entries, newest first. Pure.

    Stops at the newest real model answer (its usage is how full the context is);
    user lines after the last assistant line tell whether the user interrupted.
    """
    state = TranscriptState()
    seen_assistant = False
    for entry in entries_newest_first:
        if entry.get("isSidechain"):
            continue
        kind = entry.get("type")
        if kind == "user" and not seen_assistant:
            if any(t.startswith(INTERRUPT_PREFIX) for t in _texts(entry)):
                state.interrupted = True
            continue
        message = entry.get("message")
        if kind != "assistant" or not isinstance(message, dict):
            continue
        if not seen_assistant:
            state.answer = "\n".join(_texts(entry))
            if entry.get("isApiErrorMessage"):
                state.api_error = str(entry.get("error") or entry.get("apiErrorType") or "api error")
        seen_assistant = True
        usage = message.get("usage")
        # Synthetic messages (API errors, local notes) carry zeros: look further back.
        if message.get("model") == "<synthetic>" or not isinstance(usage, dict):
            continue
        tokens = 0
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens"):
            value = usage.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                tokens += int(value)
        window = _window(message.get("model"), config)
        state.tokens, state.window = tokens, window
        state.context_pct = round(100.0 * tokens / window, 1)
        break
    return state


def transcript_state(path: str | None, env: Any, config: dict[str, Any], tail_bytes: int | None = None,
                     answer: str = "", wait_s: float = 0.0) -> TranscriptState:
    """:func:`scan` over the transcript's last ``persist.tail_bytes`` (a safe path only).

    Claude Code writes the turn's last line (with its usage) asynchronously, and may run Stop
    before it lands, or before the transcript file exists at all (a session's first turn).
    Given the turn's ``answer`` (Stop's ``last_assistant_message``), the tail is read again,
    for up to ``wait_s``, until it shows that answer; then it is what it is.
    """
    import time

    from agent_hooks.features import transcript

    real = transcript.safe_path(path or "", env, config)
    if real is None:
        return TranscriptState()
    until = time.monotonic() + wait_s
    while True:
        try:
            data, _ = transcript.read_tail(real, int(tail_bytes or config["persist"]["tail_bytes"]))
        except FileNotFoundError:
            data = b""  # not written yet: waited for like a missing line
        except OSError:
            return TranscriptState()
        state = scan(_entries_newest_first(data.split(b"\n"), int(config["transcript"]["max_line_bytes"])), config)
        if not answer.strip() or state.shows(answer) or time.monotonic() >= until:
            return state
        time.sleep(0.01)


# -- context pressure (PostToolUse) -------------------------------------------------------------

PRESSURE_TAIL_BYTES = 65536


def pressure_candidate(conn: sqlite3.Connection, session_id: str) -> str | None:
    """The session's task when it has one and was not told yet (a primary-key read)."""
    row = conn.execute(
        "SELECT task_id FROM sessions WHERE session_id = ? AND task_id IS NOT NULL AND pressure_noticed_at IS NULL",
        (session_id,),
    ).fetchone()
    return row[0] if row else None


def pressure_notice(task_id: str, pct: float) -> str:
    return (f"Context pressure (agent-hooks): this session's context is {pct:.0f}% full, and compaction may come"
            f" soon. Save your progress on the task now, so it survives: run agent-hook task progress"
            f" {shell_word(task_id)} '<what is done, what is next>'.")


def note_pressure(conn: sqlite3.Connection, session_id: str, pct: float, at: float) -> bool:
    """Mark the notice given (True once: concurrent hooks cannot both give it)."""
    return conn.execute(
        "UPDATE sessions SET pressure_noticed_at = ?, context_pct = ? WHERE session_id = ? AND pressure_noticed_at IS NULL",
        (at, pct, session_id),
    ).rowcount > 0


def reset_pressure(conn: sqlite3.Connection, session_id: str) -> None:
    """After a compaction the context is small again: the next crossing gets its own notice."""
    conn.execute("UPDATE sessions SET pressure_noticed_at = NULL WHERE session_id = ?", (session_id,))
