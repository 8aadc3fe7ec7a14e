"""Identity files through the installed hook executables, on a real store and a real workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.identity import Rig, context, profile


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def test_session_start_writes_store_files_and_injects_what_claude_code_does_not_load(rig: Rig) -> None:
    soul, ident, tools, claude = (profile(w, 14) for w in ("soul", "identity", "tools", "claude"))
    for name, text in (("SOUL.md", soul), ("IDENTITY.md", ident), ("TOOLS.md", tools), ("CLAUDE.md", claude)):
        rig.set(name, text)
    out = rig.hook("SessionStart")
    ctx = context(out)
    for name, text in (("SOUL.md", soul), ("IDENTITY.md", ident), ("TOOLS.md", tools), ("CLAUDE.md", claude)):
        assert (rig.ws / name).read_text() == text
        assert oct((rig.ws / name).stat().st_mode & 0o777) == "0o600"
    assert "soul principle 3" in ctx and "identity principle 3" in ctx and "tools principle 3" in ctx
    # CLAUDE.md was not on disk when Claude Code looked, so the model needs it too.
    assert "claude principle 3" in ctx
    # Next session: CLAUDE.md on disk is the store's, Claude Code loaded it itself: not injected again.
    ctx2 = context(rig.hook("SessionStart", session="s2"))
    assert "soul principle 3" in ctx2 and "claude principle 3" not in ctx2
    assert not rig.errors()


def test_context_respects_the_budget(rig: Rig) -> None:
    rig.env["AGENT_HOOKS__IDENTITY_FILES__CONTEXT_BUDGET_CHARS"] = "1500"
    rig.set("SOUL.md", profile("soul", 200))
    rig.set("IDENTITY.md", profile("identity", 200))
    ctx = context(rig.hook("SessionStart"))
    assert len(ctx) <= 1500
    assert "cut at the context budget" in ctx and str(rig.ws / "SOUL.md") in ctx
    assert "IDENTITY.md" in ctx  # named, with where to read it, even when no room is left


def test_differing_file_we_did_not_write_is_backed_up(rig: Rig) -> None:
    (rig.ws / "SOUL.md").write_text("the user's own soul file\n")
    rig.set("SOUL.md", profile("soul"))
    rig.hook("SessionStart")
    backups = list(rig.ws.glob("SOUL.md.bak-*"))
    assert len(backups) == 1 and backups[0].read_text() == "the user's own soul file\n"
    # A file we wrote ourselves and that nobody touched is replaced without a backup.
    rig.set("SOUL.md", profile("soul v2"))
    rig.hook("SessionStart", session="s2")
    assert len(list(rig.ws.glob("SOUL.md.bak-*"))) == 1
    assert "soul v2 principle" in (rig.ws / "SOUL.md").read_text()


def test_self_edit_is_stored_as_a_new_version(rig: Rig) -> None:
    rig.set("SOUL.md", profile("soul"))
    rig.hook("SessionStart")
    edited = (rig.ws / "SOUL.md").read_text().replace("principle 7", "principle seven, revised")
    (rig.ws / "SOUL.md").write_text(edited)
    assert rig.tool("Edit", rig.ws / "SOUL.md", old_string="principle 7", new_string="x") is None
    versions = rig.versions("SOUL.md")
    assert [(v, s) for v, s, _ in versions] == [(1, "manual"), (2, "self_edit")]
    assert versions[-1][2] == edited
    # Stop after the self edit: nothing moved since, no extra version.
    rig.hook("Stop")
    assert len(rig.versions("SOUL.md")) == 2


def test_change_made_outside_tools_is_synced_at_stop(rig: Rig) -> None:
    rig.set("IDENTITY.md", profile("identity"))
    rig.hook("SessionStart")
    (rig.ws / "IDENTITY.md").write_text(profile("identity, written by a Bash heredoc"))
    rig.hook("Stop")
    assert [s for _, s, _ in rig.versions("IDENTITY.md")] == ["manual", "session_sync"]
    rig.hook("SessionEnd", reason="other")
    assert [s for _, s, _ in rig.versions("IDENTITY.md")] == ["manual", "session_sync"]


def test_store_side_edit_during_the_session_survives_stop(rig: Rig) -> None:
    rig.set("SOUL.md", profile("soul"))
    rig.hook("SessionStart")
    rig.set("SOUL.md", profile("soul edited by the lead"))
    rig.hook("Stop")
    rig.hook("SessionEnd", reason="other")
    versions = rig.versions("SOUL.md")
    assert [s for _, s, _ in versions] == ["manual", "manual"]
    assert "edited by the lead" in versions[-1][2]
    rig.hook("SessionStart", session="s2")
    assert "edited by the lead" in (rig.ws / "SOUL.md").read_text()
    assert not list(rig.ws.glob("SOUL.md.bak-*"))  # the stale copy was ours: no backup needed


def test_both_sides_changed_keeps_both_and_reports_the_conflict(rig: Rig) -> None:
    rig.set("SOUL.md", profile("soul"))
    rig.hook("SessionStart")
    rig.set("SOUL.md", profile("soul edited by the lead"))
    (rig.ws / "SOUL.md").write_text(profile("soul edited by the agent"))
    rig.hook("Stop")
    versions = rig.versions("SOUL.md")
    assert [(v, s) for v, s, _ in versions] == [(1, "manual"), (2, "manual"), (3, "conflict")]
    assert "edited by the agent" in versions[2][2]
    show = rig.cli("identity", "show", rig.agent, "SOUL.md").stdout
    assert "edited by the lead" in show  # the store's edit stays current
    ctx = context(rig.hook("SessionStart", session="s2"))
    assert "changed both in the store (version 2" in ctx and "kept as version 3" in ctx
    assert "edited by the lead" in (rig.ws / "SOUL.md").read_text()
    # Reported once.
    assert "changed both" not in context(rig.hook("SessionStart", session="s3"))


def test_shrinking_write_is_refused_and_reported_at_next_start(rig: Rig) -> None:
    rig.set("SOUL.md", profile("soul"))
    rig.hook("SessionStart")
    (rig.ws / "SOUL.md").write_text("TEST SENTINEL\n")
    out = context(rig.tool("Write", rig.ws / "SOUL.md", content="TEST SENTINEL\n"))
    assert "not saved" in out and "below the 500-character minimum" in out
    rig.hook("Stop")  # the final sync neither stores it nor reports it twice
    rig.hook("SessionEnd", reason="other")
    assert [s for _, s, _ in rig.versions("SOUL.md")] == ["manual"]
    ctx = context(rig.hook("SessionStart", session="s2"))
    assert ctx.count("was refused") == 1 and "14 characters" in ctx
    # The real profile is back on disk; the sentinel is kept as a backup.
    assert "soul principle 3" in (rig.ws / "SOUL.md").read_text()
    assert [p.read_text() for p in rig.ws.glob("SOUL.md.bak-*")] == ["TEST SENTINEL\n"]
    assert "was refused" not in context(rig.hook("SessionStart", session="s3"))


def test_growing_past_the_budget_is_refused(rig: Rig) -> None:
    rig.env["AGENT_HOOKS__IDENTITY_FILES__MAX_CHARS"] = "3000"
    rig.set("TOOLS.md", profile("tools", 10))
    rig.hook("SessionStart")
    (rig.ws / "TOOLS.md").write_text(profile("tools", 400))
    out = context(rig.tool("Write", rig.ws / "TOOLS.md"))
    assert "past the 3000-character budget" in out
    assert len(rig.versions("TOOLS.md")) == 1


def test_symlinked_identity_file_is_neither_followed_nor_overwritten(rig: Rig, tmp_path: Path) -> None:
    outside = tmp_path / "outside-secret.md"
    outside.write_text(profile("secret outside the workspace"))
    os.symlink(outside, rig.ws / "SOUL.md")
    rig.set("SOUL.md", profile("soul"))
    out = rig.hook("SessionStart")
    assert (rig.ws / "SOUL.md").is_symlink()
    assert "secret outside" in outside.read_text()  # not written through the link
    assert "soul principle 3" in context(out)  # the model still gets its identity
    rig.tool("Write", rig.ws / "SOUL.md")
    rig.hook("Stop")
    assert all("secret" not in c for _, _, c in rig.versions("SOUL.md"))


def test_identity_file_outside_the_workspace_or_in_a_subdirectory_is_ignored(rig: Rig, tmp_path: Path) -> None:
    rig.set("SOUL.md", profile("soul"))
    rig.hook("SessionStart")
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    (elsewhere / "SOUL.md").write_text(profile("someone else"))
    (rig.ws / "docs").mkdir()
    (rig.ws / "docs" / "SOUL.md").write_text(profile("a document about souls"))
    (rig.ws / "dots").mkdir()
    rig.tool("Write", elsewhere / "SOUL.md")
    rig.tool("Write", rig.ws / "docs" / "SOUL.md")
    rig.tool("Write", str(rig.ws / "dots" / ".." / ".." / "other" / "SOUL.md"))
    assert len(rig.versions("SOUL.md")) == 1


def test_configured_workspace_overrides_the_cwd(rig: Rig, tmp_path: Path) -> None:
    home_ws = tmp_path / "agent-home"
    home_ws.mkdir()
    rig.env["AGENT_HOOKS__IDENTITY_FILES__WORKSPACE"] = str(home_ws)
    rig.set("IDENTITY.md", profile("identity"))
    rig.hook("SessionStart")
    assert (home_ws / "IDENTITY.md").exists() and not (rig.ws / "IDENTITY.md").exists()


def test_agents_are_kept_apart(rig: Rig) -> None:
    rig.set("SOUL.md", profile("ada"), agent="ada")
    rig.set("SOUL.md", profile("bob"), agent="bob")
    rig.env["AGENT_HOOKS_AGENT"] = "bob"
    ctx = context(rig.hook("SessionStart"))
    assert "bob principle" in ctx and "ada principle" not in ctx
    del rig.env["AGENT_HOOKS_AGENT"]
    rig.set("SOUL.md", profile("default agent"), agent="default")
    assert "default agent principle" in context(rig.hook("SessionStart", session="s2"))


def test_ordinary_tool_calls_touch_no_identity_or_memory_tables(rig: Rig) -> None:
    rig.set("SOUL.md", profile("soul"))
    rig.hook("SessionStart")
    assert rig.hook("PostToolUse", tool_name="Bash", tool_input={"command": "ls"},
                    tool_response={"stdout": "", "stderr": ""}, tool_use_id="toolu_1") is None
    (rig.ws / "notes.txt").write_text("hello")
    assert rig.tool("Write", rig.ws / "notes.txt") is None
    with rig.db() as conn:
        assert conn.execute("SELECT count(*) FROM identity_versions").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM memory_docs").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM tool_calls").fetchone()[0] == 2
    assert not rig.errors()


def test_resume_keeps_agent_changes_before_rewriting(rig: Rig) -> None:
    rig.set("SOUL.md", profile("soul"))
    rig.hook("SessionStart")
    (rig.ws / "SOUL.md").write_text(profile("soul changed by Bash"))
    rig.hook("SessionStart", source="compact")
    assert [s for _, s, _ in rig.versions("SOUL.md")] == ["manual", "session_sync"]
    assert "changed by Bash" in (rig.ws / "SOUL.md").read_text()
    assert not list(rig.ws.glob("SOUL.md.bak-*"))


def test_hook_path_stays_stdlib_only_for_identity_and_memory_writes(rig: Rig) -> None:
    import subprocess
    import sys

    code = (
        "import sys, io, json\n"
        "from agent_hooks.events import post_tool_use, session_start, stop, session_end\n"
        "bad = [m for m in ('click', 'httpx', 'sqlite_utils', 'filelock') if m in sys.modules]\n"
        "print(json.dumps(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=rig.env, capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"
    # PostToolUse alone (an ordinary tool call) does not even import the identity and memory features.
    only_post = ("import sys\nfrom agent_hooks.events import post_tool_use\n"
                 "print(sorted(m for m in sys.modules if m.startswith('agent_hooks.features.')))")
    proc = subprocess.run([sys.executable, "-c", only_post], env=rig.env, capture_output=True, text=True, check=True)
    assert "identity" not in proc.stdout and "memory" not in proc.stdout, proc.stdout


def test_agent_without_identity_in_the_store_is_left_alone(rig: Rig) -> None:
    (rig.ws / "CLAUDE.md").write_text("# This project's own instructions\n")
    assert rig.hook("SessionStart") is None
    (rig.ws / "CLAUDE.md").write_text("# This project's own instructions, edited by the agent\n")
    rig.tool("Edit", rig.ws / "CLAUDE.md", old_string="instructions", new_string="x")
    rig.hook("Stop")
    with rig.db() as conn:
        assert conn.execute("SELECT count(*) FROM identity_versions").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM identity_baselines").fetchone()[0] == 0
    # Opting in captures a new agent's first files.
    rig.env["AGENT_HOOKS__IDENTITY_FILES__MANAGE_NEW_AGENTS"] = "true"
    rig.hook("SessionStart", session="s2")
    (rig.ws / "TOOLS.md").write_text("- ripgrep for search\n")
    rig.tool("Write", rig.ws / "TOOLS.md", session="s2")
    assert [s for _, s, _ in rig.versions("TOOLS.md")] == ["self_edit"]
    (rig.ws / "SOUL.md").write_text("hello\n")
    out = context(rig.tool("Write", rig.ws / "SOUL.md", session="s2"))
    assert "Nothing is stored for it yet" in out and rig.versions("SOUL.md") == []


def test_resume_does_not_repeat_what_the_transcript_already_holds(rig: Rig) -> None:
    rig.set("SOUL.md", profile("soul", 12))
    rig.set("IDENTITY.md", profile("identity", 12))
    assert "soul principle 3" in context(rig.hook("SessionStart"))
    rig.set("IDENTITY.md", profile("identity v2", 12))
    resumed = context(rig.hook("SessionStart", source="resume"))
    assert "soul principle 3" not in resumed and "identity v2 principle 3" in resumed
    # After a compaction the summary replaced the history: everything again.
    compacted = context(rig.hook("SessionStart", source="compact"))
    assert "soul principle 3" in compacted and "identity v2 principle 3" in compacted


def test_baselines_of_sessions_that_never_ended_expire(rig: Rig) -> None:
    rig.set("SOUL.md", profile("soul", 12))
    rig.hook("SessionStart", session="crashed")
    with rig.db() as conn:
        conn.execute("UPDATE identity_baselines SET at = at - 31 * 86400")
    rig.hook("SessionStart", session="s2")
    with rig.db() as conn:
        sessions = {r[0] for r in conn.execute("SELECT session_id FROM identity_baselines")}
    assert sessions == {"s2"}
