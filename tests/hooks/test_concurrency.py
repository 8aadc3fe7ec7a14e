"""200 hook processes at once on one store: all recorded, none failed, none past the deadline."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from support.repo import fixture_payload
from support.scripts import BIN, error_log, store_rows


# On an initialised store (install.sh runs `agent-hook init`), 200 at once. On a
# brand-new store one process migrates while the rest wait on the lock; 20 at once
# proves that nobody migrates twice or sees a half-made schema.
@pytest.mark.parametrize("fresh_store,N", [(False, 200), (True, 20)], ids=["initialised-200", "fresh-20"])
def test_hooks_at_once(fresh_store: bool, N: int, hooks_home: Path) -> None:
    env = dict(os.environ)
    if not fresh_store:
        subprocess.run([str(BIN / "agent-hook"), "init"], env=env, check=True, capture_output=True)
    base = fixture_payload("PreToolUse-Bash.json")
    procs = []
    for i in range(N):
        payload = dict(base, session_id=f"session-{i % 20:02d}", tool_use_id=f"toolu_{i:04d}",
                       tool_input={"command": f"echo {i}"})
        proc = subprocess.Popen([str(BIN / "agent-hook-pre-tool-use")], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        # Claude Code writes the payload as it spawns the hook; so do we (it fits the pipe buffer).
        proc.stdin.write(json.dumps(payload).encode())
        proc.stdin.close()
        procs.append((proc, payload))
    failures = []
    for proc, _ in procs:
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=120)
        if proc.returncode != 0 or out or err:
            failures.append((proc.returncode, out, err))
    assert not failures, failures[:3]
    assert error_log(hooks_home) == []  # no timeouts, no errors
    assert store_rows(hooks_home, "SELECT count(*) FROM tool_calls")[0][0] == N
    assert store_rows(hooks_home, "SELECT count(DISTINCT tool_use_id) FROM tool_calls")[0][0] == N
    assert store_rows(hooks_home, "SELECT sum(tool_calls) FROM sessions")[0][0] == N
    assert store_rows(hooks_home, "SELECT count(*) FROM errors")[0][0] == 0
