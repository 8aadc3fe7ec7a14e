"""The pure decisions and the careful file access behind identity sync."""

from __future__ import annotations

import copy
import os
import sqlite3
from pathlib import Path

import pytest

from agent_hooks import config as config_mod
from agent_hooks import schema, store
from agent_hooks.features import files
from agent_hooks.features.identity import (
    CONFLICT_ACTION,
    SAME,
    SKIP,
    STORE,
    Baseline,
    Head,
    compose_context,
    decide,
    guard,
)


@pytest.fixture
def cfg() -> dict:
    return copy.deepcopy(config_mod.DEFAULTS)


def head(id: int, sha: str, chars: int = 1000) -> Head:
    return Head(id, id, sha, chars, "manual", 0.0, "x" * chars)


def test_schema_version_matches_migrations_and_fts5_is_there(tmp_path: Path) -> None:
    assert store.SCHEMA_VERSION == len(schema.MIGRATIONS)
    assert "m004_identity_memory" in schema.MIGRATIONS
    path = str(tmp_path / "store.db")
    applied = schema.migrate(path)
    assert "m004_identity_memory" in applied
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    conn.execute("INSERT INTO memory_fts (rowid, name, path, content) VALUES (1, 'a', 'b', 'deploying keys')")
    assert conn.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH 'deploy'").fetchall() == [(1,)]


def test_config_defaults_validate(cfg: dict) -> None:
    assert config_mod.validate(cfg) == []
    assert cfg["identity_files"]["files"] == ["SOUL.md", "IDENTITY.md", "TOOLS.md", "CLAUDE.md"]
    assert cfg["memory"]["dirs"] == ["memory"]


@pytest.mark.parametrize(
    "name, chars, previous, refused",
    [
        ("SOUL.md", 14, 3000, "below the 500-character minimum"),
        ("SOUL.md", 14, None, "below the 500-character minimum"),  # no profile yet: still no sentinel
        ("SOUL.md", 499, 300, None),  # growing a short file is fine
        ("SOUL.md", 500, 3000, None),
        ("IDENTITY.md", 10, 2000, "below"),
        ("TOOLS.md", 10, 2000, None),  # no minimum configured for TOOLS.md
        ("TOOLS.md", 40001, 2000, "past the 40000-character budget"),
        ("TOOLS.md", 40001, None, "past the 40000-character budget"),
        ("TOOLS.md", 40001, 50000, None),  # shrinking an oversized (forced) file is fine
        ("CLAUDE.md", 0, 100, None),
    ],
)
def test_guard(cfg: dict, name: str, chars: int, previous: int | None, refused: str | None) -> None:
    reason = guard(cfg, name, chars, previous)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and refused in reason


def test_decide() -> None:
    h1, h2 = head(1, "a"), head(2, "b")
    # Disk equals the store: nothing to store, whatever the baseline.
    assert decide("a", Baseline("a", 1), h1, explicit=False) == SAME
    # Unchanged since the baseline: skip (even when the store moved on: never overwrite it).
    assert decide("a", Baseline("a", 1), h2, explicit=False) == SKIP
    # Disk moved, store did not: a new version.
    assert decide("c", Baseline("a", 1), h1, explicit=False) == STORE
    assert decide("c", Baseline("a", 1), h1, explicit=True) == STORE
    # Both moved: conflict.
    assert decide("c", Baseline("a", 1), h2, explicit=False) == CONFLICT_ACTION
    # No baseline: the end-of-turn sync leaves it, an explicit write is taken.
    assert decide("c", None, h1, explicit=False) == SKIP
    assert decide("c", None, h1, explicit=True) == STORE
    assert decide("c", None, None, explicit=True) == STORE
    # File appeared during the session while the store had none.
    assert decide("c", Baseline(None, None), None, explicit=False) == STORE
    assert decide("c", Baseline(None, None), h1, explicit=False) == CONFLICT_ACTION


def test_compose_context_puts_reports_first_and_stays_in_budget() -> None:
    blocks = [("SOUL.md", "s" * 3000, "/w/SOUL.md"), ("IDENTITY.md", "i" * 3000, "/w/IDENTITY.md"),
              ("TOOLS.md", "t" * 100, "/w/TOOLS.md")]
    text = compose_context("ada", blocks, ["SOUL.md: a write was refused"], 4000)
    assert len(text) <= 4000
    assert text.index("was refused") < text.index("## SOUL.md")
    assert "## IDENTITY.md" in text and "## TOOLS.md" in text
    assert "/w/SOUL.md" not in text or "cut at the context budget" in text
    full = compose_context("ada", blocks, [], 100000)
    assert "s" * 3000 in full and "i" * 3000 in full and "t" * 100 in full and "cut" not in full
    assert compose_context("ada", [], [], 5000) == ""
    for budget in (0, 50, 300, 1000):
        assert len(compose_context("ada", blocks, ["r" * 500], budget)) <= budget


def test_read_text_refuses_symlinks_and_non_files(tmp_path: Path) -> None:
    target = tmp_path / "t.md"
    target.write_text("hello")
    os.symlink(target, tmp_path / "link.md")
    (tmp_path / "dir.md").mkdir()
    assert files.read_text(str(target), 100) == (files.OK, "hello")
    assert files.read_text(str(tmp_path / "link.md"), 100) == (files.UNSAFE, None)
    assert files.read_text(str(tmp_path / "dir.md"), 100)[0] == files.UNSAFE
    assert files.read_text(str(tmp_path / "none.md"), 100) == (files.MISSING, None)
    assert files.read_text(str(target), 3) == (files.TOO_LARGE, None)
    (tmp_path / "bin.md").write_bytes(b"\xff\xfe")
    assert files.read_text(str(tmp_path / "bin.md"), 100) == (files.NOT_TEXT, None)


def test_resolve_in_keeps_paths_inside_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    os.symlink(tmp_path, ws / "escape")
    w = str(ws)
    assert files.resolve_in(w, str(ws / "SOUL.md")) == str(ws / "SOUL.md")
    assert files.resolve_in(w, "sub/x.md") == str(ws / "sub" / "x.md")
    assert files.resolve_in(w, str(ws / "sub" / ".." / ".." / "x.md")) is None
    assert files.resolve_in(w, str(ws / "escape" / "x.md")) is None
    assert files.resolve_in(w, "/etc/passwd") is None
    assert files.resolve_in(w, w) is None
    assert files.resolve_in(w, "a\0b") is None


def test_write_text_is_atomic_private_and_never_through_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("keep me")
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(outside, ws / "SOUL.md")
    assert files.write_text(str(ws), "SOUL.md", "new", 0.0, backup=True) == (files.UNSAFE, None)
    assert outside.read_text() == "keep me"
    status, saved = files.write_text(str(ws), "IDENTITY.md", "one", 0.0, backup=True)
    assert status == files.OK and saved is None
    assert oct((ws / "IDENTITY.md").stat().st_mode & 0o777) == "0o600"
    status, saved = files.write_text(str(ws), "IDENTITY.md", "two", 0.0, backup=True)
    assert saved and Path(saved).read_text() == "one" and (ws / "IDENTITY.md").read_text() == "two"
    status, saved2 = files.write_text(str(ws), "IDENTITY.md", "three", 0.0, backup=True)
    assert saved2 != saved and Path(saved2).read_text() == "two"
    assert not [p for p in ws.iterdir() if p.name.endswith(".tmp")]
