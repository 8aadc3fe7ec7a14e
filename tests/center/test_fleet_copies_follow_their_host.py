"""A command center's copy of a host's request follows the host's row: one it withdrew because a full
report left it out is listed again when its host reports it pending (it stayed hidden until it expired)."""

from __future__ import annotations

import time
from pathlib import Path

from support.center import Center
from support.pairing import bearer, host_credential


def test_a_copy_withdrawn_by_a_report_comes_back_when_its_host_says_it_is_pending(tmp_path: Path) -> None:
    center = Center(tmp_path / "center", env={"AGENT_HOOKS__FLEET__HOST": "center"}).start()
    try:
        auth = bearer(host_credential(center, "host-q"))
        now = time.time()
        request = {"id": "q0q0q0q0q0q0", "session_id": "q-asks-1", "kind": "permission", "tool_name": "Bash",
                   "tool_input": '{"command": "make release"}', "state": "pending", "created_at": now,
                   "expires_at": now + 300}

        def report(approvals: list[dict[str, object]]) -> None:
            r = center.http.post("/api/fleet/report", headers=auth, json={"cards": [], "approvals": approvals})
            assert r.status_code == 200, r.text

        def listed() -> list[str]:
            return [a["id"] for a in center.http.get("/api/approvals").json()["approvals"]]

        report([request])
        assert listed() == [request["id"]]
        report([])  # a full report without it: withdrawn here
        assert listed() == []
        history = center.http.get("/api/approvals", params={"state": "all"}).json()["approvals"]
        assert [a["answer"]["note"] for a in history] == ["no longer pending on host-q"]
        report([request])  # its host says it is pending: the copy follows
        assert listed() == [request["id"]]
        # An answer given on the host still settles it here as before.
        report([{**request, "state": "allowed", "decision": "allow", "answered_by": "terminal",
                 "answered_via": "terminal", "answered_at": time.time()}])
        assert listed() == []
    finally:
        center.stop()
