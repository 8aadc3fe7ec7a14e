"""Memory indexing through the installed hooks, and `agent-hook memory search / reindex`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.identity import Rig


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    """These tests are about the words index: ranking by meaning is off. With it on, the embedding model
    rightly finds related texts too ("vault" finds the note about the password manager at cosine 0.24;
    a session summary turns up beside its note); tests/features/test_memory_vectors.py tests search by meaning."""
    r = Rig(tmp_path)
    r.env["AGENT_HOOKS__MEMORY__VECTORS"] = "false"
    return r


def search(rig: Rig, *args: str) -> list[dict]:
    return json.loads(rig.cli("memory", "search", *args, "--json").stdout)["hits"]


def test_written_memory_file_is_indexed_reindexed_and_dropped(rig: Rig) -> None:
    mem = rig.ws / "memory"
    mem.mkdir()
    note = mem / "2026-11-21-notes.md"
    note.write_text("# Memory\nThe deploy key lives in vault.\n")
    rig.tool("Write", note, content=note.read_text())
    hits = search(rig, "deploy", "vault")
    assert [h["path"] for h in hits] == [str(note)]
    assert hits[0]["agent"] == "ada" and hits[0]["scope"] == "agent" and "[deploy]" in hits[0]["snippet"]
    # Stemming: "deploying" finds "deploy".
    assert search(rig, "deploying")
    note.write_text("# Memory\nThe deploy key moved to the password manager.\n")
    rig.tool("Edit", note, old_string="lives in vault", new_string="moved")
    assert search(rig, "vault") == [] and len(search(rig, "password", "manager")) == 1
    note.unlink()
    rig.tool("Write", note)
    assert search(rig, "password") == []
    with rig.db() as conn:
        assert conn.execute("SELECT count(*) FROM memory_docs").fetchone()[0] == 0


def test_ranking_agent_filter_and_limit(rig: Rig) -> None:
    mem = rig.ws / "memory"
    mem.mkdir()
    (mem / "postgres.md").write_text("postgres postgres: the replica lags; postgres vacuum nightly\n")
    (mem / "misc.md").write_text("misc notes; we once mentioned postgres in passing among many other words\n")
    for f in ("postgres.md", "misc.md"):
        rig.tool("Write", mem / f)
    rig.env["AGENT_HOOKS_AGENT"] = "bob"
    (mem / "bob.md").write_text("bob's postgres credentials rotate monthly\n")
    rig.tool("Write", mem / "bob.md")
    hits = search(rig, "postgres")
    assert len(hits) == 3 and hits[0]["name"] == "postgres.md"
    assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]
    assert {h["name"] for h in search(rig, "postgres", "--agent", "ada")} == {"postgres.md", "misc.md"}
    assert [h["name"] for h in search(rig, "postgres", "--agent", "bob")] == ["bob.md"]
    assert len(search(rig, "postgres", "--limit", "1")) == 1
    text = rig.cli("memory", "search", "replica").stdout
    assert "postgres.md" in text and "[replica]" in text


def test_shared_dirs_are_visible_to_every_agent(rig: Rig) -> None:
    rig.env["AGENT_HOOKS__MEMORY__SHARED_DIRS"] = '["shared-memory"]'
    shared = rig.ws / "shared-memory"
    shared.mkdir()
    (shared / "runbook.md").write_text("restart the queue worker with systemctl\n")
    rig.tool("Write", shared / "runbook.md")
    hits = search(rig, "queue", "--agent", "someone-else")
    assert [h["scope"] for h in hits] == ["shared"]


def test_files_outside_memory_dirs_symlinks_and_other_extensions_are_not_indexed(rig: Rig, tmp_path: Path) -> None:
    mem = rig.ws / "memory"
    mem.mkdir()
    secret = tmp_path / "secret.md"
    secret.write_text("the launch code is zebra\n")
    os.symlink(secret, mem / "link.md")
    (mem / "data.json").write_text('{"zebra": 1}')
    (rig.ws / "README.md").write_text("zebra\n")
    for p in (mem / "link.md", mem / "data.json", rig.ws / "README.md", secret):
        rig.tool("Write", p)
    rig.hook("Stop")
    assert search(rig, "zebra") == []


def test_stop_catches_files_written_or_removed_by_bash(rig: Rig) -> None:
    mem = rig.ws / "memory" / "deep"
    mem.mkdir(parents=True)
    (mem / "a.md").write_text("kubernetes ingress notes\n")
    rig.hook("Stop")
    assert [h["name"] for h in search(rig, "ingress")] == ["a.md"]
    (mem / "a.md").unlink()
    rig.hook("Stop")
    assert search(rig, "ingress") == []


def test_reindex_rebuilds_from_known_workspaces(rig: Rig, tmp_path: Path) -> None:
    mem = rig.ws / "memory"
    mem.mkdir()
    (mem / "a.md").write_text("alpha bravo\n")
    rig.hook("SessionStart")  # the session's cwd becomes a known workspace
    other = tmp_path / "other-ws"
    (other / "memory").mkdir(parents=True)
    (other / "memory" / "b.md").write_text("charlie bravo\n")
    with rig.db() as conn:  # a stale row for a file that is gone
        conn.execute("DELETE FROM memory_docs")
        conn.execute("DELETE FROM memory_fts")
    out = json.loads(rig.cli("memory", "reindex", "--workspace", str(other), "--agent", "carol", "--json").stdout)
    assert out["documents"] == 2 and str(rig.ws) in out["workspaces"]
    hits = {h["name"]: h["agent"] for h in search(rig, "bravo")}
    assert hits == {"a.md": "ada", "b.md": "carol"}
    (mem / "a.md").unlink()
    rig.cli("memory", "reindex")
    assert {h["name"] for h in search(rig, "bravo")} == set()  # other-ws is not known without --workspace


def test_search_without_a_store_and_bad_queries(rig: Rig) -> None:
    assert search(rig, "anything") == []
    assert not (rig.home / "store.db").exists()  # read-only commands never create the store
    rig.hook("SessionStart")
    assert search(rig, 'quotes " and (parens) AND OR') == []
    bad = rig.cli("memory", "search", "--raw", "AND (", ok=False)
    assert bad.returncode == 1 and "bad query" in bad.stderr


def test_absolute_shared_dir_outside_the_workspace(rig: Rig, tmp_path: Path) -> None:
    shared = tmp_path / "fleet-memory"
    shared.mkdir()
    rig.env["AGENT_HOOKS__MEMORY__SHARED_DIRS"] = json.dumps([str(shared)])
    (shared / "oncall.md").write_text("the pager rotation changes on mondays\n")
    rig.tool("Write", shared / "oncall.md")
    assert [(h["scope"], h["root"]) for h in search(rig, "pager", "--agent", "bob")] == [("shared", str(shared))]
    (shared / "oncall.md").unlink()
    rig.hook("Stop")
    assert search(rig, "pager") == []
