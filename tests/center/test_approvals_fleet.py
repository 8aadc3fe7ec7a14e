"""Approval requests across two hosts on one machine: two stores, two servers, each with its own fleet.host.

Host B's PermissionRequest hook (the installed executable) holds a request in B's store. B's server
carries it up to A, the command center: A's GET /api/approvals lists it (with B as its host and B's
card). An answer posted to A goes down B's long poll and is written into B's store; B's hook answers
the client. A second answer is told "already answered" (409). A request answered at B's terminal
leaves A's list within 1 s. A question is answered from A with an option's label.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.approvals import QUESTION, Held
from support.center import Center, two_hosts
from support.repo import fixture_payload
from support.scripts import EXECUTABLES, run_exe

PERMISSION = {**fixture_payload("permission_request_bash.json", "2.1.330"), "session_id": "b-asks-1"}


@pytest.fixture
def hosts(tmp_path: Path, center_db: str) -> Iterator[tuple[Center, Center, dict[str, str]]]:
    # Sessions without tmux get cards on A too. A's fleet in its SQLite store, then in PostgreSQL.
    with two_hosts(tmp_path, forward={"AGENT_HOOKS__FORWARD__FORWARD_WITHOUT_TMUX": "true"},
                   hook_env={"TMUX": "", "TMUX_PANE": ""}, center_db=center_db) as hosts:
        yield hosts


def pending(center: Center) -> list[dict[str, Any]]:
    r = center.http.get("/api/approvals")
    assert r.status_code == 200, r.text
    return r.json()["approvals"]  # type: ignore[no-any-return]


def wait_listed(center: Center, predicate: Any, timeout: float = 5.0) -> tuple[list[dict[str, Any]], float]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = pending(center)
        if predicate(got):
            return got, time.monotonic() - t0
        time.sleep(0.02)
    raise AssertionError(f"timed out; A lists {pending(center)}")


def test_a_request_on_b_is_listed_and_answered_from_a(hosts: tuple[Center, Center, dict[str, str]]) -> None:
    a, b, env = hosts
    held = Held(PERMISSION, env)
    # B lists it itself first; from then on A must list it within 1 s.
    wait_listed(b, lambda got: len(got) == 1, timeout=10)
    [row], took = wait_listed(a, lambda got: len(got) == 1)
    assert took < 1.0, f"A listed B's request {took:.2f} s after B had it"
    assert row["host"] == "host-b" and row["kind"] == "permission" and row["state"] == "pending"
    assert row["tool_input"]["command"] == PERMISSION["tool_input"]["command"]
    assert row["card"] and a.board_cards()[row["card"]]["host"] == "host-b"

    r = a.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow", "via": "board"})
    assert r.status_code == 200 and r.json()["applied"] == "answered", r.text
    assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"
    assert pending(a) == [] and pending(b) == []
    [mine] = [x for x in b.http.get("/api/approvals", params={"state": "all"}).json()["approvals"]
              if x["id"] == row["id"]]
    assert mine["answer"]["via"] == "remote" and mine["state"] == "allowed"

    # A second answer, from A or from B: "already answered", never an error page.
    late = a.http.post(f"/api/approvals/{row['id']}", json={"decision": "deny", "message": "too late"})
    assert late.status_code == 409 and late.json()["error"].startswith("already answered"), late.text
    late = b.http.post(f"/api/approvals/{row['id']}", json={"decision": "deny"})
    assert late.status_code == 409

    # Deny with a message the model reads.
    held = Held({**PERMISSION, "session_id": "b-asks-2"}, env)
    [row], _ = wait_listed(a, lambda got: len(got) == 1, timeout=10)
    r = a.http.post(f"/api/approvals/{row['id']}", json={"decision": "deny", "message": "not on main"})
    assert r.status_code == 200, r.text
    decision = held.answer()["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "deny" and decision["message"] == "not on main"

    # A question, answered from A by an option's label.
    held = Held({**QUESTION, "session_id": "b-asks-3"}, env)
    [row], _ = wait_listed(a, lambda got: len(got) == 1 and got[0]["kind"] == "question", timeout=10)
    r = a.http.post(f"/api/approvals/{row['id']}",
                    json={"decision": "allow", "answers": {"Which database should we use?": "SQLite",
                                                           "Checks": ["lint", "tests"]}})
    assert r.status_code == 200, r.text
    decision = held.answer()["hookSpecificOutput"]["decision"]
    assert decision["updatedInput"]["answers"] == {"Which database should we use?": "SQLite",
                                                   "Which checks should run?": "lint, tests"}


def test_answered_at_bs_terminal_leaves_as_list_within_1s(hosts: tuple[Center, Center, dict[str, str]]) -> None:
    a, b, env = hosts
    held = Held({**PERMISSION, "session_id": "b-terminal-1"}, {**env, "AGENT_HOOKS__APPROVALS__WAIT_S": "20"})
    [row], _ = wait_listed(a, lambda got: len(got) == 1, timeout=10)
    # The person at B's terminal answers: the tool runs, and its PostToolUse withdraws the request.
    post = {**fixture_payload("PostToolUse-Bash.json"), "session_id": "b-terminal-1"}
    t0 = time.monotonic()
    assert run_exe(EXECUTABLES["PostToolUse"], post, env).returncode == 0
    _, took = wait_listed(a, lambda got: got == [])
    assert time.monotonic() - t0 < 1.0, f"A still listed it {took:.2f} s after the terminal answered"
    assert held.answer() is None
    r = a.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
    assert r.status_code == 409 and "already answered" in r.json()["error"], r.text


def test_the_cli_answers_bs_request_through_a(hosts: tuple[Center, Center, dict[str, str]], center_db: str) -> None:
    """`agent-hook approvals --server A` lists B's request (and, with A's fleet in its SQLite store, A's own),
    each with the agent that asks; `deny ID --server A` answers it on B."""
    from support.scripts import agent_hook

    a, b, env = hosts
    held = Held({**PERMISSION, "session_id": "b-cli-1"}, {**env, "AGENT_HOOKS_AGENT": "bob"})
    # Each is listed with the agent that asks, as the local listing names it. (A's own requests stay in A's
    # own store: a fleet in PostgreSQL does not list them.)
    own = None if center_db else Held({**PERMISSION, "session_id": "a-cli-1"}, {
        "AGENT_HOOKS_HOME": str(a.home), "HOME": a.env["HOME"], "TMUX": "", "TMUX_PANE": "", "AGENT_HOOKS_AGENT": "ada"})
    agents = {"b-cli-1": "bob", **({} if own is None else {"a-cli-1": "ada"})}
    got, _ = wait_listed(a, lambda got: {r["session_id"]: r.get("agent") for r in got} == agents, timeout=10)
    [row] = [r for r in got if r["host"] == "host-b"]
    cli_env = {"AGENT_HOOKS_HOME": str(a.home), "HOME": a.env["HOME"]}
    listed = agent_hook("approvals", "--server", a.base, env=cli_env).stdout
    assert row["id"] in listed and "host-b" in listed, listed
    lines = {line.split()[0]: line.split() for line in listed.splitlines()[1:]}
    assert lines[row["id"]][1:3] == ["host-b", "bob"], listed
    if own is not None:
        [mine] = [r for r in got if r["host"] == "host-a"]
        assert lines[mine["id"]][1:3] == ["host-a", "ada"], listed
        agent_hook("approve", mine["id"], "--server", a.base, env=cli_env)
        assert own.answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"
    out = agent_hook("deny", row["id"], "--message", "ask the lead", "--server", a.base, env=cli_env)
    assert "denied" in out.stdout, out.stdout
    decision = held.answer()["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "deny" and decision["message"] == "ask the lead"
    late = agent_hook("approve", row["id"], "--server", a.base, env=cli_env, check=False)
    assert late.returncode == 1 and "already answered" in late.stderr, late


def test_only_the_requests_host_may_say_what_became_of_an_answer(tmp_path: Path) -> None:
    """An answer routed to host-b waits for host-b's word (POST /api/fleet/replies). Another host
    (host-c, with the same fleet credentials) cannot give that word: it would tell the person the
    request was answered, and settle the command center's copy with a row of its own making."""
    import json
    import threading

    a = Center(tmp_path / "host-a", env={"AGENT_HOOKS__FLEET__HOST": "host-a"}).start()
    try:
        now = time.time()
        row = {"id": "b0b0b0b0b0b0", "session_id": "b-asks-2", "kind": "permission", "tool_name": "Bash",
               "tool_input": json.dumps({"command": "make deploy"}), "state": "pending", "created_at": now,
               "expires_at": now + 300}
        r = a.http.post("/api/fleet/report", json={"cards": [], "approvals": [row]},
                        headers={"X-Agent-Hooks-Host": "host-b"})
        assert r.status_code == 200, r.text
        got: list[Any] = []
        poster = threading.Thread(target=lambda: got.append(
            a.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})), daemon=True)
        poster.start()
        controls: list[Any] = []
        deadline = time.monotonic() + 5
        while not controls and time.monotonic() < deadline:
            controls = a.http.get("/api/fleet/controls", params={"host": "host-b", "after": "0", "wait": "0"}
                                  ).json().get("controls") or []
            time.sleep(0.05)
        [control] = controls
        forged = {**row, "state": "allowed", "decision": "allow", "answered_by": "nobody", "answered_at": now}
        while poster.is_alive():  # host-c's word, again and again until the route gives up waiting
            a.http.post("/api/fleet/replies", json={"results": [{"seq": control["seq"], "status": 200,
                                                                 "approval": forged}]},
                        headers={"X-Agent-Hooks-Host": "host-c"})
            poster.join(0.2)
        assert got[0].status_code == 202 and got[0].json()["applied"] == "sent, not confirmed yet", got[0].text
        assert [p["id"] for p in pending(a)] == [row["id"]]
        # host-b's own word is taken, even from a host that sends fewer columns than we keep (was a 500).
        got.clear()
        poster = threading.Thread(target=lambda: got.append(
            a.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})), daemon=True)
        poster.start()
        later: list[Any] = []
        deadline = time.monotonic() + 5
        while not later and time.monotonic() < deadline:
            later = [c for c in a.http.get("/api/fleet/controls", params={"host": "host-b", "wait": "0"}
                     ).json().get("controls") or [] if c["seq"] > control["seq"]]
            time.sleep(0.05)
        word = {k: forged[k] for k in ("id", "session_id", "kind", "tool_name", "state", "created_at", "decision")}
        while poster.is_alive():  # until the route waits for the word (it registers after writing the control)
            a.http.post("/api/fleet/replies", json={"results": [{"seq": later[0]["seq"], "status": 200,
                                                                 "approval": word}]},
                        headers={"X-Agent-Hooks-Host": "host-b"})
            poster.join(0.2)
        assert got[0].status_code == 200 and got[0].json()["approval"]["state"] == "allowed", got[0].text
        assert pending(a) == []
    finally:
        a.stop()
