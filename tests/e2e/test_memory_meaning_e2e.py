"""Memory found by meaning under the real client: notes the model writes are found later by a paraphrase."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from harness import BIN_DIR, E2E, TRANSPORTS
from model_server import text, tool_use

# The executables (a detached worker embeds) and http hooks to the resident server (its thread embeds).
pytestmark = pytest.mark.parametrize("transport", TRANSPORTS, indirect=True)

AGENT = "ada"
NOTES = {
    "auth.md": "The login page fails when the session cookie expires; users must sign in again after 30 minutes.\n",
    "cache.md": "Redis ran out of RAM last week; eviction policy is now allkeys-lru.\n",
    "office.md": "The coffee machine on the third floor is broken again.\n",
}


def test_notes_written_by_the_model_are_found_by_a_paraphrase(e2e: E2E) -> None:
    mem = e2e.workspace / "memory"
    e2e.server.set_script([
        [tool_use("Bash", {"command": "mkdir -p memory", "description": "memory dir"})],
        *[[tool_use("Write", {"file_path": str(mem / name), "content": body})] for name, body in NOTES.items()],
        [text("Noted.")],
    ])
    result = e2e.run("Write down what we learned today.", env_extra={"AGENT_HOOKS_AGENT": AGENT})
    assert result.ok, e2e.describe()
    # Embedded off the hook path, after the turn: wait for all three vectors.
    deadline = time.monotonic() + 90
    rows: list = []
    while time.monotonic() < deadline:
        rows = e2e.query("SELECT key FROM memory_vectors WHERE kind = 'memory'")
        if len(rows) == len(NOTES):
            break
        time.sleep(0.5)
    assert sorted(r["key"] for r in rows) == sorted(str((mem / n).resolve()) for n in NOTES), e2e.errors()
    proc = subprocess.run([str(BIN_DIR / "agent-hook"), "memory", "search", "--json", "why are people kicked out",
                           "and asked for their credentials"], env=e2e.env({"AGENT_HOOKS_AGENT": AGENT}),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ranking by words only" not in proc.stderr, proc.stderr
    files = [h for h in json.loads(proc.stdout)["hits"] if h["kind"] == "memory"]
    assert files and files[0]["name"] == "auth.md", files
    assert files[0]["fts_rank"] is None and files[0]["vector_rank"] is not None
    assert e2e.errors() == []
