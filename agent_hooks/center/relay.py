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
from typing import Any

from agent_hooks.center import fleetdb
from agent_hooks.features import approvals

# Settled requests a host keeps reporting for this long: the command center learns how they ended.
RESOLVED_KEPT_S = 120.0
# How long POST /api/approvals/<id> waits for the host to say what became of a routed answer.
WAIT_S = 5.0
# A pending copy whose request expired this long ago is left out of the command center's list
# (its host, down, could not report its end).
EXPIRED_GRACE_S = 2.0
MAX_REPORTED = 500
_ID = re.compile(r"^[A-Za-z0-9_-]{4,64}$")
_TEXT_LIMITS = {"session_id": 200, "kind": 20, "tool_name": 200, "tool_use_id": 200, "gate": 200, "on_timeout": 20,
                "state": 20, "decision": 20, "message": approvals.MAX_MESSAGE_CHARS, "answered_by": 200,
                "answered_via": 20, "answered_where": 200, "note": 500}
_JSON_LIMITS = {"tool_input": approvals.MAX_INPUT_CHARS, "questions": 64 * 1024, "permission_suggestions": 64 * 1024,
                "answers": 64 * 1024}


# -- the host's side ------------------------------------------------------------------------

def host_rows(conn: sqlite3.Connection, now: float) -> list[dict[str, Any]]:
    """This host's requests to report: pending ones, and those settled in the last RESOLVED_KEPT_S."""
    cur = conn.execute(approvals._SELECT + " WHERE host = '' AND (state = 'pending' OR answered_at >= ?)"
                       " ORDER BY created_at LIMIT ?", (now - RESOLVED_KEPT_S, MAX_REPORTED))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


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
    seq = int(control.get("seq") or 0)
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
    for key in ("created_at", "expires_at", "answered_at"):
        value = item.get(key)
        out[key] = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    for key in ("interrupt", "waited_ms"):
        value = item.get(key)
        out[key] = int(value) if isinstance(value, int) and not isinstance(value, bool) else None
    out["interrupt"] = out["interrupt"] or 0
    if out["created_at"] is None or not out["session_id"] or not out["tool_name"]:
        return None
    return out


_ANSWER_COLUMNS = ("state", "decision", "message", "interrupt", "answers", "answered_by", "answered_via",
                   "answered_where", "answered_at", "waited_ms", "note")


def store_remote(conn: sqlite3.Connection, host: str, items: list[Any], at: float, full: bool = True) -> bool:
    """Keep a host's reported requests (``full``: all it has, so a pending copy it left out is gone
    there); True when the pending list changed."""
    changed = False
    reported_pending: set[str] = set()
    for item in items[:MAX_REPORTED]:
        row = _clean(item, host)
        if row is None:
            continue
        if row["state"] == approvals.PENDING:
            reported_pending.add(row["id"])
        mine = approvals.get(conn, row["id"])
        if mine is None:
            if row["state"] != approvals.PENDING:
                continue  # settled before we ever saw it: nothing to show
            cols = list(row)
            conn.execute(f"INSERT INTO approvals ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                         [row[c] for c in cols])
            changed = True
        elif mine["host"] != host:
            continue  # an id of another host's request (or ours): never overwritten from here
        elif mine["state"] == approvals.PENDING and row["state"] != approvals.PENDING:
            conn.execute(f"UPDATE approvals SET {', '.join(c + ' = ?' for c in _ANSWER_COLUMNS)} WHERE id = ?",
                         [row[c] for c in _ANSWER_COLUMNS] + [row["id"]])
            changed = True
        elif row["state"] == approvals.PENDING and _withdrawn_here(mine, host):
            # Withdrawn here only because a report left it out, and its host says it is pending: the
            # host's row is the truth, so the copy is listed again (else it stayed hidden until it expired).
            conn.execute(f"UPDATE approvals SET {', '.join(c + ' = ?' for c in _ANSWER_COLUMNS)} WHERE id = ?",
                         [row[c] for c in _ANSWER_COLUMNS] + [row["id"]])
            changed = True
    if not full:
        return changed
    # A copy pending here that the host no longer reports at all: gone there (answered long ago, or lost).
    for (aid,) in conn.execute("SELECT id FROM approvals WHERE host = ? AND state = 'pending'", (host,)).fetchall():
        if aid not in reported_pending and not any(isinstance(i, dict) and i.get("id") == aid for i in items):
            approvals.settle(conn, aid, approvals.WITHDRAWN, f"no longer pending on {host}", "remote", at)
            changed = True
    return changed


def _withdrawn_here(mine: dict[str, Any], host: str) -> bool:
    """True for a copy the command center withdrew itself (its host's full report left it out)."""
    return (mine["state"] == approvals.WITHDRAWN and mine.get("answered_via") == "remote"
            and mine.get("note") == f"no longer pending on {host}")


def pending(conn: sqlite3.Connection, own_host: str, now: float) -> list[dict[str, Any]]:
    """Every pending request of the fleet, oldest first, as GET /api/approvals shows them, each with the
    board card of its session (``card``): another host's copy is left out once long past its expiry."""
    out = []
    # state = 'pending' as a literal: the partial index of pending rows answers it, whatever the history's size.
    cur = conn.execute(approvals._SELECT + " WHERE state = 'pending' ORDER BY created_at LIMIT ?", (MAX_REPORTED,))
    cols = [d[0] for d in cur.description]
    for row in (dict(zip(cols, r, strict=True)) for r in cur.fetchall()):
        if row["host"] and row["expires_at"] and row["expires_at"] < now - EXPIRED_GRACE_S:
            continue
        item = approvals.public(row, own_host)
        if row["host"]:
            card = fleetdb.find(conn, row["session_id"], None, row["host"])
            item["card"] = card["id"] if card is not None and card["host"] == row["host"] else None
        out.append(item)
    return out


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
    from starlette.responses import JSONResponse

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
    changed = store_remote(conn, host, [row], time.time(), full=False) if isinstance(row, dict) else False
    return fleetdb.Result(200, {"approvals_changed": changed})
