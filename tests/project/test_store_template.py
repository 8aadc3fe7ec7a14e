"""The premise of conftest.migrated_store: its copy is the store the first hook on a new host leaves."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from support.repo import fixture_payload
from support.scripts import run_hook


def _shape(path: Path) -> tuple[int, str, list[tuple[str, str, str]]]:
    conn = sqlite3.connect(path)
    try:
        return (conn.execute("PRAGMA user_version").fetchone()[0], conn.execute("PRAGMA journal_mode").fetchone()[0],
                sorted(conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")))
    finally:
        conn.close()


def test_the_migrated_store_is_what_a_first_hook_creates(migrated_store: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fresh_home = tmp_path / "fresh-home"
    monkeypatch.setenv("AGENT_HOOKS_HOME", str(fresh_home))
    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0
    created = fresh_home / "store.db"
    assert _shape(migrated_store) == _shape(created)
    assert stat.S_IMODE(migrated_store.stat().st_mode) == stat.S_IMODE(created.stat().st_mode) == 0o600
    assert stat.S_IMODE(migrated_store.parent.stat().st_mode) == stat.S_IMODE(fresh_home.stat().st_mode) == 0o700
