"""Numbers a caller sends are finite and in range, or refused naming the field; nothing stored breaks a read.

Python's json reads ``1e999`` as infinity and ``10**30`` as an int SQLite cannot hold. Sent to a write
route, each must get a 4xx that says which field, and store nothing. The largest values each field
takes are stored through every write route, and values an older version may have let in are written
straight into the SQLite file; after both, every read route and the board's WebSocket hello answer
200 with strict JSON (no ``Infinity``, which a browser cannot parse).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.center import Center
from support.routes import request

HOST = {"X-Agent-Hooks-Host": "host-n", "Content-Type": "application/json"}
BIG = str(10**30)
# JSON texts Python parses to numbers no field can take: infinity, NaN, an int past SQLite's, negatives.
HOSTILE = ["1e999", "-1e999", "NaN", "Infinity", BIG, "-" + BIG, "-1"]


def strict(text: str | bytes) -> Any:
    """JSON as a browser's JSON.parse reads it: NaN and Infinity are no JSON."""
    def refuse(constant: str) -> Any:
        raise AssertionError(f"not strict JSON: {constant} in {text[:300]!r}")
    return json.loads(text, parse_constant=refuse)


def _rows(home: Path) -> tuple[int, ...]:
    with sqlite3.connect(home / "store.db") as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                     for t in ("fleet_sessions", "approvals", "fleet_events", "fleet_cost_samples", "fleet_hosts"))


@pytest.fixture
def center(tmp_path: Path) -> Iterator[Center]:
    server = Center(tmp_path / "agent-hooks").start()
    yield server
    server.stop()


def _request_row(**numbers: str) -> str:
    """A reported approval request as JSON text, its numbers spliced in as raw JSON."""
    row = {"id": "num00001", "kind": "permission", "state": "pending", "session_id": "s-num", "tool_name": "Bash",
           "tool_input": json.dumps({"command": "ls"}), "created_at": "@created_at", "expires_at": "@expires_at"}
    text = json.dumps(row)
    defaults = {"created_at": "1000", "expires_at": "4000000000"}
    for key in ("created_at", "expires_at"):
        text = text.replace(f'"@{key}"', numbers.pop(key, defaults[key]))
    for key, raw in numbers.items():
        text = text[:-1] + f', "{key}": {raw}}}'
    return text


def test_numbers_out_of_range_are_refused_naming_the_field(center: Center) -> None:
    home = Path(center.env["AGENT_HOOKS_HOME"])
    # A card for the controls' cursor to be real, and an epoch so `after` is read as the host's cursor.
    assert center.ingest({"tmux_session": "agent-n", "event": "start"}).status_code == 200
    epoch = center.http.get("/api/fleet/controls", params={"host": "host-n", "wait": "0"}).json()["epoch"]
    before = _rows(home)
    cases: list[tuple[str, str, bytes, str]] = []  # (method, path, body, the field the answer must name)
    for raw in HOSTILE:
        for field in ("tool_calls", "warned", "denied", "last_activity", "waiting_since"):
            body = f'{{"cards": [{{"session_id": "s-num", "{field}": {raw}}}]}}'
            cases.append(("POST", "/api/fleet/report", body.encode(), f"cards[0].{field}"))
        for field in ("created_at", "expires_at", "answered_at", "waited_ms", "interrupt"):
            body = f'{{"cards": [], "approvals": [{_request_row(**{field: raw})}]}}'
            cases.append(("POST", "/api/fleet/report", body.encode(), f"approvals[0].{field}"))
        cases.append(("POST", "/api/fleet/replies", f'{{"results": [{{"seq": {raw}}}]}}'.encode(), "results[0].seq"))
        approval = _request_row(created_at=raw)
        cases.append(("POST", "/api/fleet/replies", f'{{"results": [{{"seq": 1, "approval": {approval}}}]}}'.encode(),
                      "results[0].approval.created_at"))
        cases.append(("POST", "/api/hooks/ingest",
                      f'{{"tmux_session": "agent-n", "event": "tool_use", "cost_usd": {raw}}}'.encode(), "cost_usd"))
        if raw not in ("NaN", "Infinity"):  # (a query string has no JSON constants; 1e999 is its infinity)
            cases.append(("GET", f"/api/fleet/controls?host=host-n&epoch={epoch}&wait=0&after={raw}", b"", "after"))
    for raw in ("1e999", "inf", "nan", "-inf"):
        cases.append(("GET", f"/api/fleet/controls?host=host-n&epoch={epoch}&after=0&wait={raw}", b"", "wait"))
    cases.append(("POST", "/api/fleet/report", b'{"cards": [{"session_id": "s-num", "tool_calls": 2.5}]}',
                  "cards[0].tool_calls"))
    wrong = []
    for method, path, body, field in cases:
        answer = request(center.port, method, path, HOST, body)
        try:
            doc = strict(answer.body)
        except (AssertionError, ValueError):
            doc = {}
        if answer.status != 400 or field not in str(doc.get("error", "")):
            wrong.append(f"{method} {path} {body[:140]!r}: {answer.status} {answer.body[:200]!r}")
    assert not wrong, "\n".join(wrong)
    assert _rows(home) == before  # nothing of a refused request was stored
    # The error says what the field must be, and a 31-digit number is described, not printed.
    answer = request(center.port, "POST", "/api/fleet/report", HOST,
                     f'{{"cards": [{{"session_id": "s-num", "tool_calls": {BIG}}}]}}'.encode())
    assert answer.json()["error"] == "cards[0].tool_calls must be a whole number from 0 to 2**53, got a 31-digit number"


def _worst_accepted(center: Center) -> str:
    """The largest (and smallest) value of each field, through every write route: all accepted."""
    most_time, most_count, most_seq = 4_102_444_800, 2**53, 2**63 - 1
    card = {"session_id": "s-most", "tmux_session": "agent-most", "tool_calls": most_count, "warned": most_count,
            "denied": 0, "last_activity": most_time, "waiting_since": 0, "waiting_on": "needs_input"}
    req = {"id": "most0001", "kind": "permission", "state": "pending", "session_id": "s-most", "tool_name": "Bash",
           "tool_input": json.dumps({"command": "ls", "n": 1e308}), "created_at": 0, "expires_at": most_time}
    settled = dict(req, id="most0002", state="allowed", decision="allow", answered_at=most_time, waited_ms=most_count,
                   interrupt=1)
    r = request(center.port, "POST", "/api/fleet/report", HOST,
                json.dumps({"cards": [card], "approvals": [req, settled]}).encode())
    assert r.status == 200, r.body
    r = request(center.port, "POST", "/api/fleet/replies", HOST, json.dumps({"results": [{"seq": most_seq}]}).encode())
    assert r.status == 200, r.body
    r = center.ingest({"tmux_session": "agent-most", "event": "start", "cost_usd": 1e9})
    assert r.status_code == 200, r.text
    r = center.ingest({"tmux_session": "agent-most-2", "event": "start", "cost_usd": 0})
    assert r.status_code == 200, r.text
    r = request(center.port, "GET", f"/api/fleet/controls?host=host-n&after={most_seq}&wait=0")
    assert r.status == 200, r.body
    return str(r.json()["epoch"])


def _plant(home: Path) -> None:
    """What a store written by an older version may hold: infinities and numbers past any range."""
    inf = float("inf")
    details = ('{"session_id": "s-old", "tool_calls": 1e999, "warned": -1e999, "denied": 1e30,'
               ' "last_activity": 1e999, "waiting_since": NaN, "own_state": "live"}')
    with sqlite3.connect(home / "store.db") as conn:
        conn.execute("INSERT INTO fleet_sessions (id, host, local, session_id, tmux_session, agent_type, state,"
                     " events, tool_events, created_at, updated_at, details, cost_usd, cancelled_at)"
                     " VALUES ('old-card', 'host-old', 0, 's-old', 'agent-old', 'claude-code', 'running',"
                     " 1, 1e300, ?, ?, ?, ?, ?)", (-inf, inf, details, inf, inf))
        conn.execute("INSERT INTO fleet_cost_samples (fleet_id, at, usd) VALUES ('old-card', ?, ?), ('old-card', 1, ?)",
                     (inf, inf, -inf))
        conn.execute("INSERT INTO fleet_events (fleet_id, event, from_state, to_state, source, at)"
                     " VALUES ('old-card', 'start', 'idle', 'running', 'ingest', ?)", (inf,))
        conn.execute("INSERT INTO fleet_controls (host, kind, action, session_id, at) VALUES ('host-old', 'session',"
                     " 'cancel', 's-old', ?)", (inf,))
        conn.execute("INSERT OR REPLACE INTO fleet_hosts (host, last_seen_at, applied_seq) VALUES ('host-old', ?, 0)", (inf,))
        for aid, state, created in (("old00001", "pending", inf), ("old00002", "allowed", -inf)):
            conn.execute("INSERT INTO approvals (id, host, session_id, kind, tool_name, tool_input, state, created_at,"
                         " expires_at, answered_at, waited_ms, interrupt, decision)"
                         " VALUES (?, 'host-old', 's-old', 'permission', 'Bash', '{\"n\": 1e999, \"m\": NaN}', ?, ?,"
                         " ?, ?, 1e30, 7, 'allow')", (aid, state, created, inf, inf))


def _read_everything(center: Center, epoch: str, card: str) -> dict[str, Any]:
    """Every read route (``card``: the card whose pages are read): 200 and strict JSON each. The answers,
    by path."""
    out: dict[str, Any] = {}
    paths = ["/api/board", "/api/approvals", "/api/approvals?state=all", "/api/approvals?session=s-old",
             "/api/hooks/sessions", f"/api/hooks/sessions/{card}", f"/api/board/sessions/{card}",
             "/api/fleet/status", "/status", "/health", f"/api/fleet/controls?host=host-old&after=0&wait=0&epoch={epoch}"]
    bad = []
    for path in paths:
        r = request(center.port, "GET", path)
        try:
            out[path] = strict(r.body)
        except (AssertionError, ValueError) as exc:
            bad.append(f"{path}: {r.status} {exc}")
            continue
        if r.status != 200:
            bad.append(f"{path}: {r.status} {r.body[:200]!r}")
    with center.live() as ws:
        hello = ws.recv(timeout=10)
    try:
        out["hello"] = strict(hello)
    except AssertionError as exc:
        bad.append(f"WebSocket hello: {exc}")
    assert not bad, "\n".join(bad)
    return out


def test_the_worst_values_stored_leave_every_read_route_readable(center: Center) -> None:
    home = Path(center.env["AGENT_HOOKS_HOME"])
    epoch = _worst_accepted(center)
    most = center.wait_card(lambda c: c.get("session_id") == "s-most" and c.get("reported"), what="the reported card")
    got = _read_everything(center, epoch, most["id"])
    most = next(c for c in got["/api/board"]["cards"] if c.get("session_id") == "s-most")
    assert (most["tool_calls"], most["last_activity"]) == (2**53, 4_102_444_800)
    assert [a["id"] for a in got["/api/approvals"]["approvals"]] == ["most0001"]

    _plant(home)
    # The planted card is built (the board's writer thread must not fail on it) and shown with what is usable.
    old = center.wait_card(lambda c: c["id"] == "old-card", what="the card an older version stored")
    got = _read_everything(center, epoch, "old-card")
    assert old["tool_calls"] == 0 and old["badges"]["warned"] == 0 and old["badges"]["denied"] == 0
    assert "old00001" in {a["id"] for a in got["/api/approvals?state=all"]["approvals"]}
    assert any(c.get("session_id") == "s-old" for c in got["hello"]["cards"])
    # A new write still lands and reaches the board: the writer thread survived what it read.
    assert center.ingest({"tmux_session": "agent-after", "event": "start"}).status_code == 200
    center.wait_card(lambda c: c.get("tmux_session") == "agent-after", what="a card after the planted values")


def test_every_answer_is_written_by_the_strict_writer() -> None:
    """A route answers with agent_hooks.server.jsonout's JSONResponse, and the WebSocket with its dumps:
    Starlette's own JSONResponse (a 500 on infinity) and json.dumps sent to a client appear nowhere else."""
    root = Path(__file__).resolve().parent.parent / "agent_hooks"
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(root.parent).as_posix()
        if "from starlette.responses import" in text and "JSONResponse" in text.split("from starlette.responses import")[1].split("\n")[0] \
                and name != "agent_hooks/server/jsonout.py":
            found.append(f"{name}: Starlette's JSONResponse")
        if "send_text(json.dumps" in text:
            found.append(f"{name}: json.dumps sent on a WebSocket")
    assert not found, "\n".join(found)
