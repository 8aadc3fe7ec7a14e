"""`agent-hook identity set / show / history / diff / write`, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.identity import Rig, profile


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def test_set_show_history_diff(rig: Rig) -> None:
    rig.set("SOUL.md", profile("soul", 12))
    rig.set("SOUL.md", profile("soul", 12).replace("principle 5", "principle five"))
    again = rig.cli("identity", "set", "ada", "SOUL.md", "--file", str(rig.tmp / "set-SOUL.md"))
    assert "unchanged (version 2)" in again.stdout
    assert rig.cli("identity", "show", "ada", "SOUL.md").stdout == profile("soul", 12).replace("principle 5",
                                                                                              "principle five")
    listing = json.loads(rig.cli("identity", "show", "ada", "--json").stdout)
    assert listing["files"][0]["name"] == "SOUL.md" and listing["files"][0]["version"] == 2
    hist = json.loads(rig.cli("identity", "history", "ada", "SOUL.md", "--json").stdout)["versions"]
    assert [(v["version"], v["source"], v["current"]) for v in hist] == [(1, "manual", False), (2, "manual", True)]
    assert "* v2" in rig.cli("identity", "history", "ada", "SOUL.md").stdout
    diff = rig.cli("identity", "diff", "ada", "SOUL.md").stdout
    assert "--- SOUL.md@v1" in diff and "-- soul principle 5:" in diff and "+- soul principle five:" in diff
    assert rig.cli("identity", "diff", "ada", "SOUL.md", "--from", "2", "--to", "2").stdout == ""


def test_set_reads_stdin_and_applies_the_guards(rig: Rig) -> None:
    rig.cli("identity", "set", "ada", "IDENTITY.md", "--file", "-", input=profile("identity", 12))
    refused = rig.cli("identity", "set", "ada", "IDENTITY.md", "--file", "-", input="tiny", ok=False)
    assert refused.returncode == 1 and "below the 500-character minimum" in refused.stderr
    # A first version is not "shrunk": the message says the minimum and why it exists.
    first = rig.cli("identity", "set", "bea", "SOUL.md", "--file", "-", input="SOUL of a test agent", ok=False)
    assert "SOUL.md would be 20 characters, below the 500-character minimum" in first.stderr
    assert "shrink" not in first.stderr and "identity_files.min_chars" in first.stderr
    assert "test sentinel" in first.stderr and "--force" in first.stderr
    rig.cli("identity", "set", "ada", "IDENTITY.md", "--file", "-", "--force", input="tiny")
    assert [s for _, s, _ in rig.versions("IDENTITY.md")] == ["manual", "manual"]


def test_user_errors(rig: Rig) -> None:
    assert "no store yet" in rig.cli("identity", "show", "ada", ok=False).stderr
    rig.set("SOUL.md", profile("soul", 12))
    # Not found is exit 3 whatever the command (docs/commands.md).
    for args in (("show", "ada", "TOOLS.md"), ("show", "nobody"), ("show", "nobody", "--json"),
                 ("history", "nobody", "SOUL.md"), ("history", "nobody", "SOUL.md", "--json"),
                 ("diff", "ada", "SOUL.md", "--from", "9")):
        proc = rig.cli("identity", *args, ok=False)
        assert proc.returncode == 3, (args, proc.returncode, proc.stderr)
    assert "has no TOOLS.md" in rig.cli("identity", "show", "ada", "TOOLS.md", ok=False).stderr
    assert "no version 9" in rig.cli("identity", "diff", "ada", "SOUL.md", "--from", "9", ok=False).stderr
    # One version: nothing to compare is said plainly, not "give --from".
    one = rig.cli("identity", "diff", "ada", "SOUL.md")
    assert "has no version before v1: nothing to compare" in one.stdout and "give --from" not in one.stdout
    assert "(1 version)" in rig.cli("identity", "show", "ada").stdout
    assert "cannot read" in rig.cli("identity", "set", "ada", "SOUL.md", "--file", "/nonexistent", ok=False).stderr


def test_write_materialises_files_for_launchers(rig: Rig, tmp_path: Path) -> None:
    rig.set("SOUL.md", profile("soul", 12))
    rig.set("TOOLS.md", profile("tools", 3))
    target = tmp_path / "prepared"
    out = json.loads(rig.cli("identity", "write", "ada", str(target), "--json").stdout)
    assert out["files"]["SOUL.md"]["action"] == "written" and out["files"]["IDENTITY.md"]["action"] == "absent"
    assert (target / "SOUL.md").read_text() == profile("soul", 12)
    (target / "SOUL.md").write_text("hand edited\n")
    text = rig.cli("identity", "write", "ada", str(target)).stdout
    assert "previous file kept as" in text
    assert [p.read_text() for p in target.glob("SOUL.md.bak-*")] == ["hand edited\n"]
    # Nothing changed since: the file is left as it is.
    assert json.loads(rig.cli("identity", "write", "ada", str(target), "--json").stdout)["files"]["SOUL.md"][
        "action"] == "same"
