"""Approval requests across hosts: carried up to the command center, answered down the cancels' channel.

A request is held on the host its session runs on (features/approvals.py): its
hook waits on a row of that host's store, never on the network, and the first
answer written there wins. This module moves copies and answers:

* **Up.** The host's server reports its requests with its sessions
  (center/report.py): every pending one, and those settled in the last
  ``RESOLVED_KEPT_S``, as rows of its ``approvals`` table. It reports within
  about 100 ms of a change to its store (its hub's ``PRAGMA data_version``
  poll), so a request appears on the command center well within 1 s, and one
  answered at the terminal leaves it as fast. The command center keeps a copy
  of each (``host`` = that host) in its own ``approvals`` table, so
  ``GET /api/approvals`` lists the whole fleet's. A copy still pending there
  that the host no longer reports as pending is settled from the host's row,
  or withdrawn ("no longer pending on HOST").
* **Down.** ``POST /api/approvals/<id>`` on the command center, for another
  host's request, records an ``approval`` control for that host. Its
  subscription's long poll receives it at once; the host answers its own row
  with :func:`agent_hooks.features.approvals.answer` in the transaction that
  moves its cursor (so the first answer wins wherever it came from), then
  tells the command center what happened (``/api/fleet/replies``). The caller
  gets the host's word: 200, or 409 "already answered" (the terminal, the CLI
  or another board got there first). Without a word within ``WAIT_S``: 202.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

from agent_hooks.center import fleetdb, limits, numbers
from agent_hooks.features import approvals

# Settled requests a host keeps reporting for this long: the command center learns how they ended.
RESOLVED_KEPT_S = 120.0
# How long POST /api/approvals/<id> waits for the host to say what became of a routed answer.
WAIT_S = 5.0
# A pending copy whose request expired this long ago is left out of the command center's list
# (its host, down, could not report its end).
EXPIRED_GRACE_S = 2.0
MAX_REPORTED = 500
NOTIFY_STATE_CHARS = 8 * 1024
_ID = re.compile(r"^[A-Za-z0-9_-]{4,64}$")
_TEXT_LIMITS = {"session_id": 200, "kind": 20, "tool_name": 200, "tool_use_id": 200, "gate": 200, "on_timeout": 20,
                "state": 20, "decision": 20, "message": approvals.MAX_MESSAGE_CHARS, "answered_by": 200,
                "answered_via": 20, "answered_where": 200, "note": 500}
_JSON_LIMITS = {"tool_input": approvals.MAX_INPUT_CHARS, "questions": 64 * 1024, "permission_suggestions": 64 * 1024,
                "answers": 64 * 1024}
# A reported row's numbers and their kinds (agent_hooks.center.numbers: the range of each).
NUMBER_FIELDS = numbers.REQUEST_FIELDS


# -- the host's side ------------------------------------------------------------------------

def host_rows(conn: sqlite3.Connection, now: float) -> list[dict[str, Any]]:
    """This host's requests to report: pending ones, and those settled in the last RESOLVED_KEPT_S; the
    newest MAX_REPORTED of them (a command center keeps a host's newest), oldest first."""
    cur = conn.execute(approvals._SELECT + " WHERE host = '' AND (state = 'pending' OR answered_at >= ?)"
                       " ORDER BY created_at DESC LIMIT ?", (now - RESOLVED_KEPT_S, MAX_REPORTED))
    cols = [d[0] for d in cur.description]
    # A number out of its range (a row an older version wrote) goes as null: never one the center refuses.
    return [numbers.clean_fields(dict(zip(cols, r, strict=True)), NUMBER_FIELDS) for r in reversed(cur.fetchall())]


def _clipped(value: Any, limit: int) -> Any:
    """A JSON value with every string cut to ``limit`` characters (the structure kept)."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[: max(0, limit - 1)] + "…"
    if isinstance(value, list):
        return [_clipped(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: _clipped(v, limit) for k, v in value.items()}
    return value


def fit(rows: list[dict[str, Any]], room: int) -> tuple[list[dict[str, Any]], bool]:
    """The rows to report within ``room`` bytes: their inputs' strings clipped harder until they fit,
    then as many as fit (False: not all of them, so the command center withdraws none it misses)."""
    def sized(limit: int) -> list[dict[str, Any]]:
        out = []
        for row in rows:
            row = dict(row)
            for key in ("tool_input", "questions", "permission_suggestions"):
                try:
                    value = json.loads(row[key]) if row.get(key) else None
                except ValueError:
                    continue
                if value is not None:
                    row[key] = json.dumps(_clipped(value, limit), ensure_ascii=False)
            out.append(row)
        return out

    for limit in (4000, 1000, 200):
        shown = sized(limit)
        if len(json.dumps(shown, default=str)) <= room:
            return shown, True
    kept: list[dict[str, Any]] = []
    size = 2
    for row in shown:
        n = len(json.dumps(row, default=str)) + 2
        if size + n > room:
            return kept, False
        kept.append(row)
        size += n
    return kept, True


def answer_control(conn: sqlite3.Connection, control: dict[str, Any], center: str) -> dict[str, Any]:
    """Answer this host's request as a command center asked (inside the subscriber's transaction)."""
    seq = int(numbers.clean(control.get("seq"), "seq") or 0)
    try:
        doc = json.loads(control.get("reason") or "")
        if not isinstance(doc, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        return {"seq": seq, "status": 400, "error": f"unreadable answer: {exc}"}
    result = approvals.answer(
        conn, str(doc.get("id") or ""), str(doc.get("decision") or ""), message=doc.get("message"),
        interrupt=bool(doc.get("interrupt")), answers=doc.get("answers"), by=str(doc.get("by") or "command center"),
        via="remote", where=str(doc.get("where") or center), at=time.time(),
        note=str(doc["note"]) if isinstance(doc.get("note"), str) else None)
    # The host's word: the command center answers its own caller with this status.
    return {"seq": seq, "status": fleetdb.ANSWER_STATUS[result.result], "error": result.error,
            "approval": result.row}


# -- the command center's side ----------------------------------------------------------------

def check(items: list[Any], where: str) -> None:
    """Every number of reported rows in its range, or BodyError (400) naming the first that is not
    (``approvals[2].created_at``)."""
    for i, item in enumerate(items[:MAX_REPORTED]):
        if isinstance(item, dict):
            numbers.check_fields(item, NUMBER_FIELDS, f"{where}[{i}]")


def _clean(item: Any, host: str) -> dict[str, Any] | None:
    """A reported row with known columns of the right types (clipped), or None when unusable."""
    if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not _ID.match(item["id"]):
        return None
    if item.get("kind") not in approvals.KINDS or item.get("state") not in approvals.STATES:
        return None
    out: dict[str, Any] = {"id": item["id"], "host": host}
    for key, limit in {**_TEXT_LIMITS, **_JSON_LIMITS}.items():
        value = item.get(key)
        out[key] = value[:limit] if isinstance(value, str) else None
    for key, kind in NUMBER_FIELDS.items():
        out[key] = numbers.clean(item.get(key), kind)  # out of range: None (the routes refused it already)
    out["interrupt"] = out["interrupt"] or 0
    # Whether its host tells its person itself (then we do not), and the delivery it reported (agent_hooks.notify).
    out["notified_by_host"] = 1 if item.get("notified_by_host") in (1, True) else 0
    state = item.get("notify_state")
    out["notify_state"] = state if isinstance(state, str) and len(state) <= NOTIFY_STATE_CHARS else None
    if out["created_at"] is None or not out["session_id"] or not out["tool_name"]:
        return None
    return out


_ANSWER_COLUMNS = ("state", "decision", "message", "interrupt", "answers", "answered_by", "answered_via",
                   "answered_where", "answered_at", "waited_ms", "note", "notify_state")


def _notice_of(conn: sqlite3.Connection, approval_id: str) -> tuple[Any, Any]:
    row = conn.execute("SELECT notified_by_host, notify_state FROM approvals WHERE id = ?", (approval_id,)).fetchone()
    return (row[0] or 0, row[1]) if row else (0, None)


@dataclass
class Stored:
    """What :func:`store_remote` did: whether the pending list changed, how many of the host's pending
    requests are left out (past ``max_requests_per_host``), and how many new ones were refused
    (``max_rows`` full)."""

    changed: bool = False
    left_out: set[str] = field(default_factory=set)  # the host's pending requests not kept (ids)
    settled: set[str] = field(default_factory=set)  # ids it reported settled, or kept: no longer left out
    refused: int = 0


def store_remote(conn: sqlite3.Connection, host: str, items: list[Any], at: float, full: bool = True,
                 caps: limits.Limits | None = None) -> Stored:
    """Keep a host's reported requests (``full``: all it has, so a pending copy it left out is gone
    there). With ``caps``: the host's newest ``max_requests_per_host`` pending ones (by their time),
    within ``max_rows`` (agent_hooks.center.limits)."""
    out = Stored()
    settled = False  # a copy settled here now: the host's history is trimmed (limits.prune_settled)
    fresh: list[dict[str, Any]] = []
    reported = {i["id"] for i in items if isinstance(i, dict) and isinstance(i.get("id"), str)}
    for item in items[:MAX_REPORTED]:
        row = _clean(item, host)
        if row is None:
            continue
        if row["state"] != approvals.PENDING:
            out.settled.add(row["id"])
        mine = approvals.get(conn, row["id"])
        if mine is None:
            if row["state"] == approvals.PENDING:
                fresh.append(row)  # settled before we ever saw it: nothing to show
        elif mine["host"] != host:
            continue  # an id of another host's request (or ours): never overwritten from here
        elif (row["notified_by_host"], row["notify_state"]) != _notice_of(conn, row["id"]) \
                and row["state"] == mine["state"] == approvals.PENDING:
            # The host's word on telling its person (and how that went): no change to the request itself.
            conn.execute("UPDATE approvals SET notified_by_host = ?, notify_state = ? WHERE id = ?",
                         (row["notified_by_host"], row["notify_state"], row["id"]))
            out.changed = True
        elif mine["state"] == approvals.PENDING and row["state"] != approvals.PENDING:
            conn.execute(f"UPDATE approvals SET {', '.join(c + ' = ?' for c in _ANSWER_COLUMNS)} WHERE id = ?",
                         [row[c] for c in _ANSWER_COLUMNS] + [row["id"]])
            out.changed = settled = True
        elif row["state"] == approvals.PENDING and _withdrawn_here(mine, host):
            # Withdrawn here only because a report left it out, and its host says it is pending: the
            # host's row is the truth, so the copy is listed again (else it stayed hidden until it expired).
            conn.execute(f"UPDATE approvals SET {', '.join(c + ' = ?' for c in _ANSWER_COLUMNS)} WHERE id = ?",
                         [row[c] for c in _ANSWER_COLUMNS] + [row["id"]])
            out.changed = True
    if full:
        # A copy pending here that the host no longer reports at all: gone there (answered long ago, or lost).
        for (aid,) in conn.execute("SELECT id FROM approvals WHERE state = 'pending' AND host = ?", (host,)).fetchall():
            if aid not in reported:
                approvals.settle(conn, aid, approvals.WITHDRAWN, f"no longer pending on {host}", "remote", at)
                out.changed = settled = True
    if caps is not None:
        if settled:
            limits.prune_settled(conn, host, caps)
        fresh = _within(conn, host, fresh, caps, out)
    for row in fresh:
        cols = list(row)
        conn.execute(f"INSERT INTO approvals ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                     [row[c] for c in cols])
        out.changed = True
    return out


def _withdrawn_here(mine: dict[str, Any], host: str) -> bool:
    """True for a copy the command center withdrew itself (its host's full report left it out)."""
    return (mine["state"] == approvals.WITHDRAWN and mine.get("answered_via") == "remote"
            and mine.get("note") == f"no longer pending on {host}")


def _within(conn: sqlite3.Connection, host: str, fresh: list[dict[str, Any]], caps: limits.Limits,
            out: Stored) -> list[dict[str, Any]]:
    """Of a host's pending copies and its new ones, the newest ``max_requests_per_host``: the older copies
    are dropped (never answered: only their copy here goes), the new ones past the cap or past
    ``max_rows`` are not stored. The new rows to insert."""
    kept = conn.execute("SELECT id, created_at FROM approvals WHERE state = 'pending' AND host = ?",
                        (host,)).fetchall()
    everyone: list[tuple[float, str, dict[str, Any] | None]] = [(created or 0.0, aid, None) for aid, created in kept]
    everyone += [(row["created_at"] or 0.0, row["id"], row) for row in fresh]
    everyone.sort(key=lambda x: (x[0], x[1]), reverse=True)  # newest first
    keep, rest = everyone[:caps.requests_per_host], everyone[caps.requests_per_host:]
    out.left_out = {aid for _, aid, _ in rest}
    out.settled |= {aid for _, aid, _ in keep}
    for _, aid, row in rest:
        if row is None:
            conn.execute("DELETE FROM approvals WHERE id = ? AND state = 'pending'", (aid,))
            out.changed = True
    new = [row for _, _, row in keep if row is not None]
    room = max(0, caps.rows - limits.rows_kept(conn))
    if len(new) > room:
        out.refused = len(new) - room
        new = new[:room]  # the newest of them
    return new


def pending(conn: sqlite3.Connection, own_host: str, now: float,
            limit: int = MAX_REPORTED) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every pending request of the fleet as GET /api/approvals shows them, oldest first, each with the
    board card of its session (``card``), and how many of each host's were left out.

    At most ``limit``: this host's own requests all (up to it), then a fair share of what is left for
    each other host (the oldest of each), so that no host's flood pushes out another's, or ours.
    Another host's copy is left out once long past its expiry."""
    # state = 'pending' as a literal: the partial index of pending rows answers it, whatever the history's size.
    rows = conn.execute("SELECT host, id, created_at FROM approvals WHERE state = 'pending'"
                        " AND (host = '' OR expires_at IS NULL OR expires_at >= ?)",
                        (now - EXPIRED_GRACE_S,)).fetchall()
    by_host: dict[str, list[tuple[float, str]]] = {}
    for host, aid, created in rows:
        by_host.setdefault(host, []).append((created or 0.0, aid))
    for found in by_host.values():
        found.sort()
    chosen = by_host.pop("", [])[:limit]
    share = fair_shares({h: len(v) for h, v in by_host.items()}, limit - len(chosen))
    left_out = {h: len(v) - share[h] for h, v in by_host.items() if len(v) > share[h]}
    for host, found in by_host.items():
        chosen += found[:share[host]]
    out: list[dict[str, Any]] = []
    if not chosen:
        return out, left_out
    ids = [aid for _, aid in chosen]
    cur = conn.execute(approvals._SELECT + f" WHERE id IN ({', '.join('?' * len(ids))})", ids)
    cols = [d[0] for d in cur.description]
    for row in sorted((dict(zip(cols, r, strict=True)) for r in cur.fetchall()),
                      key=lambda r: (r["created_at"] or 0.0, r["id"])):
        item = approvals.public(row, own_host)
        if row["host"]:
            card = fleetdb.find(conn, row["session_id"], None, row["host"])
            item["card"] = card["id"] if card is not None and card["host"] == row["host"] else None
        out.append(item)
    from agent_hooks.notify.outbox import attach

    return attach(conn, out), left_out


def fair_shares(counts: dict[str, int], room: int) -> dict[str, int]:
    """How many of each host's ``counts`` fit in ``room``: an equal share each, and a host that needs
    less than its share leaves the rest to the others (max-min fair)."""
    share: dict[str, int] = {}
    left = max(0, room)
    order = sorted(counts, key=lambda h: (counts[h], h))  # the smallest need first
    for i, host in enumerate(order):
        share[host] = min(counts[host], left // (len(order) - i))
        left -= share[host]
    for host in order:  # what the division left over, one host after another
        extra = min(left, counts[host] - share[host])
        share[host] += extra
        left -= extra
    return share


def route(conn: sqlite3.Connection, ref: str, body: dict[str, Any], by: str, where: str,
          at: float, note: str | None = None) -> fleetdb.Result | None:
    """POST /api/approvals/<ref> for another host's request: a control for that host (202 with its seq),
    or 409 / 400 at once. None for this host's own requests (answered here, as usual)."""
    row = approvals.find(conn, ref)
    if row is None or not row["host"]:
        return None
    if row["state"] != approvals.PENDING:
        return fleetdb.Result(409, {"error": approvals.already(row), "already": True,
                                     "approval": approvals.public(row, row["host"])})
    decision = str(body.get("decision") or "")
    try:
        answers = approvals.check_answer(row, decision, body.get("message"), body.get("answers"))
    except approvals.AnswerError as exc:
        return fleetdb.Result(400, {"error": str(exc)})
    doc = {"id": row["id"], "decision": decision, "message": body.get("message"),
           "interrupt": bool(body.get("interrupt")), "answers": answers, "by": by, "where": where, "note": note}
    seq = fleetdb.add_control(conn, host=row["host"], kind="approval", action="answer", at=at,
                              session_id=row["session_id"], reason=json.dumps(doc))
    return fleetdb.Result(202, {"ok": True, "host": row["host"], "applied": "sent", "seq": seq, "id": row["id"]})


async def finish(hub: Any, routed: fleetdb.Result) -> Any:
    """The answer to POST /api/approvals/<id> for another host's request: that host's word (200, or 409
    "already answered"), or 202 when it said nothing within WAIT_S (the answer is on its way)."""
    from agent_hooks.server.jsonout import JSONResponse

    body = dict(routed.body)
    if routed.status != 202:
        return JSONResponse(body, status_code=routed.status)
    result = await hub.host_word(body["seq"], WAIT_S, body["host"])  # live.Hub: no import of control.py
    if result is None:
        body["applied"] = "sent, not confirmed yet"
        return JSONResponse(body, status_code=202)
    row = result.get("approval")
    if isinstance(row, dict):
        await hub.write(settle_from_host, body["host"], row)  # our copy follows at once
    status = int(result.get("status") or 502)
    if status == 200:
        return JSONResponse({"ok": True, "host": body["host"], "applied": "answered",
                             # Every column (a host of another version may send fewer): never a 500.
                             "approval": approvals.public({**dict.fromkeys(approvals.COLUMNS), **row,
                                                           "host": body["host"]}, body["host"])
                             if isinstance(row, dict) else None})
    doc: dict[str, Any] = {"error": str(result.get("error") or f"host {body['host']} answered {status}"),
                           "host": body["host"]}
    if status == 409:
        doc["already"] = True
    return JSONResponse(doc, status_code=status if status in (400, 404, 409) else 502)


def settle_from_host(conn: sqlite3.Connection, host: str, row: Any) -> fleetdb.Result:
    """The host's row after it answered (or refused) a routed answer: our copy follows it at once."""
    changed = store_remote(conn, host, [row], time.time(), full=False).changed if isinstance(row, dict) else False
    return fleetdb.Result(200, {"approvals_changed": changed})
