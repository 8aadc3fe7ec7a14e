"""What several command centers on one PostgreSQL share rather than each keep in its own process.

Two center processes on one database (a cluster the tests start themselves, support/postgres.py):

* what the limits kept out (requests left out, hosts refused) is counted in the fleet store by whichever
  center saw it, and every center shows the fleet's counts (/api/approvals, /api/fleet/status);
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.center import Center
from support.waiting import wait_for

FAR = 4_000_000_000.0  # expires long after the test


def decoys(n: int, prefix: str) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i:05d}", "kind": "permission", "state": "pending", "session_id": f"s-{prefix}-{i}",
             "tool_name": "Bash", "tool_input": json.dumps({"command": f"echo {i}"}), "created_at": 1.0 + i,
             "expires_at": FAR} for i in range(n)]


def report(center: Center, host: str, cards: list[dict[str, Any]] | None = None,
           requests: list[dict[str, Any]] | None = None) -> Any:
    body: dict[str, Any] = {"cards": cards or []}
    if requests is not None:
        body["approvals"] = requests
    return center.http.post("/api/fleet/report", json=body, headers={"X-Agent-Hooks-Host": host})


def two_centers(tmp_path: Path, db: str, **settings: str) -> tuple[Center, Center]:
    env = {"AGENT_HOOKS__CENTER__DATABASE": db, **settings}
    first = Center(tmp_path / "center-1", env={"AGENT_HOOKS__FLEET__HOST": "center-1", **env}).start()
    try:
        second = Center(tmp_path / "center-2", env={"AGENT_HOOKS__FLEET__HOST": "center-2", **env}).start()
    except BaseException:
        first.stop()
        raise
    return first, second


@pytest.fixture
def limited(tmp_path: Path, fleet_db: str) -> Iterator[tuple[Center, Center]]:
    """Two centers that keep 2 other hosts and 10 pending requests of each."""
    first, second = two_centers(tmp_path, fleet_db, AGENT_HOOKS__FLEET__MAX_HOSTS="2",
                                AGENT_HOOKS__FLEET__MAX_REQUESTS_PER_HOST="10")
    try:
        yield first, second
    finally:
        second.stop()
        first.stop()


def kept_out(center: Center) -> dict[str, dict[str, Any]]:
    doc = center.http.get("/api/fleet/status").json()["limits"]["left_out"]
    return {h: {k: c[k] for k in ("approvals", "cards", "refused")} for h, c in doc.items()}


def test_what_the_limits_kept_out_is_the_fleets_count_on_every_center(limited: tuple[Center, Center]) -> None:
    first, second = limited
    # host-b's 15 requests go to the first center: its newest 10 are kept, 5 left out.
    assert report(first, "host-b", requests=decoys(15, "hostb")).status_code == 200
    assert report(first, "host-c", cards=[{"session_id": "c-1"}]).status_code == 200
    # Past max_hosts: host-d refused by the second center, host-e by the first.
    assert report(second, "host-d", cards=[{"session_id": "d-1"}]).status_code == 429
    assert first.ingest({"tmux_session": "agent-e", "event": "start"},
                        headers={"X-Agent-Hooks-Host": "host-e"}).status_code == 429
    want = {"host-b": {"approvals": 5, "cards": 0, "refused": 0}, "host-d": {"approvals": 0, "cards": 0, "refused": 1},
            "host-e": {"approvals": 0, "cards": 0, "refused": 1}}
    for center in (first, second):
        wait_for(lambda center=center: kept_out(center) == want, timeout=10, what="the fleet's counts",
                 show=lambda center=center: (center.env["AGENT_HOOKS__FLEET__HOST"], kept_out(center)))
    # The second center never took host-b's report, and says what was left out of its list all the same.
    doc = second.http.get("/api/approvals").json()
    assert doc["left_out"] == {"host-b": 5} and sum(a["host"] == "host-b" for a in doc["approvals"]) == 10
    # Counted again by the other center: added to the same count.
    assert first.http.get("/api/fleet/controls", params={"host": "host-f", "wait": "0"}).status_code == 429
    assert report(second, "host-f", cards=[{"session_id": "f-1"}]).status_code == 429
    wait_for(lambda: kept_out(second).get("host-f", {}).get("refused") == 2, timeout=10,
             what="host-f refused twice, once by each center")
