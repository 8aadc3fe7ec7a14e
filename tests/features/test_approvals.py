"""Approvals (docs/approvals.md): held permission dialogs, questions and gates, answered from elsewhere.

Real parts: the store is a real SQLite file, the hooks and the CLI run as the installed console
scripts, the server is a real `agent-hook server` on loopback.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent_hooks import config as config_mod
from agent_hooks import schema
from agent_hooks.features import approvals as ap
from agent_hooks.features import gates
from agent_hooks.output import Outcome, render

from support.approvals import PERMISSION, QUESTION, QUESTIONS, Held
from support.repo import fixture_payload
from support.scripts import EXECUTABLES, agent_hook, error_log, run_exe, store_rows
from support.waiting import wait_for

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")


def _store(home: Path) -> sqlite3.Connection:
    schema.migrate(str(home / "store.db"))
    return sqlite3.connect(home / "store.db", isolation_level=None)


def _pending(home: Path) -> list[dict[str, Any]]:
    proc = agent_hook("approvals", "--json", check=False)
    if proc.returncode != 0 and "store schema is at version 0" in proc.stderr:
        return []  # the hook is creating the store at this moment
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["approvals"]


def _pending_count(home: Path) -> int:
    """How many requests `agent-hook approvals` would list as pending, read from the store read-only.

    Waiting goes through this instead of the CLI: polling `agent-hook approvals` every 50 ms cost
    a process (~50 ms of CPU) per poll. The CLI still runs once for what the test asserts."""
    try:
        conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True, timeout=5)
    except sqlite3.OperationalError:
        return 0  # no store yet
    try:
        return len(ap.listing(conn))  # what the command lists
    except sqlite3.OperationalError:
        return 0  # the hook is creating the store at this moment
    finally:
        conn.close()


def _wait_pending(home: Path, n: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Wait until the store holds n pending requests, then list them once through the CLI."""
    wait_for(lambda: _pending_count(home) >= n, timeout=timeout)
    return _pending(home)


# -- the store's functions ---------------------------------------------------------------


def test_first_answer_wins_and_a_second_is_told_already_answered(hooks_home: Path) -> None:
    conn = _store(hooks_home)
    aid = ap.insert(conn, session_id="s1", kind=ap.PERMISSION, tool_name="Bash", tool_input={"command": "ls"},
                    at=time.time(), wait_s=60)
    first = ap.answer(conn, aid, "allow", by="uid 1 (a)", via="cli", where="h1")
    assert first.result == "answered" and first.row is not None and first.row["state"] == ap.ALLOWED
    assert first.row["answered_by"] == "uid 1 (a)" and first.row["waited_ms"] >= 0
    late = ap.answer(conn, aid, "deny", message="no", by="uid 2 (b)", via="api")
    assert late.result == "already" and late.error is not None
    assert late.error.startswith("already answered: allowed by uid 1 (a) via cli")
    assert ap.get(conn, aid)["state"] == ap.ALLOWED  # the late deny changed nothing
    assert ap.answer(conn, "ffffffffffff", "allow").result == "unknown"
    # A unique prefix names it; answers for a permission are refused.
    other = ap.insert(conn, session_id="s1", kind=ap.PERMISSION, tool_name="Bash", tool_input={}, at=time.time(),
                      wait_s=60)
    misfit = ap.answer(conn, other[:6], "allow", answers={"q": "x"})
    assert misfit.result == "invalid" and "answers are for questions" in (misfit.error or "")


def test_question_answers_by_text_header_or_number_and_several_labels(hooks_home: Path) -> None:
    conn = _store(hooks_home)
    aid = ap.insert(conn, session_id="s1", kind=ap.QUESTION, tool_name="AskUserQuestion",
                    tool_input={"questions": QUESTIONS}, questions=QUESTIONS, at=time.time(), wait_s=60)
    assert ap.answer(conn, aid, "allow").result == "invalid"  # a question needs answers
    misfit = ap.answer(conn, aid, "allow", answers={"nope": "x"})
    assert misfit.result == "invalid" and "Which database should we use?" in (misfit.error or "")
    done = ap.answer(conn, aid, "allow", answers={"database": "SQLite", "2": ["lint", "types"]})
    assert done.result == "answered" and done.row is not None and done.row["state"] == ap.ANSWERED
    decision = ap.permission_decision(done.row)
    assert decision == {"behavior": "allow", "updatedInput": {
        "questions": QUESTIONS,
        "answers": {"Which database should we use?": "SQLite", "Which checks should run?": "lint, types"}}}


def test_decisions_in_the_clients_format(hooks_home: Path) -> None:
    conn = _store(hooks_home)
    suggestions = PERMISSION["permission_suggestions"]

    def decided(decision: str, **kw: Any) -> dict[str, Any]:
        aid = ap.insert(conn, session_id="s", kind=ap.PERMISSION, tool_name="Bash", tool_input={"command": "x"},
                        suggestions=suggestions, at=time.time(), wait_s=60)
        assert ap.answer(conn, aid, decision, **kw).answered
        out = Outcome()
        out.permission = ap.permission_decision(ap.get(conn, aid))
        return json.loads(render("PermissionRequest", out) or "null")

    assert decided("allow") == {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                                       "decision": {"behavior": "allow"}}}
    # The dialog's "always allow" (the directory), not its separate "switch mode" choice.
    assert [x["type"] for x in suggestions] == ["addDirectories", "setMode"]
    assert decided("allow_always")["hookSpecificOutput"]["decision"] == {
        "behavior": "allow", "updatedPermissions": suggestions[:1]}
    assert decided("deny", message="use make clean", interrupt=True)["hookSpecificOutput"]["decision"] == {
        "behavior": "deny", "message": "use make clean", "interrupt": True}
    assert decided("deny")["hookSpecificOutput"]["decision"]["message"].startswith("Denied by")


def test_gate_config_problems_are_named_and_a_bad_gate_is_skipped() -> None:
    cfg = config_mod.defaults()
    cfg["approvals"]["gates"] = [
        {"tool": "Bash", "match": "git push("},
        {"tool": "Bash", "match": "deploy", "on_timeout": "maybe", "timeout_s": 0, "colour": "red"},
        {"tool": "*"},
        {"name": "push", "tool": "Bash", "match": r"git\s+push", "agent": "build*"},
    ]
    problems = config_mod.validate(cfg)
    assert any("approvals.gates[0].match: invalid regex" in p for p in problems)
    assert any("approvals.gates[1].on_timeout" in p for p in problems)
    assert any("approvals.gates[1].timeout_s" in p for p in problems)
    assert any("unknown setting approvals.gates[1].colour" in p for p in problems)
    assert any("approvals.gates[2] needs a tool or a match" in p for p in problems)
    valid, found = gates.compiled(cfg)
    assert [g.name for g in valid] == ["push"] and len(found) == 5
    who = {"task": None, "agent": "builder", "role": "worker", "host": "h"}
    assert gates.first_match(valid, "Bash", {"command": "git  push origin"}, who).name == "push"
    assert gates.first_match(valid, "Bash", {"command": "git push"}, {**who, "agent": "other"}) is None
    assert gates.first_match(valid, "Edit", {"file_path": "git push"}, who) is None


# -- the PermissionRequest executable ---------------------------------------------------


def test_permission_request_is_allowed_from_the_cli(hooks_home: Path) -> None:
    held = Held(PERMISSION)
    [row] = _wait_pending(hooks_home)
    assert row["kind"] == "permission" and row["tool_input"]["command"] == "touch /home/dev/acme/never"
    assert row["suggestions"] == PERMISSION["permission_suggestions"] and row["card"] == PERMISSION["session_id"]
    assert row["expires_at"] - row["created_at"] == pytest.approx(30, abs=0.01)
    t0 = time.monotonic()
    assert "allowed" in agent_hook("approve", row["id"], "--always").stdout
    answer = held.answer()
    assert time.monotonic() - t0 < 2.0  # the waiting hook sees the answer within its poll
    assert answer == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
        "behavior": "allow", "updatedPermissions": PERMISSION["permission_suggestions"][:1]}}}
    late = agent_hook("approve", row["id"], check=False)
    assert late.returncode == 1 and "already answered: allowed by uid" in late.stderr
    assert _pending(hooks_home) == []
    shown = agent_hook("session", "show", PERMISSION["session_id"]).stdout
    assert row["id"] in shown and "allow_always by uid" in shown
    data = json.loads(agent_hook("session", "show", PERMISSION["session_id"], "--json").stdout)
    assert data["approvals"][0]["answer"]["via"] == "cli"


def test_deny_with_interrupt_and_a_question_answered(hooks_home: Path) -> None:
    held = Held(PERMISSION)
    [row] = _wait_pending(hooks_home)
    agent_hook("deny", row["id"], "--message", "not in this repo", "--interrupt")
    assert held.answer()["hookSpecificOutput"]["decision"] == {
        "behavior": "deny", "message": "not in this repo", "interrupt": True}
    held = Held(QUESTION)
    [row] = _wait_pending(hooks_home)
    assert row["kind"] == "question" and row["questions"] == QUESTIONS
    assert "Q1: Which database should we use?" in agent_hook("approvals").stdout
    agent_hook("approve", row["id"], "--answer", "Database=Postgres", "--answer", "Checks=lint",
               "--answer", "Checks=only the fast ones")
    decision = held.answer()["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "allow"
    assert decision["updatedInput"]["answers"] == {"Which database should we use?": "Postgres",
                                                   "Which checks should run?": "lint, only the fast ones"}


def test_no_answer_gives_no_decision_and_the_request_expires(hooks_home: Path) -> None:
    held = Held(PERMISSION, {"AGENT_HOOKS__APPROVALS__WAIT_S": "1"})
    assert held.answer(timeout=10) is None  # the client's own dialog stays
    [row] = store_rows(hooks_home, "SELECT state, note, answered_via FROM approvals")
    assert row["state"] == "expired" and row["answered_via"] == "timeout"
    late = agent_hook("deny", store_rows(hooks_home, "SELECT id FROM approvals")[0]["id"], "-m", "x", check=False)
    assert late.returncode == 1 and "no longer waiting" in late.stderr


def test_wait_zero_observes_only(hooks_home: Path) -> None:
    proc = run_exe(EXECUTABLES["PermissionRequest"], PERMISSION, {"AGENT_HOOKS__APPROVALS__WAIT_S": "0"})
    assert proc.returncode == 0 and proc.stdout == b""
    assert store_rows(hooks_home, "SELECT count(*) AS n FROM approvals")[0]["n"] == 0


@pytest.mark.parametrize("said", [{"CLAUDE_CODE_SESSION_ATTENDED": "0", "CLAUDE_CODE_ENTRYPOINT": "sdk-cli"},
                                  {"CLAUDE_CODE_ENTRYPOINT": "sdk-py"}])
def test_a_session_nobody_sits_at_is_not_held_unless_asked(hooks_home: Path, said: dict[str, str]) -> None:
    """`claude -p` runs PermissionRequest for calls it is about to deny (2.1.332): holding those would
    stall an unattended run wait_s per call, so by default the hook gives no decision at once."""
    t0 = time.monotonic()
    proc = run_exe(EXECUTABLES["PermissionRequest"], PERMISSION, {"AGENT_HOOKS__APPROVALS__WAIT_S": "30", **said})
    assert proc.returncode == 0 and proc.stdout == b""
    assert time.monotonic() - t0 < 10  # not the 30 s wait
    assert store_rows(hooks_home, "SELECT count(*) AS n FROM approvals")[0]["n"] == 0
    # The session still shows it asked (needs input), as with wait_s = 0.
    assert store_rows(hooks_home, "SELECT count(*) AS n FROM session_events")[0]["n"] >= 1
    # Asked for: a person may answer it from the board.
    held = Held(PERMISSION, {**said, "AGENT_HOOKS__APPROVALS__HOLD_UNATTENDED": "true"})
    [row] = _wait_pending(hooks_home)
    agent_hook("approve", row["id"])
    assert held.answer()["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
    # The interactive client's own words: held as before.
    held = Held(PERMISSION, {"CLAUDE_CODE_SESSION_ATTENDED": "1", "CLAUDE_CODE_ENTRYPOINT": "cli"})
    [row] = _wait_pending(hooks_home)
    agent_hook("deny", row["id"], "-m", "no")
    assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "deny"


def test_a_stopped_hook_withdraws_its_request_at_once(hooks_home: Path) -> None:
    held = Held(PERMISSION)
    [row] = _wait_pending(hooks_home)
    held.proc.send_signal(signal.SIGTERM)
    assert held.answer() is None
    [got] = store_rows(hooks_home, "SELECT state, answered_by, note FROM approvals WHERE id = ?", (row["id"],))
    assert got["state"] == "withdrawn" and got["answered_by"] == "terminal" and "SIGTERM" in got["note"]


def test_the_tools_next_event_withdraws_a_dialog_answered_at_the_terminal(hooks_home: Path) -> None:
    held = Held(PERMISSION, {"AGENT_HOOKS__APPROVALS__WAIT_S": "5"})
    [row] = _wait_pending(hooks_home)
    post = {**fixture_payload("PostToolUse-Bash.json"), "session_id": PERMISSION["session_id"]}
    assert run_exe(EXECUTABLES["PostToolUse"], post).returncode == 0
    assert _pending(hooks_home) == []
    assert held.answer() is None  # the hook saw it settled and gave no decision
    [got] = store_rows(hooks_home, "SELECT state, note FROM approvals WHERE id = ?", (row["id"],))
    assert got["state"] == "withdrawn" and got["note"] == "answered at the terminal: the tool ran"


def test_a_subagents_tool_ran_withdraws_only_its_own_dialog(hooks_home: Path) -> None:
    # A subagent's hooks carry its agent_id (the main thread's carry none). The main thread's open
    # dialog for Bash must stay on the board when a subagent's Bash call finishes, and the reverse.
    held = Held(PERMISSION, {"AGENT_HOOKS__APPROVALS__WAIT_S": "20"})
    [main_row] = _wait_pending(hooks_home)
    post = {**fixture_payload("PostToolUse-Bash.json"), "session_id": PERMISSION["session_id"]}
    assert run_exe(EXECUTABLES["PostToolUse"], {**post, "agent_id": "a1b2c3"}).returncode == 0
    assert [r["id"] for r in _pending(hooks_home)] == [main_row["id"]]
    sub = Held({**PERMISSION, "agent_id": "a1b2c3", "agent_type": "general-purpose"},
               {"AGENT_HOOKS__APPROVALS__WAIT_S": "20"})
    assert len(_wait_pending(hooks_home, 2)) == 2
    assert run_exe(EXECUTABLES["PostToolUse"], post).returncode == 0  # the main thread's call ran
    [left] = _pending(hooks_home)
    assert left["id"] != main_row["id"]
    assert run_exe(EXECUTABLES["PostToolUse"], {**post, "agent_id": "a1b2c3"}).returncode == 0
    assert _pending(hooks_home) == []
    assert held.answer() is None and sub.answer() is None


# -- gates ---------------------------------------------------------------------------------


def _gate_env(home: Path, gates_toml: str) -> None:
    (home / "config.toml").parent.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(gates_toml)


PUSH = {**fixture_payload("PreToolUse-Bash.json"), "tool_input": {"command": "git push origin main"}}


def test_a_gate_holds_a_matching_call_until_denied(hooks_home: Path) -> None:
    _gate_env(hooks_home, '[[approvals.gates]]\nname = "push"\ntool = "Bash"\nmatch = "git push"\ntimeout_s = 30\n')
    assert "approvals.gates" not in agent_hook("config").stderr
    # Not matching: nothing held, nothing recorded.
    other = {**PUSH, "tool_input": {"command": "git status"}, "tool_use_id": "toolu_9"}
    assert run_exe(EXECUTABLES["PreToolUse"], other).stdout == b""
    held = Held(PUSH)
    [row] = _wait_pending(hooks_home)
    assert row["kind"] == "gate" and row["gate"] == "push" and row["tool_use_id"] == PUSH["tool_use_id"]
    agent_hook("deny", row["id"], "-m", "push after review")
    whole = held.answer()
    assert "continue" not in whole  # a plain deny lets the turn go on
    out = whole["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert "Approval gate 'push'" in out["permissionDecisionReason"]
    assert "push after review" in out["permissionDecisionReason"]
    [call] = store_rows(hooks_home, "SELECT outcome, rule FROM tool_calls WHERE tool_use_id = ?", (PUSH["tool_use_id"],))
    assert call["outcome"] == "denied" and call["rule"] == "gate:push"
    # Deny and stop the turn: the universal continue: false, with the reason shown to the person.
    again = Held({**PUSH, "tool_use_id": "toolu_2"})
    [row] = _wait_pending(hooks_home)
    agent_hook("deny", row["id"], "-m", "stop here", "--interrupt")
    doc = again.answer()
    assert doc["continue"] is False and "stop here" in doc["stopReason"]
    assert doc["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_gate_times_out_denied_with_its_reason_or_allowed(hooks_home: Path) -> None:
    _gate_env(hooks_home, '[[approvals.gates]]\nname = "push"\ntool = "Bash"\nmatch = "git push"\ntimeout_s = 1\n'
                          '[[approvals.gates]]\ntool = "Bash"\nmatch = "deploy"\ntimeout_s = 1\non_timeout = "allow"\n')
    out = Held(PUSH).answer(timeout=10)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert "Approval gate 'push': nobody answered within 1 s" in out["permissionDecisionReason"]
    deploy = {**PUSH, "tool_input": {"command": "./deploy staging"}, "tool_use_id": "toolu_d"}
    allowed = Held(deploy).answer(timeout=10)
    assert "permissionDecision" not in (allowed or {}).get("hookSpecificOutput", {})
    assert "nobody answered within 1 s, so the call is allowed" in allowed["hookSpecificOutput"]["additionalContext"]
    states = [r["state"] for r in store_rows(hooks_home, "SELECT state FROM approvals ORDER BY created_at")]
    assert states == ["expired", "expired"]


def test_cancellation_decides_before_a_gate(hooks_home: Path) -> None:
    _gate_env(hooks_home, '[[approvals.gates]]\ntool = "Bash"\nmatch = "git push"\ntimeout_s = 30\n')
    run_exe(EXECUTABLES["PreToolUse"], {**PUSH, "tool_input": {"command": "ls"}})  # records the session
    agent_hook("cancel", PUSH["session_id"], "--reason", "stop now")
    t0 = time.monotonic()
    proc = run_exe(EXECUTABLES["PreToolUse"], PUSH, {"AGENT_HOOKS__APPROVALS__WAIT_S": "30"})
    assert time.monotonic() - t0 < 10
    assert "stop now" in json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert store_rows(hooks_home, "SELECT count(*) AS n FROM approvals")[0]["n"] == 0


def test_a_bad_gate_fails_open_with_a_trace(hooks_home: Path) -> None:
    _gate_env(hooks_home, '[[approvals.gates]]\ntool = "Bash"\nmatch = "git push("\n')
    assert "approvals.gates[0].match: invalid regex" in agent_hook("config").stderr
    proc = run_exe(EXECUTABLES["PreToolUse"], PUSH)
    assert proc.returncode == 0 and proc.stdout == b""  # the call goes on
    assert any(e["kind"] == "config" and "invalid regex" in e["message"] for e in error_log(hooks_home))


# -- the server ----------------------------------------------------------------------------


@pytest.fixture
def server(hooks_home: Path) -> Any:
    from support.servers import start_server

    srv = start_server(hooks_home, env={"AGENT_HOOKS__APPROVALS__WAIT_S": "30"})
    try:
        yield srv
    finally:
        srv.stop()


def _api(server: Any, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None,
                     {"Content-Type": "application/json"} if body is not None else {})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


def _post_in_thread(server: Any, payload: dict[str, Any]) -> tuple[threading.Thread, list[Any]]:
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(server.post(payload, timeout=60)), daemon=True)
    thread.start()
    return thread, got


def test_http_hook_is_held_and_answered_through_the_api(server: Any) -> None:
    thread, got = _post_in_thread(server, PERMISSION)
    rows = wait_for(lambda: _api(server, "GET", "/api/approvals")[1]["approvals"])
    [row] = rows
    assert set(row) >= {"id", "host", "session_id", "card", "kind", "tool_name", "tool_input", "questions",
                        "suggestions", "state", "created_at", "expires_at"}
    # Other sessions' tool calls are answered meanwhile (the hold blocks neither the loop nor the pool).
    t0 = time.monotonic()
    assert server.post(fixture_payload("PreToolUse-Read.json"))[0] == 200
    assert time.monotonic() - t0 < 1.0
    assert _api(server, "POST", "/api/approvals/nope", {"decision": "allow"})[0] == 404
    assert _api(server, "POST", f"/api/approvals/{row['id']}", {"decision": "maybe"})[0] == 400
    status, body = _api(server, "POST", f"/api/approvals/{row['id']}", {"decision": "deny", "message": "no"})
    assert status == 200 and body["approval"]["answer"]["via"] == "api"
    thread.join(10)
    status, headers, data = got[0]
    assert status == 200
    assert json.loads(data)["hookSpecificOutput"]["decision"] == {"behavior": "deny", "message": "no",
                                                                  "interrupt": False}
    status, body = _api(server, "POST", f"/api/approvals/{row['id']}", {"decision": "allow"})
    assert status == 409 and body["already"] and body["error"].startswith("already answered: denied")
    # The session page's data carries every request of the session with its answer.
    page = wait_for(lambda: (lambda r: r[1] if r[0] == 200 else None)(
        _api(server, "GET", f"/api/board/sessions/{PERMISSION['session_id']}")))
    [kept] = page["approvals"]
    assert kept["id"] == row["id"] and kept["answer"]["message"] == "no" and kept["answer"]["decision"] == "deny"
    assert _api(server, "GET", "/api/approvals")[1]["approvals"] == []
    history = _api(server, "GET", "/api/approvals?state=all")[1]["approvals"]
    assert [h["state"] for h in history] == ["denied"]


def test_http_does_not_hold_a_session_nobody_sits_at(server: Any) -> None:
    """Over http the client's variables arrive as headers (wiring/http.py): a `-p` session's dialog
    is answered at once with no decision, and nothing is left pending."""
    from agent_hooks.server.local import header_for

    t0 = time.monotonic()
    status, _, data = server.post(PERMISSION, headers={header_for("CLAUDE_CODE_SESSION_ATTENDED"): "0",
                                                       header_for("CLAUDE_CODE_ENTRYPOINT"): "sdk-cli"}, timeout=60)
    assert status == 200 and data == b""
    assert time.monotonic() - t0 < 5  # not the server's 30 s wait
    assert _api(server, "GET", "/api/approvals?state=all")[1]["approvals"] == []


def test_http_hold_sees_a_cli_answer_and_a_closed_request(server: Any, hooks_home: Path) -> None:
    thread, got = _post_in_thread(server, QUESTION)
    [row] = _wait_pending(hooks_home)
    t0 = time.monotonic()
    agent_hook("approve", row["id"], "--answer", "1=SQLite", "--answer", "2=tests")
    thread.join(10)
    assert time.monotonic() - t0 < 2.0
    decision = json.loads(got[0][2])["hookSpecificOutput"]["decision"]
    assert decision["updatedInput"]["answers"] == {"Which database should we use?": "SQLite",
                                                   "Which checks should run?": "tests"}
    # The client aborting the request (the person answered at the terminal) withdraws it.
    import socket

    sock = socket.create_connection(("127.0.0.1", server.port))
    body = json.dumps(PERMISSION).encode()
    sock.sendall(f"POST /hooks/PermissionRequest HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n".encode()
                 + b"Content-Type: application/json\r\n" + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    [row] = _wait_pending(hooks_home)
    sock.close()
    t0 = time.monotonic()
    wait_for(lambda: _pending_count(hooks_home) == 0, timeout=5)
    assert time.monotonic() - t0 < 1.5
    assert _pending(hooks_home) == []
    [got_row] = store_rows(hooks_home, "SELECT state, note FROM approvals WHERE id = ?", (row["id"],))
    assert got_row["state"] == "withdrawn" and "closed the request" in got_row["note"]


def test_cli_through_a_server(server: Any, hooks_home: Path) -> None:
    url = f"http://127.0.0.1:{server.port}"
    thread, got = _post_in_thread(server, PERMISSION)
    wait_for(lambda: _pending_count(hooks_home))
    rows = json.loads(agent_hook("approvals", "--json", "--server", url).stdout)["approvals"]
    assert "allowed" in agent_hook("approve", rows[0]["id"], "--server", url).stdout
    thread.join(10)
    assert json.loads(got[0][2])["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
    late = agent_hook("deny", rows[0]["id"], "-m", "x", "--server", url, check=False)
    assert late.returncode == 1 and "already answered" in late.stderr
    missing = agent_hook("approve", "abcdef012345", "--server", url, check=False)
    assert missing.returncode == 3


def test_stopping_the_server_answers_held_requests_and_closes_their_rows(server: Any, hooks_home: Path) -> None:
    thread, got = _post_in_thread(server, PERMISSION)
    [row] = _wait_pending(hooks_home)
    t0 = time.monotonic()
    server.cli("stop")
    thread.join(10)
    # Woken by the stop itself (0.25 s here), not by its next look at the row (RECHECK_S, 2 s).
    assert time.monotonic() - t0 < 1.5  # not uvicorn's graceful timeout, and no 500
    status, _, data = got[0]
    assert status == 200 and data == b""  # no decision: the client's own dialog stays
    [closed] = store_rows(hooks_home, "SELECT state, note FROM approvals WHERE id = ?", (row["id"],))
    assert closed["state"] == "expired" and closed["note"].startswith("the server stopped while the request waited")


@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse"])
def test_tool_events_import_nothing_of_approvals_without_a_gate(hooks_home: Path, event: str) -> None:
    payload = fixture_payload(f"{event}-Bash.json")
    proc = run_exe(EXECUTABLES[event], payload, {"PYTHONPROFILEIMPORTTIME": "1"})
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
    assert "agent_hooks.output" in imported  # the probe sees our modules
    assert not {"agent_hooks.features.approvals", "agent_hooks.features.gates"} & imported
    _gate_env(hooks_home, '[[approvals.gates]]\ntool = "Bash"\nmatch = "never-matches-anything"\n')
    proc = run_exe(EXECUTABLES[event], payload, {"PYTHONPROFILEIMPORTTIME": "1"})
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
    assert ("agent_hooks.features.gates" in imported) == (event == "PreToolUse")


def test_answers_take_the_same_authorization_as_cancel(server: Any) -> None:
    import http.client

    for method, path in (("GET", "/api/approvals"), ("POST", "/api/approvals/abc")):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            conn.request(method, path, json.dumps({"decision": "allow"}) if method == "POST" else None,
                         {"Origin": "http://elsewhere.example", "Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 403 and b"cross-site request refused" in resp.read()
        finally:
            conn.close()


def test_doctor_warns_when_an_installed_timeout_is_shorter_than_a_gate(hooks_home: Path) -> None:
    agent_hook("settings", "install")
    assert "approval gate" not in agent_hook("doctor", "--no-run", check=False).stdout
    _gate_env(hooks_home, '[[approvals.gates]]\ntool = "Bash"\nmatch = "git push"\ntimeout_s = 100\n')
    out = agent_hook("doctor", "--no-run", check=False).stdout
    assert "PreToolUse: timeout 10 s is below the 130 s that the longest approval gate's timeout_s needs" in out
    agent_hook("settings", "install")
    assert "is below the" not in agent_hook("doctor", "--no-run", check=False).stdout


def test_http_gate_is_held_by_the_server(server: Any, hooks_home: Path) -> None:
    _gate_env(hooks_home, '[[approvals.gates]]\nname = "push"\ntool = "Bash"\nmatch = "git push"\ntimeout_s = 30\n')
    thread, got = _post_in_thread(server, PUSH)
    [row] = wait_for(lambda: _api(server, "GET", "/api/approvals")[1]["approvals"])
    assert row["kind"] == "gate" and row["gate"] == "push"
    # A call no gate matches goes straight through meanwhile.
    t0 = time.monotonic()
    assert server.answer({**PUSH, "tool_input": {"command": "git status"}, "tool_use_id": "toolu_s"}) is None
    assert time.monotonic() - t0 < 1.0
    assert _api(server, "POST", f"/api/approvals/{row['id']}", {"decision": "deny", "message": "later"})[0] == 200
    thread.join(10)
    out = json.loads(got[0][2])["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "later" in out["permissionDecisionReason"]


def test_a_request_no_hook_waits_on_any_more_is_not_listed_nor_answerable(hooks_home: Path) -> None:
    conn = _store(hooks_home)
    aid = ap.insert(conn, session_id="s", kind=ap.PERMISSION, tool_name="Bash", tool_input={}, at=time.time() - 100,
                    wait_s=30)  # its hook was killed at its timeout: nobody closed the row
    assert _pending(hooks_home) == []
    late = agent_hook("approve", aid, check=False)
    assert late.returncode == 1 and "no longer waiting" in late.stderr
    [row] = json.loads(agent_hook("approvals", "--all", "--json").stdout)["approvals"]
    assert row["state"] == "expired"


def test_a_gate_whose_wait_fails_denies_under_strict_guards(hooks_home: Path, tmp_path: Path) -> None:
    """Strict guards (guards.fail_closed) deny a PreToolUse that cannot decide. A gated call whose
    wait failed (here: the store was put back read-only while it waited, so the gate's timeout
    could not be written) was given the answer it had before the wait: no decision, so the gated
    tool ran with nobody's approval. It is denied now, with the reason."""
    from support.ports import free_port
    from support.servers import Server, mode_binding_prefix, server_log, start_with_prefix

    prefix = mode_binding_prefix(tmp_path)
    _gate_env(hooks_home, '[guards]\nfail_closed = true\n\n[[approvals.gates]]\nname = "push"\ntool = "Bash"\n'
                          'match = "git push"\ntimeout_s = 3\n')
    agent_hook("init")
    server = Server(hooks_home, free_port())
    try:
        start_with_prefix(server, prefix)
        thread, got = _post_in_thread(server, PUSH)
        wait_for(lambda: _pending_count(hooks_home))
        # The store put back from a copy, read-only: the pending row is in it, the gate's timeout cannot be written.
        copy = tmp_path / "copy.db"
        with sqlite3.connect(hooks_home / "store.db") as src, sqlite3.connect(copy) as dst:
            src.backup(dst)
        copy.chmod(0o444)
        for name in ("store.db-wal", "store.db-shm"):
            (hooks_home / name).unlink(missing_ok=True)
        os.replace(copy, hooks_home / "store.db")
        thread.join(30)
        [(status, headers, body)] = got
        assert status == 200, (status, body)
        assert any("waiting for an approval" in e.get("message", "") for e in error_log(hooks_home)), server_log(hooks_home)
        out = json.loads(body)["hookSpecificOutput"]
        assert out["permissionDecision"] == "deny", body
        assert "guards.fail_closed" in out["permissionDecisionReason"]
    finally:
        (hooks_home / "store.db").chmod(0o600)
        server.stop()


def test_a_gate_whose_wait_fails_denies_under_strict_guards_in_the_command_transport(hooks_home: Path) -> None:
    """The executables' side of the above: the wait fails (here the approvals table is gone from
    the store while the hook polls it) and strict guards deny the gated call instead of letting it
    run with no decision."""
    _gate_env(hooks_home, '[guards]\nfail_closed = true\n\n[[approvals.gates]]\nname = "push"\ntool = "Bash"\n'
                          'match = "git push"\ntimeout_s = 30\n')
    held = Held(PUSH)
    wait_for(lambda: _pending_count(hooks_home))
    with _store(hooks_home) as conn:
        conn.execute("DROP TABLE approvals")
    doc = held.answer()
    assert any("waiting for an approval" in e.get("message", "") for e in error_log(hooks_home))
    assert doc is not None, "the gated call was let through with no decision"
    out = doc["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "guards.fail_closed" in out["permissionDecisionReason"], doc
