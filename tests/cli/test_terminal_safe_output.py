"""Payload text printed by our tables is escaped and clipped: control characters and newlines in a
session's text are shown escaped, never passed to the terminal, and long cells are cut."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.repo import fixture_payload
from support.scripts import EXECUTABLES, agent_hook, run_exe

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")

EVIL_SID = "esc-\u001b[2J\u001b]0;owned\u0007-\u202eevil"
EVIL_CWD = "/tmp/x\nFORGED-ROW  live  999  2099-01-01T00:00:00Z"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")


@pytest.fixture
def evil_session(hooks_home: Path) -> str:
    payload = fixture_payload("PreToolUse-Bash.json")
    doc = {**payload, "session_id": EVIL_SID, "cwd": EVIL_CWD, "tool_name": "Bash\u001b[31m"}
    assert run_exe(EXECUTABLES["PreToolUse"], doc).returncode == 0
    stop = {**fixture_payload("Stop.json"), "session_id": EVIL_SID, "cwd": EVIL_CWD}
    assert run_exe(EXECUTABLES["Stop"], stop).returncode == 0
    return EVIL_SID


def _assert_safe(text: str) -> None:
    assert not CONTROL.search(text), repr(text)
    assert "FORGED-ROW" not in "\n".join(line for line in text.splitlines() if line.startswith("FORGED"))


def test_status_escapes_control_characters_and_newlines(evil_session: str) -> None:
    out = agent_hook("status").stdout
    _assert_safe(out)
    assert "esc-\\e[2J" in out
    rows = [line for line in out.splitlines() if "esc-" in line]
    assert len(rows) == 1 and "\\nFORGED-ROW" in rows[0]
    assert not any(line.startswith("FORGED-ROW") for line in out.splitlines())


def test_lists_and_errors_escape(evil_session: str) -> None:
    for args in (("session", "list"), ("task", "list"), ("errors",)):
        _assert_safe(agent_hook(*args, check=False).stdout)


def test_session_show_escapes(evil_session: str) -> None:
    out = agent_hook("session", "show", evil_session).stdout
    _assert_safe(out)
    assert "Bash\\e[31m" in out


def test_summary_and_memory_search_escape(evil_session: str) -> None:
    for args in (("summary", "show", evil_session), ("summary", "search", "FORGED"), ("memory", "search", "FORGED")):
        proc = agent_hook(*args, check=False)
        _assert_safe(proc.stdout)


def test_long_cells_are_clipped(hooks_home: Path) -> None:
    payload = fixture_payload("PreToolUse-Bash.json")
    assert run_exe(EXECUTABLES["PreToolUse"], {**payload, "cwd": "/" + "d" * 4000}).returncode == 0
    out = agent_hook("status").stdout
    assert max(len(line) for line in out.splitlines()) < 300


def test_cell_unit() -> None:
    from agent_hooks.cli.table import block, cell

    assert cell(None) == "-"
    assert cell("a\x1bb\nc", 10) == "a\\eb\\nc   "
    assert cell("x" * 500) == "x" * 119 + "…"
    assert cell("\ud83d") == "\\ud83d"
    assert block("line one\nline\x1b[2J two\r\n") == "line one\nline\\e[2J two\n"
