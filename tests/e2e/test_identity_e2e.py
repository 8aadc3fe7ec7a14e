"""Identity files and memory under the real client: the store is the agent's source of truth."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from harness import BIN_DIR, E2E, TRANSPORTS
from model_server import text, tool_use

# Every scenario over both transports: the executables, and http hooks to the resident server.
pytestmark = pytest.mark.parametrize("transport", TRANSPORTS, indirect=True)

AGENT = "ada"


def profile(word: str, n: int = 14) -> str:
    return f"# {word}\n\n" + "\n".join(f"- {word} principle {i}: keep promises and write things down."
                                       for i in range(n)) + "\n"


def cli(e2e: E2E, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(BIN_DIR / "agent-hook"), *args], env=e2e.env({"AGENT_HOOKS_AGENT": AGENT}),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc


def set_identity(e2e: E2E, name: str, content: str) -> None:
    src = e2e.root / f"set-{name}-{len(content)}"
    src.write_text(content)
    cli(e2e, "identity", "set", AGENT, name, "--file", str(src))


def versions(e2e: E2E, name: str) -> list[dict[str, Any]]:
    return e2e.query("SELECT version, source, content, session_id FROM identity_versions"
                     " WHERE agent = ? AND name = ? ORDER BY version", AGENT, name)


def run(e2e: E2E, prompt: str, **kwargs: Any) -> Any:
    result = e2e.run(prompt, env_extra={"AGENT_HOOKS_AGENT": AGENT}, **kwargs)
    assert result.ok, e2e.describe()
    return result


def test_identity_from_the_store_reaches_the_model_and_the_workspace(e2e: E2E) -> None:
    soul, ident = profile("Ada's soul"), profile("Ada's identity")
    set_identity(e2e, "SOUL.md", soul)
    set_identity(e2e, "IDENTITY.md", ident)
    assert not any(e2e.workspace.iterdir())
    e2e.server.set_script([[text("Hello, I am Ada.")]])
    run(e2e, "Who are you?")
    first = e2e.server.messages("main")[0]
    assert "Ada's soul principle 13" in first.text and "Ada's identity principle 13" in first.text
    assert (e2e.workspace / "SOUL.md").read_text() == soul
    assert (e2e.workspace / "IDENTITY.md").read_text() == ident
    assert e2e.errors() == []


def test_model_edit_of_soul_md_becomes_a_self_edit_version(e2e: E2E) -> None:
    set_identity(e2e, "SOUL.md", profile("soul"))
    soul = e2e.workspace / "SOUL.md"
    e2e.server.set_script([
        [tool_use("Read", {"file_path": str(soul)})],
        [tool_use("Edit", {"file_path": str(soul), "old_string": "soul principle 3: keep promises",
                           "new_string": "soul principle 3: always test with the real client"})],
        [text("Updated my soul.")],
    ])
    result = run(e2e, "Refine principle 3.")
    rows = versions(e2e, "SOUL.md")
    assert [r["source"] for r in rows] == ["manual", "self_edit"], rows
    assert "always test with the real client" in rows[-1]["content"]
    assert rows[-1]["session_id"] == result.session_id
    assert e2e.errors() == []


def test_store_side_edit_during_the_session_survives_stop(e2e: E2E) -> None:
    set_identity(e2e, "SOUL.md", profile("soul"))
    lead_version = profile("soul, rewritten by the lead")

    def lead_edits_the_store(body: dict[str, Any]) -> list[dict[str, Any]]:
        # Runs inside the session, between two model turns.
        set_identity(e2e, "SOUL.md", lead_version)
        return [text("Carrying on.")]

    e2e.server.set_script([
        [tool_use("Bash", {"command": "ls", "description": "look around"})],
        lead_edits_the_store,
    ])
    run(e2e, "Look around.")
    rows = versions(e2e, "SOUL.md")
    assert [r["source"] for r in rows] == ["manual", "manual"], rows
    assert cli(e2e, "identity", "show", AGENT, "SOUL.md").stdout == lead_version
    # The next session starts from the lead's version, on disk and in the model's context.
    e2e.server.add_turns([[text("Hi.")]])
    run(e2e, "Hello again.")
    assert (e2e.workspace / "SOUL.md").read_text() == lead_version
    assert "rewritten by the lead principle 13" in e2e.server.messages("main")[-1].text


def test_shrinking_write_is_refused_and_reported_at_next_session_start(e2e: E2E) -> None:
    set_identity(e2e, "SOUL.md", profile("soul"))
    soul = e2e.workspace / "SOUL.md"
    e2e.server.set_script([
        [tool_use("Read", {"file_path": str(soul)})],
        [tool_use("Write", {"file_path": str(soul), "content": "TEST SENTINEL\n"})],
        [text("Wrote the sentinel.")],
    ])
    run(e2e, "Write a test sentinel into SOUL.md.")
    # Told right away, next to the tool result.
    assert "was not saved to the identity store" in e2e.server.messages("main")[-1].text
    assert [r["source"] for r in versions(e2e, "SOUL.md")] == ["manual"]
    e2e.server.add_turns([[text("Understood.")]])
    run(e2e, "Start over.")
    first = e2e.server.messages("main")[-1]
    assert "a write of 14 characters to SOUL.md" in first.text and "was refused" in first.text
    assert "soul principle 13" in soul.read_text()
    assert [p.read_text() for p in e2e.workspace.glob("SOUL.md.bak-*")] == ["TEST SENTINEL\n"]
    assert e2e.errors() == []


def test_memory_file_written_by_the_model_is_found_by_search(e2e: E2E) -> None:
    note = e2e.workspace / "memory" / "2026-11-21-notes.md"
    e2e.server.set_script([
        [tool_use("Bash", {"command": "mkdir -p memory", "description": "memory dir"})],
        [tool_use("Write", {"file_path": str(note),
                            "content": "# Memory\nThe deploy key lives in vault under ops/deploy.\n"})],
        [text("Remembered.")],
    ])
    run(e2e, "Remember where the deploy key is.")
    out = json.loads(cli(e2e, "memory", "search", "deploy", "key", "--json").stdout)
    # Memory search also finds this session's own summary (kind "session"); the file is the memory hit.
    files = [h for h in out["hits"] if h["kind"] == "memory"]
    assert [h["path"] for h in files] == [str(note)], out
    assert files[0]["agent"] == AGENT and "[deploy]" in files[0]["snippet"]
    assert e2e.errors() == []


def test_resumed_session_still_holds_its_identity_once(e2e: E2E) -> None:
    set_identity(e2e, "SOUL.md", profile("Ada's soul"))
    e2e.server.set_script([[text("Hello.")]])
    sid = run(e2e, "Who are you?").session_id
    e2e.server.add_turns([[text("Still me.")]])
    run(e2e, "Still there?", resume=sid)
    resumed = e2e.server.messages("main")[-1]
    # SessionStart(resume) leaves out what this session was already given: the client replays the
    # first injection from the transcript (so the model still holds it) and no second copy is sent.
    assert resumed.text.count("Ada's soul principle 13") == 1, resumed.text[:3000]
