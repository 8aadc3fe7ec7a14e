"""Budgets as guards: once a budget is spent, PreToolUse denies every tool call.

Budgets: a task's (``task create --budget-usd`` / ``task budget``), and from
``[budgets]``: ``session_usd`` per session, ``daily_usd`` for the host, and
``agents.NAME.daily_usd`` per agent (local days). Spend is the running totals
features/cost.py keeps (the session's row, the task's row, the day's rows):
the check reads rows, never the transcript.

Budgets that hold fleet-wide come from the command center (center/ledger.py) into
``fleet_budgets``: a task's, an agent's, this host's, each with what the rest of
the fleet spent against it (``elsewhere_usd``); this host adds its own spend. When
the command center has not answered for ``budgets.offline_after_s``, they still
apply as last known, and the reason says so. At ``notice_pct`` of a budget the
agent is told once (per budget and amount) what is left. The order of the
guards stays: cancellation, then budgets, then loops and polling.
"""

from __future__ import annotations

import sqlite3

from agent_hooks.features.verdict import DENY, WARN, Verdict

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RULE = "budget"


class Budget:
    """One budget that applies to the session: what it is, its limit, what is spent, how to raise it."""

    __slots__ = ("kind", "name", "limit", "spent", "raise_with", "note")

    def __init__(self, kind: str, name: str, limit: float, spent: float, raise_with: str, note: str = "") -> None:
        self.kind, self.name, self.limit, self.spent, self.raise_with = kind, name, limit, spent, raise_with
        self.note = note  # said after the reason: e.g. that the command center is out of reach

    @property
    def key(self) -> str:
        """Noticed once per budget and amount: a raised budget is noticed again."""
        return f"{self.kind}={self.limit:g}"


def read(conn: sqlite3.Connection, session_id: str, config: dict[str, Any], now: float) -> tuple[list[Budget], str]:
    """The budgets that apply to the session, with their spend, and the notices already given.

    One primary-key read, plus one indexed row per configured daily budget."""
    row = conn.execute(
        "SELECT coalesce(s.cost_usd, 0), s.agent, s.task_id, t.budget_usd, coalesce(t.spent_usd, 0),"
        " coalesce(s.cost_noticed, '') FROM sessions s LEFT JOIN tasks t ON t.task_id = s.task_id"
        " WHERE s.session_id = ?", (session_id,)).fetchone()
    if row is None:
        return [], ""
    session_usd, agent, task_id, task_budget, task_spent, noticed = row
    cfg = config["budgets"]
    budgets: list[Budget] = []
    agents = cfg.get("agents") if isinstance(cfg.get("agents"), dict) else {}
    agent_cfg = agents.get(agent) if agent else None
    # A malformed entry (config validation names it) is no budget, never an error on every tool call.
    agent_daily = _usd(agent_cfg.get("daily_usd")) if isinstance(agent_cfg, dict) else 0.0
    fleet = _fleet(conn, task_id, agent)
    if fleet:
        covered = _fleet_budgets(conn, fleet, budgets, agent, config, now)
        if ("task", float(task_budget or 0)) in covered:
            task_budget = None  # the command center's count of the same budget (its own copy, on the center)
        if ("agent", agent_daily) in covered:
            agent_daily = 0.0
    if task_budget:
        budgets.append(Budget("task", f"task {task_id}'s budget", float(task_budget), float(task_spent),
                              f"agent-hook task budget {_word(task_id)} <USD>"))
    if float(cfg["session_usd"]) > 0:
        budgets.append(Budget("session", "the session budget (budgets.session_usd)", float(cfg["session_usd"]),
                              float(session_usd), "a higher budgets.session_usd in the agent-hooks configuration"))
    if float(cfg["daily_usd"]) > 0 or agent_daily > 0:
        from agent_hooks.features.cost import day_of

        day = day_of(now)
        if float(cfg["daily_usd"]) > 0:
            budgets.append(Budget("host", "this host's daily budget (budgets.daily_usd)", float(cfg["daily_usd"]),
                                  _daily(conn, day, ""), "a higher budgets.daily_usd in the agent-hooks configuration"))
        if agent_daily > 0:
            budgets.append(Budget("agent", f"agent {agent}'s daily budget (budgets.agents.{agent}.daily_usd)",
                                  agent_daily, _daily(conn, day, agent),
                                  f"a higher budgets.agents.{agent}.daily_usd in the agent-hooks configuration"))
    return budgets, noticed


def _fleet(conn: sqlite3.Connection, task_id: str | None, agent: str | None) -> list[Any]:
    """The fleet-wide budgets that may apply: the task's, the agent's, this host's (one indexed read)."""
    try:
        return conn.execute(
            "SELECT kind, key, name, limit_usd, elsewhere_usd, day FROM fleet_budgets WHERE (kind = 'task' AND key = ?)"
            " OR (kind = 'agent' AND key = ?) OR kind = 'host'", (task_id or "", agent or "")).fetchall()
    except sqlite3.OperationalError:  # a store from before fleet budgets
        return []


def _fleet_budgets(conn: sqlite3.Connection, rows: list[Any], budgets: list[Budget], agent: str | None,
                   config: dict[str, Any], now: float) -> set[tuple[str, float]]:
    """Add the fleet-wide budgets (this host's spend + the rest of the fleet's); returns (kind, limit) of each."""
    from agent_hooks.features.cost import day_of

    today = day_of(now)
    note = _offline_note(conn, config, now)
    covered: set[tuple[str, float]] = set()
    for kind, key, name, limit, elsewhere, day in rows:
        limit, elsewhere = float(limit), float(elsewhere)
        if kind == "task":
            # This host's sessions of the task (whether or not it has the task's row), and the fleet's.
            mine = conn.execute("SELECT coalesce(sum(cost_usd), 0) FROM sessions WHERE task_id = ?", (key,)).fetchone()
            spent = float(mine[0]) + elsewhere
            raise_with = f"agent-hook task budget {_word(key)} <USD> on the command center"
        elif kind == "agent" and agent:
            spent = _daily(conn, today, agent) + (elsewhere if day == today else 0.0)
            raise_with = f"a higher budgets.agents.{agent}.daily_usd in the command center's configuration"
        elif kind == "host":
            spent = _daily(conn, today, "") + (elsewhere if day == today else 0.0)
            raise_with = f"a higher budgets.hosts.{key}.daily_usd in the command center's configuration"
        else:
            continue
        budgets.append(Budget(f"fleet.{kind}", name, limit, spent, raise_with, note))
        covered.add((kind, limit))
    return covered


def _offline_note(conn: sqlite3.Connection, config: dict[str, Any], now: float) -> str:
    """What the reason adds when this host has not heard from its command center lately ('' when it has)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'fleet.budgets.sync'").fetchone()
    if row is None:
        return ""
    import json

    try:
        sync = json.loads(row[0])
    except ValueError:
        return ""
    if not isinstance(sync, dict) or sync.get("local"):
        return ""  # this host is the command center
    ok_at, failed_at = sync.get("ok_at"), sync.get("failed_at")
    stale = float(config["budgets"].get("offline_after_s") or 90.0)
    if not failed_at and isinstance(ok_at, (int, float)) and now - ok_at < stale:
        return ""
    import time

    since = failed_at if isinstance(failed_at, (int, float)) else ok_at
    known = time.strftime("%H:%M:%S", time.localtime(ok_at)) if isinstance(ok_at, (int, float)) else "an earlier time"
    when = f" since {time.strftime('%H:%M:%S', time.localtime(since))}" if isinstance(since, (int, float)) else ""
    return (f" This host cannot reach its command center ({sync.get('center') or 'unknown'}){when}: it applies"
            f" the fleet-wide budget as last known at {known}.")


def _usd(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and value > 0:
        return float(value)
    return 0.0


def _word(text: str) -> str:
    """The task id as one shell word; as persist.shell_word quotes it, without importing persist
    (about 3 ms on PreToolUse, which does not otherwise load it) for the rare id that needs quoting."""
    if text and all(c.isalnum() or c in "_.:@-" for c in text):
        return text
    from agent_hooks.features.persist import shell_word

    return shell_word(text)


def _daily(conn: sqlite3.Connection, day: str, agent: str) -> float:
    row = conn.execute("SELECT usd FROM cost_daily WHERE day = ? AND agent = ?", (day, agent)).fetchone()
    return float(row[0]) if row else 0.0


def decide(budgets: list[Budget], noticed: str, config: dict[str, Any]) -> tuple[Verdict | None, list[str]]:
    """A deny when a budget is spent, else a warning for each budget newly past ``notice_pct``. Pure.

    Returns the verdict and the notice keys to record as given."""
    for b in budgets:
        if b.spent >= b.limit:
            return Verdict(DENY, f"{RULE}.{b.kind}",
                           f"Blocked by agent-hooks: {b.name} of ${b.limit:.2f} is spent (${b.spent:.2f} used)."
                           f" No tool call runs until a person raises it with {b.raise_with}."
                           " Stop here and report where the work stands." + b.note), []
    pct = float(config["budgets"]["notice_pct"])
    given = set(noticed.split(",")) if noticed else set()
    for b in budgets:
        if pct > 0 and b.spent >= b.limit * pct / 100 and b.key not in given:
            left = b.limit - b.spent
            return Verdict(WARN, f"{RULE}.{b.kind}.notice",
                           f"agent-hooks: {b.name} is {b.spent / b.limit * 100:.0f}% spent (${b.spent:.2f} of"
                           f" ${b.limit:.2f}); ${left:.2f} left. Save progress on the task now, and finish or"
                           " report before it runs out: at 100% every tool call is denied." + b.note), [b.key]
    return None, []


def note(conn: sqlite3.Connection, session_id: str, noticed: str, keys: list[str]) -> None:
    """Record notices given, so each is given once."""
    if keys:
        value = ",".join([k for k in noticed.split(",") if k] + keys)
        conn.execute("UPDATE sessions SET cost_noticed = ? WHERE session_id = ?", (value, session_id))


def guard(conn: sqlite3.Connection, session_id: str, config: dict[str, Any], now: float) -> Verdict | None:
    """PreToolUse's budget check: read, decide, record the notice."""
    budgets, noticed = read(conn, session_id, config, now)
    if not budgets:
        return None
    verdict, keys = decide(budgets, noticed, config)
    note(conn, session_id, noticed, keys)
    return verdict
