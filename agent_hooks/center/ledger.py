"""The fleet's cost: one ledger at the command center, its totals and windows, and budgets that hold fleet-wide.

**The ledger.** Every host keeps its sessions' priced messages (features/cost.py: one row per message
id + request id). While it reports to a command center (center/report.py), it also sends the messages
the center has not acknowledged yet, oldest first, to ``POST /api/fleet/cost``::

    {"host": NAME, "rows": [[key, session_id, agent_id, model, at, input, output, cache_write,
                             cache_write_1h, cache_read, usd], ...],
     "sessions": {session_id: {"agent": A, "task_id": T}}}

The center keeps them in ``fleet_cost_messages`` keyed by (host, key): a batch sent twice (a lost
answer, a restart) adds nothing. It answers with its epoch; the host keeps a cursor (the rowid of its
last acknowledged message) per center and epoch, so a center that starts over with a new store gets
everything again. A session's agent and task travel with its messages and with its card, so spend
moves with a session assigned to a task later. The center's own sessions stay in its
``cost_messages``: :func:`entries` reads both as one ledger.

**Budgets fleet-wide.** The center counts, for each budget it knows (a task's ``budget_usd`` set there,
``[budgets.agents.NAME] daily_usd`` and ``[budgets.hosts.NAME] daily_usd`` in its configuration), what
each host spent against it. Every host's long poll (center/control.py) carries the budgets with
``elsewhere_usd``, what the rest of the fleet spent: the host writes them into ``fleet_budgets``, and
its budget guard (features/budget.py) adds its own spend, counted at once, to that. The center writes
its own copy the same way. So a budget spent on one host denies on every host as soon as the report
that spent it has reached the center and the center's answer has reached the host.

**Alerts.** A budget reached (``budget``), one past ``notice_pct`` (``budget_notice``), and a forecast
that reaches ``[budgets] window_usd`` or ``week_usd`` before its window or week ends (``forecast``)
are each recorded once in ``fleet_cost_alerts`` (per limit and period), for a notifier to send.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from typing import Any

from agent_hooks.center import contract, fleetdb, numbers, windows
from agent_hooks.forward.centers import COST, stored_object

log = logging.getLogger("agent_hooks.center.ledger")
ROW_FIELDS = ("key", "session_id", "agent_id", "model", "at", "input_tokens", "output_tokens",
              "cache_creation_input_tokens", "cache_1h_input_tokens", "cache_read_input_tokens", "usd")
TOKEN_FIELDS = ROW_FIELDS[5:10]
TEXT_LIMITS = {"key": 300, "session_id": 200, "agent_id": 200, "model": 200}
# Messages per report body: about 200 bytes each, well inside contract.MAX_BODY_BYTES.
BATCH_ROWS = 200
MAX_ROWS = 1000
# How far back the windows and weeks look (a week, and a window that began before it).
HISTORY_S = 8 * 86400.0
SYNC_KEY = "fleet.budgets.sync"
TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
USD_DIGITS = 12


def rounded_usd(usd: float) -> float:
    """Dollars to :data:`USD_DIGITS` significant digits: a sum without its binary noise."""
    return float(f"{usd:.{USD_DIGITS}g}")


def summarize(rows: list[sqlite3.Row | tuple[Any, ...]]) -> dict[str, Any]:
    """{usd, the four token counts, by_model, unpriced_models} over (model, input, output, write, read, usd) rows."""
    out: dict[str, Any] = {"usd": 0.0, **{k: 0 for k in TOKEN_KEYS}, "by_model": {}, "unpriced_models": []}
    for model, inp, outp, write, read, usd in rows:
        m = out["by_model"].setdefault(model, {"usd": 0.0, **{k: 0 for k in TOKEN_KEYS}, "messages": 0})
        for key, value in zip(TOKEN_KEYS, (inp, outp, write, read), strict=True):
            m[key] += int(value or 0)
            out[key] += int(value or 0)
        m["messages"] += 1
        if usd is None:
            m["usd"] = None  # one unpriced message makes the model unpriced: never a partial $ shown as whole
        elif m["usd"] is not None:
            m["usd"] += usd
        if usd is not None:
            out["usd"] += usd
    out["unpriced_models"] = sorted(name for name, m in out["by_model"].items() if m["usd"] is None)
    # Sums of float prices carry binary noise in their last digits (0.0006999999999999999): twelve
    # significant digits keep every digit a price has and drop the noise (0.0007).
    out["usd"] = rounded_usd(out["usd"])
    for m in out["by_model"].values():
        if m["usd"] is not None:
            m["usd"] = rounded_usd(m["usd"])
    return out


# -- the reporting host's side ------------------------------------------------------------

def unsent(conn: sqlite3.Connection, after: int, limit: int = BATCH_ROWS) -> tuple[list[list[Any]], dict[str, Any], int]:
    """This host's messages after rowid ``after``: the rows, their sessions' agent and task, the last rowid."""
    rows = conn.execute(
        "SELECT m.rowid, m.key, m.session_id, m.agent_id, m.model, m.at, m.input_tokens, m.output_tokens,"
        " m.cache_creation_input_tokens, m.cache_1h_input_tokens, m.cache_read_input_tokens, m.usd, s.agent,"
        " s.task_id FROM cost_messages m LEFT JOIN sessions s ON s.session_id = m.session_id"
        " WHERE m.rowid > ? ORDER BY m.rowid LIMIT ?", (after, limit)).fetchall()
    out: list[list[Any]] = []
    sessions: dict[str, Any] = {}
    last = after
    for r in rows:
        last = int(r[0])
        out.append([r[1], r[2], r[3], r[4], r[5], *(int(v or 0) for v in r[6:11]), r[11]])
        sessions[r[2]] = {"agent": r[12], "task_id": r[13]}
    return out, sessions, last


class Sender:
    """Sends this host's messages to its command center (called by the Reporter on each wake-up)."""

    def __init__(self, hub: Any, base: str, upstream: Any = None) -> None:
        self.hub = hub
        self._base = base
        # The host's current command center (center/failover.py); the cursor is per center.
        self.upstream = upstream
        self.sent = 0
        self.last_error: str | None = None
        # A center that answered 404, 405 or 429 is left alone for a minute; the pause is that center's, so
        # a host that moved to another sends there at once.
        self.pause_until: dict[str, float] = {}

    @property
    def base(self) -> str:
        return str(self.upstream.base) if self.upstream is not None else self._base

    @property
    def key(self) -> str:
        return f"fleet.cost_sent:{self.base}"

    def status(self) -> dict[str, Any]:
        return {"sent": self.sent, "last_error": self.last_error}

    async def send(self, client: Any, headers: dict[str, str]) -> None:
        """Every unacknowledged message, in batches; stops at the first failure (the next wake-up retries)."""
        import httpx

        base, key = self.base, self.key
        if time.time() < self.pause_until.get(base, 0.0):
            return
        for _ in range(10_000):  # a bound, not a limit anyone meets: 2 million messages per wake-up
            cursor = await self.hub.submit(_cursor, key)
            try:
                rows, sessions, last = await self.hub.submit(unsent, int(cursor.get("rowid") or 0))
            except sqlite3.OperationalError:  # a store not migrated yet (the hooks migrate it)
                return
            if not rows and cursor.get("epoch"):
                return
            body = json.dumps({"rows": rows, "sessions": sessions}).encode()
            try:
                r = await client.post(base + "/api/fleet/cost", content=body,
                                      headers={**headers, "Content-Type": "application/json"})
            except httpx.HTTPError as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                if self.upstream is not None:
                    await self.upstream.failed(COST, base, self.last_error)
                return
            if r.status_code != 200:
                self.last_error = f"HTTP {r.status_code}: {r.text[:200]}"
                if self.upstream is not None:
                    if r.status_code >= 500:
                        await self.upstream.failed(COST, base, f"HTTP {r.status_code}")
                    else:
                        self.upstream.answered(COST, base)  # a 4xx: an answer, never a move
                if r.status_code in (404, 405, 429):  # a center without the ledger, or past its limits
                    self.pause_until[base] = time.time() + 60.0
                return
            if self.upstream is not None:
                self.upstream.answered(COST, base)
            epoch = str(r.json().get("epoch") or "")
            self.last_error = None
            if cursor.get("epoch") and epoch != cursor["epoch"]:
                # Another store at the center: everything again (its keys make the rows sent already no-ops).
                await self.hub.write(_set_cursor, key, epoch, 0)
                continue
            await self.hub.write(_set_cursor, key, epoch, last)
            self.sent += len(rows)
            if not rows:
                return


def _cursor(conn: sqlite3.Connection, key: str) -> dict[str, Any]:
    raw = fleetdb.meta_get(conn, key)
    return stored_object(raw)


def _set_cursor(conn: sqlite3.Connection, key: str, epoch: str, rowid: int) -> None:
    fleetdb.meta_set(conn, key, json.dumps({"epoch": epoch, "rowid": rowid}))


# -- the command center's side: storing --------------------------------------------------

def check_rows(rows: Any, sessions: Any) -> tuple[list[tuple[Any, ...]], dict[str, tuple[str | None, str | None]]]:
    """The body's rows as tuples in ROW_FIELDS order, and its sessions; BodyError (400) naming the first bad one."""
    if not isinstance(rows, list):
        raise contract.BodyError('expected {"rows": [[key, session_id, agent_id, model, at, input, output,'
                                 ' cache_write, cache_write_1h, cache_read, usd], ...], "sessions": {...}}')
    if len(rows) > MAX_ROWS:
        raise contract.BodyError(f"at most {MAX_ROWS} rows per report, got {len(rows)}")
    out: list[tuple[Any, ...]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(ROW_FIELDS):
            raise contract.BodyError(f"rows[{i}] must be a list of {len(ROW_FIELDS)} values ({', '.join(ROW_FIELDS)})")
        values: list[Any] = []
        for field, value in zip(ROW_FIELDS, row, strict=True):
            where = f"rows[{i}].{field}"
            if field in TEXT_LIMITS:
                if value is None and field == "agent_id":
                    values.append(None)
                    continue
                if not isinstance(value, str) or not value or len(value) > TEXT_LIMITS[field]:
                    raise contract.BodyError(f"{where} must be a text of 1 to {TEXT_LIMITS[field]} characters")
                values.append(value)
            elif field == "at":
                if value is None:
                    raise contract.BodyError(f"{where} is required")
                values.append(numbers.check(value, "time", where))
            elif field == "usd":
                values.append(numbers.check(value, "usd", where))  # None: a model nobody prices
            else:
                values.append(numbers.check(value, "count", where) if value is not None else 0)
        out.append(tuple(values))
    who: dict[str, tuple[str | None, str | None]] = {}
    if sessions is not None:
        if not isinstance(sessions, dict):
            raise contract.BodyError('"sessions" must be {session_id: {"agent": A, "task_id": T}}')
        for sid, doc in list(sessions.items())[:MAX_ROWS]:
            if not isinstance(doc, dict):
                raise contract.BodyError(f"sessions[{sid[:60]!r}] must be an object")
            agent, task = doc.get("agent"), doc.get("task_id")
            who[str(sid)[:200]] = (agent[:80] if isinstance(agent, str) and agent else None,
                                   task[:200] if isinstance(task, str) and task else None)
    return out, who


def store(conn: sqlite3.Connection, host: str, rows: list[tuple[Any, ...]],
          sessions: dict[str, tuple[str | None, str | None]], at: float) -> fleetdb.Result:
    """Keep a host's messages (each once) and its sessions' agent and task."""
    stored = 0
    for row in rows:
        agent, task = sessions.get(row[1], (None, None))
        cur = conn.execute(
            "INSERT INTO fleet_cost_messages (host, key, session_id, agent_id, agent, task_id, model, at, input_tokens,"
            " output_tokens, cache_creation_input_tokens, cache_1h_input_tokens, cache_read_input_tokens, usd,"
            " received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (host, key) DO NOTHING",
            (host, row[0], row[1], row[2], agent, task, *row[3:], at))
        stored += cur.rowcount
    moved = attribute(conn, host, [(sid, agent, task) for sid, (agent, task) in sessions.items()])
    out = fleetdb.Result(200, {"ok": True, "stored": stored, "received": len(rows)})
    out.extra["cost"] = bool(stored or moved)
    return out


def attribute(conn: sqlite3.Connection, host: str, sessions: list[tuple[str, str | None, str | None]]) -> int:
    """Sessions' agent and task as their host now says them (a report's cards, or its messages): (session
    id, agent, task id) each; how many messages moved. One executemany (PostgreSQL's: one pipeline)."""
    if not sessions:
        return 0
    cur = conn.executemany(
        "UPDATE fleet_cost_messages SET agent = ?, task_id = ? WHERE host = ? AND session_id = ?"
        " AND (agent IS NOT ? OR task_id IS NOT ?)",
        [(agent, task_id, host, sid, agent, task_id) for sid, agent, task_id in sessions])
    return max(0, int(cur.rowcount))


def prune(conn: sqlite3.Connection, now: float, keep_days: float) -> int:
    """Forget other hosts' messages and alerts older than ``keep_days``, and each remote card's cost
    samples older than two days but the last one before (what a burn rate and today's spend need)."""
    cutoff = now - keep_days * 86400.0
    n = conn.execute("DELETE FROM fleet_cost_messages WHERE at < ?", (cutoff,)).rowcount
    conn.execute("DELETE FROM fleet_cost_alerts WHERE at < ?", (cutoff,))
    old = now - 2 * 86400.0
    n += conn.execute(
        "DELETE FROM fleet_cost_samples WHERE at < ? AND rowid NOT IN (SELECT max(rowid) FROM fleet_cost_samples"
        " WHERE at < ? GROUP BY fleet_id)", (old, old)).rowcount
    n += conn.execute("DELETE FROM fleet_cost_samples WHERE fleet_id NOT IN (SELECT id FROM fleet_sessions)").rowcount
    return n


# -- reading the ledger --------------------------------------------------------------------

def entries(conn: sqlite3.Connection, own_host: str, since: float | None = None) -> list[tuple[Any, ...]]:
    """Every message of the fleet: (host, session_id, agent, task_id, model, at, input, output, cache
    write, cache read, usd), this host's from its own store, the others' from their reports."""
    cond = " WHERE m.at >= ?" if since is not None else ""
    remote_cond = " AND at >= ?" if since is not None else ""
    args: list[Any] = [own_host] + ([since] if since is not None else []) + [own_host] + (
        [since] if since is not None else [])
    return conn.execute(
        "SELECT ? AS host, m.session_id, s.agent, s.task_id, m.model, m.at, m.input_tokens, m.output_tokens,"
        " m.cache_creation_input_tokens, m.cache_read_input_tokens, m.usd FROM cost_messages m"
        f" LEFT JOIN sessions s ON s.session_id = m.session_id{cond}"
        " UNION ALL SELECT host, session_id, agent, task_id, model, at, input_tokens, output_tokens,"
        " cache_creation_input_tokens, cache_read_input_tokens, usd FROM fleet_cost_messages"
        f" WHERE host != ?{remote_cond}", args).fetchall()


def _day(at: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(at))


BY = {"host": 0, "session": 1, "agent": 2, "task": 3, "model": 4}


def _sum(rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    s = summarize([(r[4], r[6], r[7], r[8], r[9], r[10]) for r in rows])
    s["total_usd"] = s.pop("usd")
    s["messages"] = len(rows)
    s["sessions"] = len({(r[0], r[1]) for r in rows})
    return s


def _window_view(rows: list[tuple[Any, ...]], now: float, config: dict[str, Any]) -> dict[str, Any]:
    """The current 5-hour window, this week, the last hour's burn rate and the forecasts, of ``rows``."""
    cfg = config["budgets"]
    ents: list[windows.Entry] = [(float(r[5]), r[10], int(r[6] or 0) + int(r[7] or 0) + int(r[8] or 0) + int(r[9] or 0))
                                 for r in rows]
    blocks = windows.blocks(ents, now)
    cur = windows.current(blocks)
    rate = windows.burn_rate(ents, now)
    start_day = str(cfg.get("week_start") or "sunday")
    w_begin, w_end = windows.week_bounds(now, start_day)
    week_usd = sum(e[1] or 0.0 for e in ents if w_begin <= e[0] < w_end)
    window = None
    if cur is not None:
        window = {k: cur[k] for k in ("id", "start", "end", "last_at", "usd", "tokens", "messages")}
    out: dict[str, Any] = {
        "burn_usd_h": round(rate, 6),
        "window": window,
        "week": {"start": windows.week_start(now, start_day), "begin": w_begin, "end": w_end,
                 "usd": round(week_usd, 6)},
        "forecast": {},
    }
    limit = float(cfg.get("window_usd") or 0.0)
    if limit > 0:
        spent = cur["usd"] if cur else 0.0
        out["forecast"]["window"] = windows.forecast(spent, rate, limit, now, cur["end"] if cur else None)
    limit = float(cfg.get("week_usd") or 0.0)
    if limit > 0:
        out["forecast"]["week"] = windows.forecast(week_usd, rate, limit, now, w_end)
    return out


def summary(conn: sqlite3.Connection, config: dict[str, Any], own_host: str, now: float,
            since: float | None = None, by: str | None = None) -> dict[str, Any]:
    """The fleet's totals (``total_usd``, tokens, by model), per host (``hosts``), optionally per
    ``by`` (host, agent, task, session or day), with today's spend, the current window, the week,
    the burn rate and the forecasts (these over the fleet and per host, whatever ``since`` says)."""
    recent_from = min(now - HISTORY_S, windows.week_bounds(now, str(config["budgets"].get("week_start")
                                                                     or "sunday"))[0])
    lower = recent_from if since is None else min(since, recent_from)
    rows = entries(conn, own_host, lower)
    counted = [r for r in rows if since is None or r[5] >= since] if since is not None else entries(conn, own_host)
    out = _sum(counted)
    from agent_hooks.center.burn import day_start

    today = day_start(now)
    out["today_usd"] = round(sum(r[10] or 0.0 for r in rows if r[5] >= today), 6)
    out.update(_window_view(rows, now, config))
    hosts: dict[str, dict[str, Any]] = {}
    for h in sorted({r[0] for r in counted} | {r[0] for r in rows}):
        mine = [r for r in counted if r[0] == h]
        recent = [r for r in rows if r[0] == h]
        hosts[h] = {**_sum(mine), "today_usd": round(sum(r[10] or 0.0 for r in recent if r[5] >= today), 6),
                    **_window_view(recent, now, config)}
        hosts[h].pop("forecast", None)  # the limits are the fleet's
        hosts[h].pop("by_model", None)
    out["hosts"] = hosts
    out["own_host"] = own_host
    out["since"] = since
    if by:
        groups: dict[str, list[tuple[Any, ...]]] = {}
        for r in counted:
            key = _day(r[5]) if by == "day" else (r[BY[by]] or "")
            groups.setdefault(key, []).append(r)
        out["by"] = by
        out["groups"] = {k: {kk: v for kk, v in _sum(g).items() if kk != "by_model"} for k, g in sorted(groups.items())}
    return out


def board_view(conn: sqlite3.Connection, config: dict[str, Any], own_host: str, now: float) -> dict[str, Any]:
    """What the board's header shows: today, the window and its forecast, and each host's spend (its
    ``total_usd`` over the last :data:`HISTORY_S`: recounted every second while spend comes, never all history)."""
    s = summary(conn, config, own_host, now, since=now - HISTORY_S)
    return {"today_usd": s["today_usd"], "window": s["window"], "week": s["week"], "burn_usd_h": s["burn_usd_h"],
            "forecast": s["forecast"],
            "hosts": {h: {"today_usd": v["today_usd"], "total_usd": v["total_usd"], "burn_usd_h": v["burn_usd_h"],
                          "window_usd": (v["window"] or {}).get("usd", 0.0)} for h, v in s["hosts"].items()}}


# -- budgets fleet-wide --------------------------------------------------------------------

def _usd(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and value > 0:
        return float(value)
    return 0.0


def budget_state(conn: sqlite3.Connection, config: dict[str, Any], own_host: str, now: float) -> list[dict[str, Any]]:
    """Every budget the center knows, with what each host spent against it (``by_host``)."""
    from agent_hooks.center.burn import day_start

    cfg = config["budgets"]
    day = _day(now)
    since = day_start(now)
    out: list[dict[str, Any]] = []
    for task_id, limit in conn.execute("SELECT task_id, budget_usd FROM tasks WHERE budget_usd > 0 ORDER BY task_id"):
        by_host = {own_host: float(conn.execute(
            "SELECT coalesce(sum(m.usd), 0) FROM cost_messages m JOIN sessions s ON s.session_id = m.session_id"
            " WHERE s.task_id = ?", (task_id,)).fetchone()[0])}
        for host, usd in conn.execute("SELECT host, sum(usd) FROM fleet_cost_messages WHERE task_id = ? AND host != ?"
                                      " GROUP BY host", (task_id, own_host)):
            by_host[host] = float(usd or 0.0)
        out.append({"kind": "task", "key": task_id, "name": f"task {task_id}'s fleet-wide budget",
                    "limit_usd": float(limit), "day": None, "by_host": by_host})
    agents = cfg.get("agents") if isinstance(cfg.get("agents"), dict) else {}
    for agent, table in sorted(agents.items()):
        limit = _usd(table.get("daily_usd")) if isinstance(table, dict) else 0.0
        if limit <= 0:
            continue
        by_host = {own_host: float(conn.execute(
            "SELECT coalesce(sum(m.usd), 0) FROM cost_messages m JOIN sessions s ON s.session_id = m.session_id"
            " WHERE s.agent = ? AND m.at >= ?", (agent, since)).fetchone()[0])}
        for host, usd in conn.execute("SELECT host, sum(usd) FROM fleet_cost_messages WHERE agent = ? AND at >= ?"
                                      " AND host != ? GROUP BY host", (agent, since, own_host)):
            by_host[host] = float(usd or 0.0)
        out.append({"kind": "agent", "key": agent,
                    "name": f"agent {agent}'s fleet-wide daily budget (budgets.agents.{agent}.daily_usd"
                            " at the command center)", "limit_usd": limit, "day": day, "by_host": by_host})
    hosts = cfg.get("hosts") if isinstance(cfg.get("hosts"), dict) else {}
    for host, table in sorted(hosts.items()):
        limit = _usd(table.get("daily_usd")) if isinstance(table, dict) else 0.0
        if limit <= 0:
            continue
        out.append({"kind": "host", "key": host,
                    "name": f"host {host}'s daily budget (budgets.hosts.{host}.daily_usd at the command center)",
                    "limit_usd": limit, "day": day, "by_host": {}})  # the host counts its own spend itself
    return out


def doc_for(state: list[dict[str, Any]], host: str) -> dict[str, Any]:
    """The budgets as one host receives them: each with what the rest of the fleet spent; a version."""
    rows = []
    for b in state:
        if b["kind"] == "host" and b["key"] != host:
            continue
        elsewhere = sum(v for h, v in b["by_host"].items() if h != host)
        rows.append({"kind": b["kind"], "key": b["key"], "name": b["name"], "limit_usd": b["limit_usd"],
                     "elsewhere_usd": round(elsewhere, 9), "day": b["day"]})
    text = json.dumps(rows, sort_keys=True)
    return {"version": hashlib.sha256(text.encode()).hexdigest()[:16], "budgets": rows}


def apply_budgets(conn: sqlite3.Connection, doc: dict[str, Any], center: str, now: float, local: bool = False) -> int:
    """A host writes the budgets its command center sent (all of them: one missing is one removed);
    ``local``: the command center writes its own copy (never out of reach)."""
    conn.execute("DELETE FROM fleet_budgets")
    n = 0
    for b in doc.get("budgets") or []:
        if not isinstance(b, dict) or b.get("kind") not in ("task", "agent", "host") or not isinstance(b.get("key"), str):
            continue
        limit = numbers.clean(b.get("limit_usd"), "usd")
        elsewhere = numbers.clean(b.get("elsewhere_usd"), "usd")
        if not limit or elsewhere is None:
            continue
        day = b.get("day") if isinstance(b.get("day"), str) else None
        name = str(b.get("name") or f"{b['kind']} {b['key']}'s fleet-wide budget")[:300]
        conn.execute("INSERT INTO fleet_budgets (kind, key, name, limit_usd, elsewhere_usd, day, center, updated_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kind, key) DO UPDATE SET name = excluded.name,"
                     " limit_usd = excluded.limit_usd, elsewhere_usd = excluded.elsewhere_usd, day = excluded.day,"
                     " center = excluded.center, updated_at = excluded.updated_at",
                     (b["kind"], b["key"][:200], name, limit, elsewhere, day, center[:200], now))
        n += 1
    fleetdb.meta_set(conn, "fleet.budgets.version", str(doc.get("version") or ""))
    note_sync(conn, center, True, now, local=local)
    return n


def note_sync(conn: sqlite3.Connection, center: str, ok: bool, now: float, error: str | None = None,
              local: bool = False) -> None:
    """Whether this host hears from its command center: the budget guard says so when it does not."""
    raw = fleetdb.meta_get(conn, SYNC_KEY)
    try:
        old = json.loads(raw) if raw else {}
    except ValueError:
        old = {}
    if ok:
        value = {"center": center, "ok_at": now, "failed_at": None, "error": None, "local": local}
    else:
        value = {"center": center, "ok_at": old.get("ok_at"), "failed_at": old.get("failed_at") or now,
                 "error": (error or "")[:300]}
    fleetdb.meta_set(conn, SYNC_KEY, json.dumps(value))


def record_alerts(conn: sqlite3.Connection, state: list[dict[str, Any]], view: dict[str, Any] | None,
                  config: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """Each budget reached or past ``notice_pct``, and each forecast that crosses its limit within its
    period, once (per limit and period) in ``fleet_cost_alerts``; the rows added."""
    pct = float(config["budgets"].get("notice_pct") or 0.0)
    added: list[dict[str, Any]] = []

    def add(kind: str, subject: str, limit: float, spent: float, period: str, message: str,
            due: float | None = None) -> None:
        cur = conn.execute("INSERT INTO fleet_cost_alerts (kind, subject, limit_usd, spent_usd, period, at, due_at,"
                           " message) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                           (kind, subject, limit, spent, period, now, due, message))
        if cur.rowcount:
            added.append({"kind": kind, "subject": subject, "limit_usd": limit, "spent_usd": spent,
                          "period": period, "message": message})

    for b in state:
        if b["kind"] == "host":
            continue  # the center learns a host's own spend with its report: counted under the ledger's
        spent = sum(b["by_host"].values())
        subject = f"{b['kind']}:{b['key']}"
        period = b["day"] or ""
        if spent >= b["limit_usd"]:
            add("budget", subject, b["limit_usd"], spent, period,
                f"{b['name']} of ${b['limit_usd']:.2f} is spent (${spent:.2f} across "
                f"{len([v for v in b['by_host'].values() if v])} host(s)); its tool calls are denied on every host.")
        elif pct > 0 and spent >= b["limit_usd"] * pct / 100:
            add("budget_notice", subject, b["limit_usd"], spent, period,
                f"{b['name']} is {spent / b['limit_usd'] * 100:.0f}% spent (${spent:.2f} of ${b['limit_usd']:.2f}).")
    for which, f in ((view or {}).get("forecast") or {}).items():
        if not f.get("within") or view is None:
            continue
        period = (view.get("window") or {}).get("id", "") if which == "window" else view["week"]["start"]
        when = time.strftime("%H:%M", time.localtime(f["reach_at"]))
        add("forecast", which, f["limit_usd"], f["spent_usd"], str(period),
            f"At ${f['burn_usd_h']:.2f}/h the fleet reaches its {which} limit budgets.{which}_usd"
            f" (${f['limit_usd']:.2f}) at {when}" + (" (reached)." if f["reached"] else "."), f["reach_at"])
    return added
