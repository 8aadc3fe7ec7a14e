"""Stop and SessionEnd check the workspace itself against SessionStart's record: a
workspace swapped for a symlink or another directory mid-session is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.identity import Rig, profile


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def _log(rig: Rig) -> list[dict]:
    path = rig.home / "logs" / "errors.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("event", ["Stop", "SessionEnd"])
def test_a_workspace_swapped_for_a_symlink_is_refused(rig: Rig, tmp_path: Path, event: str) -> None:
    rig.set("IDENTITY.md", profile("identity"))
    rig.hook("SessionStart")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "IDENTITY.md").write_text(profile("someone else's identity"))
    # mv ws ws.real && ln -s outside ws
    os.rename(rig.ws, tmp_path / "ws.real")
    os.symlink(outside, rig.ws)
    rig.hook(event, **({"reason": "other"} if event == "SessionEnd" else {}))
    assert [s for _, s, _ in rig.versions("IDENTITY.md")] == ["manual"]
    assert all("someone else" not in c for _, _, c in rig.versions("IDENTITY.md"))
    kinds = [k for k, _ in rig.errors()]
    assert kinds == ["workspace"]
    entry = [e for e in _log(rig) if e["kind"] == "workspace"][-1]
    assert "replaced" in entry["message"] and str(rig.ws) in entry["message"]
    assert entry.get("traceback")  # the trace: what SessionStart recorded and what is there now


def test_a_workspace_replaced_by_another_directory_is_refused(rig: Rig, tmp_path: Path) -> None:
    rig.set("IDENTITY.md", profile("identity"))
    rig.hook("SessionStart")
    os.rename(rig.ws, tmp_path / "ws.old")
    rig.ws.mkdir()
    (rig.ws / "IDENTITY.md").write_text(profile("planted identity"))
    rig.hook("Stop")
    assert [s for _, s, _ in rig.versions("IDENTITY.md")] == ["manual"]
    assert [k for k, _ in rig.errors()] == ["workspace"]


def test_the_same_workspace_still_syncs(rig: Rig) -> None:
    rig.set("IDENTITY.md", profile("identity"))
    rig.hook("SessionStart")
    (rig.ws / "IDENTITY.md").write_text(profile("identity, edited in place"))
    rig.hook("Stop")
    assert [s for _, s, _ in rig.versions("IDENTITY.md")] == ["manual", "session_sync"]
    rig.hook("SessionEnd", reason="other")
    assert not rig.errors()
