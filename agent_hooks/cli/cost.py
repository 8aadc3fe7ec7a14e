"""cost, cost daily, cost sessions, cost refresh-prices: what sessions cost, from the store's priced messages."""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from typing import Any

import click

# The totals are the ledger's (agent_hooks.center.ledger), so `cost` and `cost --fleet` add up alike.
from agent_hooks import money
from agent_hooks.center.ledger import TOKEN_KEYS, rounded_usd, summarize
from agent_hooks.cli.common import NotFound, echo_json, iso, load_config, open_store
from agent_hooks.cli.ids import SESSIONS, TASKS, resolve
from agent_hooks.cli.table import cell, rcell

__all__ = ["TOKEN_KEYS", "rounded_usd", "summarize"]

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


def usd_text(usd: float | None, unpriced: int | bool = 0) -> str:
    """'$1.23' or '38¢' (agent_hooks.money, as the board shows it), with a mark when some of it could
    not be priced ('$1.23 + unpriced')."""
    if usd is None:
        return "unpriced"
    return money.usd(usd) + (" + unpriced" if unpriced else "")


SINCE_HELP = "From this local day on: YYYY-MM-DD, today, yesterday, or Nd (N days ago, e.g. 7d)."


def _since(value: str | None) -> float | None:
    """Local midnight of the day ``value`` names: YYYY-MM-DD (or ccusage's YYYYMMDD), today,
    yesterday, or Nd (N days before today: 0d is today, 7d a week ago)."""
    if not value:
        return None
    word = value.strip().lower()
    days = {"today": 0, "yesterday": 1}.get(word)
    if days is None and word.endswith("d") and word[:-1].isdigit():
        days = int(word[:-1])
    if days is not None:
        day = dt.date.today() - dt.timedelta(days=min(days, 36500))
        return time.mktime(day.timetuple())
    for fmt in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return time.mktime(dt.datetime.strptime(value, fmt).timetuple())
        except ValueError:
            continue
    raise click.BadParameter(f"{value!r} is not a day: give YYYY-MM-DD, today, yesterday or Nd (as in 7d)",
                             param_hint="--since")


def _where(conn: sqlite3.Connection, session: str | None, task: str | None, agent: str | None,
           since: float | None) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if session:
        sid = resolve(conn, SESSIONS, session, "session")
        # A fork or resume of the session, and its subagents, are under its id already.
        clauses.append("m.session_id = ?")
        params.append(sid)
    if task:
        tid = resolve(conn, TASKS, task, "task")
        clauses.append("s.task_id = ?")
        params.append(tid)
    if agent:
        if not conn.execute("SELECT 1 FROM sessions WHERE agent = ? LIMIT 1", (agent,)).fetchone():
            raise NotFound(f"no agent {agent!r} recorded")
        clauses.append("s.agent = ?")
        params.append(agent)
    if since is not None:
        clauses.append("m.at >= ?")
        params.append(since)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _messages(conn: sqlite3.Connection, where: str, params: list[Any]) -> list[Any]:
    return conn.execute(
        "SELECT m.model, m.input_tokens, m.output_tokens, m.cache_creation_input_tokens, m.cache_read_input_tokens,"
        f" m.usd FROM cost_messages m LEFT JOIN sessions s ON s.session_id = m.session_id{where}", params).fetchall()


def _table(title_rows: list[tuple[str, dict[str, Any]]], first: str) -> None:
    click.echo(f"{cell(first, 24)} {rcell('input', 11)} {rcell('output', 11)} {rcell('cache write', 12)}"
               f" {rcell('cache read', 13)} {rcell('USD', 18)}")
    for name, s in title_rows:
        counts = [rcell(f"{s[key]:,}", width) for key, width in zip(TOKEN_KEYS, (11, 11, 12, 13), strict=True)]
        usd = usd_text(s["usd"], bool(s.get("unpriced_models")))
        click.echo(f"{cell(name, 24)} {' '.join(counts)} {rcell(usd, 18)}")


@click.group(invoke_without_command=True)
@click.option("--session", "session", default=None, help="One session (an id or a unique prefix).")
@click.option("--task", "task", default=None, help="The sessions of one task.")
@click.option("--agent", "agent", default=None, help="The sessions of one agent.")
@click.option("--since", default=None, help=SINCE_HELP)
@click.option("--fleet", is_flag=True, help="Every host's cost, as this command center's ledger holds it.")
@click.option("--by", "by", type=click.Choice(["host", "agent", "task", "session", "day", "model"]), default=None,
              help="With --fleet: totals per host, agent, task, session, local day or model.")
@JSON_OPTION
@click.pass_context
def cost(ctx: click.Context, session: str | None, task: str | None, agent: str | None, since: str | None,
         fleet: bool, by: str | None, as_json: bool) -> None:
    """What sessions cost: tokens and dollars by model, from each transcript's usage.

    Priced from the shipped genai-prices data (`cost refresh-prices`), each
    message counted once (message id + request id, as ccusage counts). A
    model without a price is listed as unpriced, never as $0.

    With --fleet, on a command center: every host's cost (each host sends its
    priced messages with its reports), per host, with today's spend, the
    current 5-hour window, the week, the burn rate over the last hour and
    when [budgets] window_usd / week_usd will be reached at that rate.
    """
    if ctx.invoked_subcommand is not None:
        return
    if by and not fleet:
        raise click.UsageError("--by goes with --fleet (for one host: `cost daily`, `cost sessions`)")
    if fleet:
        if session or task or agent:
            raise click.UsageError("--fleet takes --since and --by; narrow with --by task|agent|session")
        _fleet(_since(since), by, as_json)
        return
    start = _since(since)
    store = open_store()
    if store is None:
        result = summarize([])
    else:
        try:
            where, params = _where(store.conn, session, task, agent, start)
            result = summarize(_messages(store.conn, where, params))
        finally:
            store.close()
    if as_json:
        echo_json(result)
        return
    rows = [(name, {**m, "unpriced_models": m["usd"] is None}) for name, m in sorted(result["by_model"].items())]
    _table(rows + [("total", result)], "model")


def _fleet(since: float | None, by: str | None, as_json: bool) -> None:
    from agent_hooks import fleet as fleet_mod
    from agent_hooks.center import ledger

    config = load_config()
    own = fleet_mod.host_name(config)
    store = open_store()
    if store is None:
        raise click.ClickException("no store yet: nothing has been recorded on this host")
    try:
        try:
            result = ledger.summary(store.conn, config, own, time.time(), since, by)
        except sqlite3.OperationalError as exc:
            raise click.ClickException(f"the store predates the fleet's ledger ({exc}): run any hook or"
                                       " `agent-hook doctor` to bring it up to date") from None
    finally:
        store.close()
    if as_json:
        echo_json(result)
        return
    rows = [(h, {**v, "usd": v["total_usd"]}) for h, v in result["hosts"].items()]
    if by and by != "host":
        rows = [(k or "(none)", {**v, "usd": v["total_usd"]}) for k, v in result["groups"].items()]
    _table(rows + [("fleet", {**result, "usd": result["total_usd"]})], by or "host")
    click.echo("")
    click.echo(f"today {usd_text(result['today_usd'])} · burn {usd_text(result['burn_usd_h'])}/h over the last hour")
    w = result["window"]
    if w:
        click.echo(f"5-hour window {iso(w['start'])} to {iso(w['end'])}: {usd_text(w['usd'])}")
    else:
        click.echo("5-hour window: none active")
    click.echo(f"week from {result['week']['start']}: {usd_text(result['week']['usd'])}")
    for which, f in result["forecast"].items():
        if f["reached"]:
            when = "reached"
        elif f["reach_at"] is None:
            when = "not at the current burn"
        else:
            when = f"at {iso(f['reach_at'])}" + ("" if f["within"] else f" (after this {which} ends)")
        click.echo(f"budgets.{which}_usd {usd_text(f['limit_usd'])}: {when}")


@cost.command(name="windows")
@click.option("--fleet", is_flag=True, help="Every host's messages together (on a command center), and per host.")
@click.option("--since", default=None, help=SINCE_HELP)
@JSON_OPTION
def windows_cmd(fleet: bool, since: str | None, as_json: bool) -> None:
    """Spend per 5-hour window (ccusage's blocks) and per week (ccusage's weekly), oldest first."""
    from agent_hooks import fleet as fleet_mod
    from agent_hooks.center import ledger, windows

    config = load_config()
    own = fleet_mod.host_name(config)
    start = _since(since)
    store = open_store()
    rows = []
    if store is not None:
        try:
            rows = [r for r in ledger.entries(store.conn, own, start) if fleet or r[0] == own]
        except sqlite3.OperationalError:
            rows = []
        finally:
            store.close()
    now = time.time()
    start_day = str(config["budgets"].get("week_start") or "sunday")

    def view(part: list[Any]) -> dict[str, Any]:
        ents = [(float(r[5]), r[10], sum(int(v or 0) for v in r[6:10])) for r in part]
        return {"blocks": [b for b in windows.blocks(ents, now) if not b["gap"]], "weeks": windows.weeks(ents, start_day)}

    result = {"fleet": view(rows), "hosts": {h: view([r for r in rows if r[0] == h])
                                              for h in sorted({r[0] for r in rows})}}
    if as_json:
        echo_json(result)
        return
    for name, part in [("fleet" if fleet else own, result["fleet"])] + (
            [(h, v) for h, v in result["hosts"].items()] if fleet else []):
        click.echo(f"{name}:")
        for b in part["blocks"]:
            mark = " (active)" if b["active"] else ""
            click.echo(f"  {iso(b['start'])}  {rcell(usd_text(b['usd']), 12)}  {b['messages']} messages{mark}")
        for week, w in part["weeks"].items():
            click.echo(f"  week of {week}  {rcell(usd_text(w['usd']), 12)}")


def _grouped(key_sql: str, since: str | None, agent: str | None, order: str) -> list[dict[str, Any]]:
    store = open_store()
    if store is None:
        return []
    try:
        where, params = _where(store.conn, None, None, agent, _since(since))
        rows = store.conn.execute(
            f"SELECT {key_sql} AS k, m.model, m.input_tokens, m.output_tokens, m.cache_creation_input_tokens,"
            f" m.cache_read_input_tokens, m.usd, m.at, s.agent, s.task_id FROM cost_messages m"
            f" LEFT JOIN sessions s ON s.session_id = m.session_id{where}", params).fetchall()
    finally:
        store.close()
    groups: dict[str, dict[str, Any]] = {}
    for k, *vals in rows:
        g = groups.setdefault(k, {"key": k, "rows": [], "first": vals[6], "last": vals[6], "agent": vals[7],
                                  "task_id": vals[8]})
        g["rows"].append(vals[:6])
        g["first"], g["last"] = min(g["first"], vals[6]), max(g["last"], vals[6])
    out = []
    for g in groups.values():
        s = summarize(g.pop("rows"))
        out.append({**g, **s, "models": sorted(s["by_model"])})
    out.sort(key=lambda g: g[order])
    return out


@cost.command(name="daily")
@click.option("--since", default=None, help=SINCE_HELP)
@click.option("--agent", default=None, help="One agent's sessions.")
@JSON_OPTION
def daily(since: str | None, agent: str | None, as_json: bool) -> None:
    """Cost per local day, like ccusage's daily report."""
    days = _grouped("strftime('%Y-%m-%d', m.at, 'unixepoch', 'localtime')", since, agent, "key")
    if as_json:
        echo_json([{"date": d["key"], **{k: d[k] for k in ("usd", *TOKEN_KEYS, "models", "unpriced_models")}}
                   for d in days])
        return
    _table([(d["key"], d) for d in days], "day")


@cost.command(name="sessions")
@click.option("--since", default=None, help=SINCE_HELP)
@click.option("--agent", default=None, help="One agent's sessions.")
@JSON_OPTION
def sessions_cmd(since: str | None, agent: str | None, as_json: bool) -> None:
    """Cost per session (subagents under their parent), newest last, like ccusage's session report."""
    rows = _grouped("m.session_id", since, agent, "last")
    if as_json:
        echo_json([{"session_id": r["key"], "agent": r["agent"], "task_id": r["task_id"],
                    "last_activity": iso(r["last"]),
                    **{k: r[k] for k in ("usd", *TOKEN_KEYS, "models", "unpriced_models")}} for r in rows])
        return
    if not rows:
        click.echo("no priced messages" + (" match" if since or agent else " recorded"))
        return
    # Full session ids (they are what `session show` and `cost --session` take), who ran each and for
    # which task, every token and the dollars; and the total over the sessions listed.
    click.echo(f"{'SESSION':36}  {'AGENT':12} {'TASK':16} {rcell('input', 11)} {rcell('output', 11)}"
               f" {rcell('cache write', 12)} {rcell('cache read', 13)} {rcell('total tokens', 14)} {rcell('USD', 16)}")
    total = summarize([])
    for r in rows:
        click.echo(_session_line(r["key"], r["agent"], r["task_id"], r))
        for key in TOKEN_KEYS:
            total[key] += r[key]
        total["usd"] += r["usd"]
        total["unpriced_models"] += r["unpriced_models"]
    click.echo(_session_line(f"total ({len(rows)} sessions)", "", "", total))


def _session_line(name: str, agent: str | None, task: str | None, s: dict[str, Any]) -> str:
    counts = [rcell(f"{s[key]:,}", width) for key, width in zip(TOKEN_KEYS, (11, 11, 12, 13), strict=True)]
    tokens = sum(int(s[key]) for key in TOKEN_KEYS)
    usd = usd_text(s["usd"], bool(s.get("unpriced_models")))
    return (f"{cell(name, 36, limit=200)}  {cell(agent, 12, empty='')} {cell(task, 16, empty='')} {' '.join(counts)}"
            f" {rcell(f'{tokens:,}', 14)} {rcell(usd, 16)}")


@cost.command(name="refresh-prices")
def refresh_prices() -> None:
    """Rewrite the shipped prices from the installed genai-prices (after `pip install -U genai-prices`)."""
    try:
        from agent_hooks import pricing_extract
    except ImportError as exc:  # pragma: no cover - the module imports genai_prices lazily
        raise click.ClickException(str(exc)) from None
    try:
        result = pricing_extract.write()
    except ImportError:
        raise click.ClickException("genai-prices is not installed: pip install 'agent-hooks[prices]'") from None
    click.echo(f"wrote {len(result['models'])} models from {result['source']}")


COMMANDS = [cost]
