"""A credential per paired host, on two servers with two homes: the command center and host B.

B joins with a one-time code (`agent-hook fleet join`, a subprocess) before its server starts; its
server then reports and polls with that credential. The code does not work twice. B's credential speaks
only for B: naming host A (another paired host) in the X-Agent-Hooks-Host header, in ?host=, in a
report's body, or acting on A's requests, sessions and controls is 403, and A's requests and controls
are as they were. A device's answer to B's request is recorded under the device's name on both stores.
A revoked B is refused (401) at its next request.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from support.approvals import Held
from support.center import Center, fleet_rows
from support.pairing import (
    bearer,
    center_and_paired_host,
    device_client,
    host_credential,
    pair_code,
    read_credential_file,
)
from support.repo import fixture_payload
from support.scripts import agent_hook, run_hook, store_rows
from support.waiting import wait_for

PERMISSION = {**fixture_payload("permission_request_bash.json", "2.1.330"), "session_id": "b-asks-paired"}


def _owner_pending(center: Center) -> list[dict[str, Any]]:
    r = center.http.get("/api/approvals")
    assert r.status_code == 200, r.text
    return r.json()["approvals"]  # type: ignore[no-any-return]


def _host_a(center: Center) -> tuple[str, dict[str, Any], str, int]:
    """Host A, paired too, reports a card and a pending request with its own credential, and the owner
    cancels A's session: a control A has not fetched. (A's credential, its request, its card, the seq.)"""
    cred_a = host_credential(center, "host-a")
    now = time.time()
    request = {"id": "a0a0a0a0a0a0", "session_id": "a-asks-1", "kind": "permission", "tool_name": "Bash",
               "tool_input": '{"command": "make deploy"}', "state": "pending", "created_at": now,
               "expires_at": now + 300}
    r = center.http.post("/api/fleet/report", headers=bearer(cred_a),
                         json={"host": "host-a", "cards": [{"session_id": "a-sess-1", "tmux_session": "agent-a"}],
                               "approvals": [request]})
    assert r.status_code == 200, r.text
    [card] = wait_for(lambda: [c for c in center.board_cards().values() if c["host"] == "host-a"],
                      what="host A's card on the board")
    r = center.http.post(f"/api/sessions/{card['id']}/cancel", json={"reason": "wrong branch"})
    assert r.status_code == 200 and r.json()["sessions"][0]["applied"] == "sent", r.text
    return cred_a, request, card["id"], int(r.json()["seq"])


def test_a_paired_host_speaks_only_for_itself_and_a_revoked_one_is_shut_out(tmp_path: Path, center_db: str) -> None:
    extra = {"AGENT_HOOKS__FORWARD__FORWARD_WITHOUT_TMUX": "true", "AGENT_HOOKS__FLEET__SUBSCRIBE_WAIT_S": "1"}
    with center_and_paired_host(tmp_path, extra=extra, center_db=center_db) as (center, b, env):
        # Joined: the credential file is the host's own (0600), for this center, under B's name.
        saved = read_credential_file(b.home)
        assert saved["host"] == "host-b" and saved["center"] == center.base
        assert saved["credential"].startswith("ah1.")
        cred_b = saved["credential"]
        # The center keeps only a hash of it.
        stored = fleet_rows(center, "SELECT secret_sha256 FROM fleet_credentials WHERE name = 'host-b'")
        assert len(stored) == 1 and cred_b.split(".")[2] not in stored[0][0]

        # A code works once: the second join is told it was used.
        code = pair_code(center, "--host", "host-x")["code"]
        agent_hook("fleet", "join", center.base, "--code", code, env={**env, "AGENT_HOOKS_HOME": str(tmp_path / "x")})
        again = agent_hook("fleet", "join", center.base, "--code", code, env={**env, "AGENT_HOOKS_HOME": str(tmp_path / "y")},
                           check=False)
        assert again.returncode == 1 and "409" in again.stderr and "already used" in again.stderr, again.stderr
        assert not (tmp_path / "y" / "fleet-credential").exists()

        # B's server polls and reports with its credential: B's request reaches the center under B's name.
        held = Held(PERMISSION, env)
        [row] = wait_for(lambda: [p for p in _owner_pending(center) if p["session_id"] == "b-asks-paired"],
                         what="B's request on the center")
        assert row["host"] == "host-b"
        hosts = wait_for(lambda: [h for h in json_out(center, "fleet", "hosts", "--json")["hosts"]
                                  if h["name"] == "host-b" and h["last_seen_at"]], what="host-b seen")
        assert hosts[0]["paired_at"] <= hosts[0]["last_seen_at"]
        seen = fleet_rows(center, "SELECT auth FROM fleet_hosts WHERE host = 'host-b'")
        assert seen and seen[0][0] == "credential"
        # B's drainer delivered B's hook calls under B's name too.
        wait_for(lambda: fleet_rows(center, "SELECT 1 FROM fleet_events e JOIN fleet_sessions s ON s.id ="
                                    " e.fleet_id WHERE s.host = 'host-b' AND e.source = 'ingest'"),
                 what="an event of B's delivered by its drainer")

        # Host A, another paired host, has a pending request and a cancel it has not fetched.
        cred_a, request_a, card_a, seq_a = _host_a(center)
        as_b = httpx.Client(base_url=center.base, timeout=10, trust_env=False, headers=bearer(cred_b))
        forged = {"X-Agent-Hooks-Host": "host-a"}
        refused = [
            # Withdrawing A's requests with an empty full report, by header or by body.
            as_b.post("/api/fleet/report", headers=forged, json={"cards": [], "approvals": [], "approvals_full": True}),
            as_b.post("/api/fleet/report", json={"host": "host-a", "cards": [], "approvals": []}),
            # Reading A's controls and marking them delivered.
            as_b.get("/api/fleet/controls", params={"host": "host-a", "after": str(seq_a), "wait": "0"}),
            as_b.get("/api/fleet/controls", headers=forged, params={"after": str(seq_a), "wait": "0"}),
            # Saying for A what became of A's control.
            as_b.post("/api/fleet/replies", json={"results": [{"seq": seq_a, "error": None}]}),
            # Ingesting as A, answering A's request, cancelling A's session.
            as_b.post("/api/hooks/ingest", headers=forged, json={"tmux_session": "agent-a", "event": "exit"}),
            as_b.post("/api/hooks/ingest", json={"session_id": card_a, "event": "exit"}),
            as_b.post("/api/hooks/ingest", json={"session_id": "a-sess-1", "event": "exit"}),
            as_b.post("/api/hooks/sessions", json={"session_id": "a-sess-1", "agent_type": "claude-code"}),
            as_b.patch(f"/api/hooks/sessions/{card_a}", json={"state": "completed"}),
            as_b.post(f"/api/approvals/{request_a['id']}", json={"decision": "allow"}),
            as_b.post(f"/api/sessions/{card_a}/uncancel"),
            as_b.post(f"/api/sessions/{card_a}/reply", json={"text": "go on"}),
            as_b.delete(f"/api/hooks/sessions/{card_a}"),
            # A task spans hosts, and the board is for people.
            as_b.post("/api/tasks/T-1/cancel", json={"reason": "x"}),
            as_b.get("/api/board"),
        ]
        for r in refused:
            assert r.status_code == 403, (r.request.method, r.request.url, r.status_code, r.text)
            assert "error" in r.json()
        # What B may see is its own.
        mine = as_b.get("/api/approvals").json()["approvals"]
        assert [p["host"] for p in mine] == ["host-b"]
        assert {c["host"] for c in as_b.get("/api/hooks/sessions").json()} == {"host-b"}
        assert as_b.get("/api/fleet/controls", params={"host": "host-b", "wait": "0"}).status_code == 200

        # A's request is still pending, A's card still there, and A's cancel still undelivered: A gets it.
        assert request_a["id"] in [p["id"] for p in _owner_pending(center)]
        assert card_a in center.board_cards() and center.card(card_a)["state"] == "running"
        applied = fleet_rows(center, "SELECT applied_seq FROM fleet_hosts WHERE host = 'host-a'")
        assert not applied or (applied[0][0] or 0) < seq_a
        got = httpx.get(f"{center.base}/api/fleet/controls", params={"wait": "0"}, headers=bearer(cred_a),
                        trust_env=False, timeout=10)
        assert got.status_code == 200 and seq_a in [c["seq"] for c in got.json()["controls"]], got.text

        # A person's phone, paired as a device, answers B's request from the center's board.
        phone = device_client(center, "phone")
        r = phone.post(f"/api/approvals/{row['id']}", json={"decision": "allow", "via": "board", "by": "uid 0 (root)"},
                       headers={"Origin": center.base})
        assert r.status_code == 200, r.text
        assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"
        history = center.http.get("/api/approvals", params={"state": "all"}).json()["approvals"]
        [answered] = [p for p in history if p["id"] == row["id"]]
        # The device's name, as its credential says; what the body claimed is a note only.
        assert answered["answer"]["by"] == "phone" and answered["answer"]["note"] == "uid 0 (root)", answered
        [on_b] = [p for p in b.http.get("/api/approvals", params={"state": "all"}).json()["approvals"]
                  if p["id"] == row["id"]]
        assert on_b["answer"]["by"] == "phone" and on_b["answer"]["via"] == "remote"
        [card_b] = wait_for(lambda: [c for c in center.board_cards().values() if c["host"] == "host-b"],
                            what="host B's card")
        page = phone.get(f"/api/board/sessions/{card_b['id']}").json()
        assert [a["answer"]["by"] for a in page["approvals"] if a["id"] == row["id"]] == ["phone"]
        assert any(x["by_name"] == "phone" and x["action"] == "answer: allow" for x in page["actions"]), page["actions"]

        # Revoked: B's very next request is refused, and says why.
        agent_hook("fleet", "revoke", "host-b", env=center.env)
        r = as_b.get("/api/fleet/controls", params={"wait": "0"})
        assert r.status_code == 401 and "revoked" in r.json()["error"], r.text
        assert as_b.post("/api/fleet/report", json={"cards": []}).status_code == 401
        # Even from the owner's uid on loopback: a credential shown decides.
        assert as_b.get("/api/approvals").status_code == 401
        listed = json_out(center, "fleet", "hosts", "--json")["hosts"]
        assert "host-b" not in [h["name"] for h in listed]
        # B's own server and drainer send that credential (not the owner's loopback uid, which would be let
        # in): all three are refused now. A hook call on B makes a report and an event to deliver.
        run_hook({**fixture_payload("PostToolUse-Bash.json"), "session_id": "b-asks-paired"}, env)
        status = wait_for(lambda: _refused_everywhere(b), timeout=15, what="B's server to be refused")
        assert "revoked" in status["subscription"]["last_error"], status
        wait_for(lambda: store_rows(b.home, "SELECT 1 FROM outbox WHERE last_status = 401"), timeout=15,
                 what="B's drainer to be refused")


def _refused_everywhere(b: Center) -> dict[str, Any] | None:
    doc = b.http.get("/api/fleet/status").json()
    sub, rep = doc.get("subscription") or {}, doc.get("report") or {}
    ok = "HTTP 401" in (sub.get("last_error") or "") and "HTTP 401" in (rep.get("last_error") or "")
    return doc if ok else None


def json_out(center: Center, *args: str) -> dict[str, Any]:
    import json

    return json.loads(agent_hook(*args, env=center.env).stdout)  # type: ignore[no-any-return]
