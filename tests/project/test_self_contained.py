"""The repository stands alone: no file of the package, its tests, benchmarks or CI names a path outside it.

A clone anywhere, with nothing of the machine beside it, must collect and pass. The
check reads every text file and looks for the ways a path can leave the
checkout: an absolute path into the machine's work area, a sibling directory, the
repository root's parent joined with a name.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.repo import ROOT

SCANNED = ("agent_hooks", "tests", "bench", ".ci", "install.sh", "pyproject.toml", "settings.template.json")
SKIP_DIRS = {"__pycache__", ".venv", ".cache", ".pytest_cache", "node_modules"}
# Built from pieces so that this file does not match itself.
OUTSIDE = [
    re.compile("/" + "work/"),
    re.compile(r"\.\./" + "shared"),
    re.compile(r"""["']""" + "shared" + r"""["']\s*/\s*["'](fixtures|reference|seeds)"""),
    re.compile(r"\b(ROOT|REPO|HERE)\.parent\s*/"),
    re.compile(r"\b(ROOT|REPO)\.parent\.parent\b"),
]


def text_files() -> list[Path]:
    out: list[Path] = []
    for name in SCANNED:
        top = ROOT / name
        candidates = [top] if top.is_file() else [p for p in top.rglob("*") if p.is_file()]
        for path in candidates:
            if SKIP_DIRS.intersection(path.relative_to(ROOT).parts) or path.suffix in {".pyc", ".db"}:
                continue
            out.append(path)
    return out


def offences(text: str) -> list[str]:
    """The snippets of ``text`` that point outside the repository."""
    found = []
    for pattern in OUTSIDE:
        for m in pattern.finditer(text):
            found.append(text[max(0, m.start() - 30):m.end() + 30].replace("\n", " "))
    return found


def test_the_scan_catches_what_it_is_for() -> None:
    # The shapes that broke a fresh clone before the fixtures moved in.
    assert offences('FIXTURES = Path("' + "/wo" + 'rk/shared/fixtures/claude-code-2.1.197")')
    assert offences('FIXTURES = ROOT.par' + 'ent / "sha' + 'red" / "fixtures"')
    assert offences("see ../sha" + "red/reference/ingest-contract.md")
    assert not offences('FIXTURES = ROOT / "tests" / "fixtures"; "/workflows/"; shared_dirs')


def test_files_are_scanned() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in text_files()}
    assert "tests/support/scripts.py" in names and "agent_hooks/runner.py" in names and ".ci/run" in names
    assert any(n.startswith("tests/fixtures/claude-code-") for n in names)


@pytest.mark.parametrize("path", text_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_path_outside_the_repository(path: Path) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return  # binary: not a place a path is written
    assert offences(text) == [], f"{path.relative_to(ROOT)} names a path outside the repository"
