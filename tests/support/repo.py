"""Paths in the checkout: its root, and the payloads captured from the real client (tests/fixtures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_hooks.claude_code import PINNED

ROOT = Path(__file__).resolve().parents[2]
# Payloads captured from the real client by tests/e2e/capture_fixtures.py, one directory per version.
FIXTURES_ROOT = ROOT / "tests" / "fixtures"
FIXTURES = FIXTURES_ROOT / f"claude-code-{PINNED}"
# Payloads captured from the newest client, in this repository (see tests/fixtures/README if any).
FIXTURES_330 = FIXTURES_ROOT / "claude-code-2.1.330"


def fixture_payload(name: str, version: str = PINNED) -> dict[str, Any]:
    """A payload the real client ``version`` sent (``tests/fixtures/claude-code-<version>/<name>``)."""
    return json.loads((FIXTURES_ROOT / f"claude-code-{version}" / name).read_text())
