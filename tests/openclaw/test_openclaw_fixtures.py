"""The recordings of the real OpenClaw gateway (tests/fixtures/openclaw/) are safe and described.

They are made by ``tests/e2e/capture_openclaw.py --scenarios``; a hand edit or a new recording must
keep every credential-shaped value redacted, name no real home directory, and be listed in the
README's table (which says what each one shows).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support.repo import FIXTURES_ROOT

FIXTURES = FIXTURES_ROOT / "openclaw"
RECORDINGS = sorted(FIXTURES.glob("*.jsonl"))
# What capture_openclaw.redact replaces, wherever it appears in a frame.
SECRET_KEYS = {"token", "nonce", "deviceToken", "recoveryScope", "signature", "publicKey", "password", "apiKey",
               "secret"}


def _walk(value: object, key: str | None = None):  # type: ignore[no-untyped-def]
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key)
    else:
        yield key, value


def test_there_are_recordings() -> None:
    assert len(RECORDINGS) >= 10


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_a_recording_is_frames_with_every_secret_redacted(path: Path) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert lines and lines[0]["frame"]["event"] == "connect.challenge"
    for row in lines:
        assert row["dir"] in ("in", "out") and isinstance(row["t"], (int, float))
        assert row["frame"]["type"] in ("req", "res", "event")
        for key, value in _walk(row["frame"]):
            if key in SECRET_KEYS and isinstance(value, str):
                assert value == "<redacted>", (path.name, key)
    text = path.read_text()
    assert not re.search(r"/(tmp|root|work)/", text), "a real path; the capture shows HOME as /home/dev"


def test_the_readme_describes_every_recording_and_no_other() -> None:
    readme = (FIXTURES / "README.md").read_text()
    listed = set(re.findall(r"^\| ([\w.-]+\.jsonl) \|", readme, re.M))
    assert listed == {p.name for p in RECORDINGS}
