"""The spool: a call answered fail-open before its write committed is kept and
replayed exactly once, by the next hook call or the drainer; status counts both."""

from __future__ import annotations

import json
import sqlite3
import stat
import time
from pathlib import Path

from agent_hooks import config as config_mod
from agent_hooks import spool
from agent_hooks.paths import Paths
from agent_hooks.store import Store

from support.repo import fixture_payload
from support.scripts import EXECUTABLES, agent_hook, error_log, run_exe, run_hook, store_rows
from support.waiting import wait_for


def _locked(home: Path) -> sqlite3.Connection:
    blocker = sqlite3.connect(home / "store.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    return blocker


SESSION = fixture_payload("SessionStart-startup.json")["session_id"]


def _post(n: int) -> dict:
    return {**fixture_payload("PostToolUse-Bash.json"), "session_id": SESSION, "tool_use_id": f"toolu_spool_{n:04d}"}


def _spool_file(home: Path) -> Path:
    return home / "spool" / "pending.jsonl"


def test_deadline_spools_and_the_next_hook_replays(hooks_home: Path) -> None:
    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0
    blocker = _locked(hooks_home)
    try:
        proc = run_exe(EXECUTABLES["PostToolUse"], _post(1),
                       env={"AGENT_HOOKS_DEADLINE_MS": "300", "AGENT_HOOKS_BUSY_TIMEOUT_MS": "20000"})
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert proc.returncode == 0 and proc.stdout == b""
    assert b"spooled" in proc.stderr
    spool = _spool_file(hooks_home)
    assert stat.S_IMODE(spool.stat().st_mode) == 0o600
    assert stat.S_IMODE(spool.parent.stat().st_mode) == 0o700
    assert len(spool.read_bytes().splitlines()) == 1
    assert json.loads(agent_hook("status", "--json").stdout)["spool"]["pending"] == 1
    # The next hook call (any event) starts the replayer; the call is then recorded, once.
    assert run_hook(fixture_payload("UserPromptSubmit.json")).returncode == 0
    wait_for(lambda: store_rows(hooks_home, "SELECT count(*) FROM tool_calls WHERE tool_use_id = ?",
                                ("toolu_spool_0001",))[0][0] == 1, 30, "the spooled call in the store", step=0.1)
    wait_for(lambda: json.loads(agent_hook("status", "--json").stdout)["spool"]["replayed"] == 1, 30,
             "status to count the replay", step=0.1)  # a process a look
    counts = json.loads(agent_hook("status", "--json").stdout)["spool"]
    assert counts == {"spooled": 1, "pending": 0, "replayed": 1, "duplicates": 0, "failed": 0}
    assert "1 calls spooled, 1 replayed" in agent_hook("status").stdout
    row = store_rows(hooks_home, "SELECT outcome, started_at FROM tool_calls WHERE tool_use_id = 'toolu_spool_0001'")
    assert row[0][0] == "success"
    # Counted as a session hook call, without moving the session's last activity backwards.
    assert store_rows(hooks_home, "SELECT hook_calls, last_event FROM sessions")[0][0] == 3
    assert store_rows(hooks_home, "SELECT last_event FROM sessions")[0][0] == "UserPromptSubmit"


def test_a_busy_store_spools_instead_of_losing_the_call(hooks_home: Path) -> None:
    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0
    blocker = _locked(hooks_home)
    try:
        proc = run_exe(EXECUTABLES["PostToolUse"], _post(2),
                       env={"AGENT_HOOKS_DEADLINE_MS": "5000", "AGENT_HOOKS_BUSY_TIMEOUT_MS": "100"})
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert proc.returncode == 0 and b"internal error" not in proc.stderr, proc.stderr
    assert b"store busy" in proc.stderr
    assert not [e for e in error_log(hooks_home) if e["kind"] == "error"]
    # The drainer replays it too.
    assert agent_hook("queue", "drain", check=False).returncode in (0, 1)
    assert store_rows(hooks_home, "SELECT count(*) FROM tool_calls WHERE tool_use_id = 'toolu_spool_0002'")[0][0] == 1


def test_replay_is_idempotent(hooks_home: Path) -> None:
    from agent_hooks import config as config_mod
    from agent_hooks import spool
    from agent_hooks.paths import Paths

    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0
    paths = Paths({"AGENT_HOOKS_HOME": str(hooks_home)})
    config = config_mod.load(paths, {"AGENT_HOOKS_HOME": str(hooks_home)})
    data = json.dumps(_post(3)).encode()
    assert spool.save(paths, config, "PostToolUse", data, time.time(), {}, call_id="call-1") is None
    assert spool.save(paths, config, "PostToolUse", data, time.time(), {}, call_id="call-1") is None
    done = spool.replay(paths, config)
    assert done is not None and done["replayed"] == 1 and done["duplicates"] == 1
    # A replayer killed after its commit but before removing its file replays the file again: once.
    spool.save(paths, config, "PostToolUse", data, time.time(), {}, call_id="call-1")
    assert spool.replay(paths, config)["duplicates"] == 1
    assert store_rows(hooks_home, "SELECT count(*) FROM tool_calls")[0][0] == 1
    assert store_rows(hooks_home, "SELECT hook_calls FROM sessions")[0][0] == 2
    assert not list((hooks_home / "spool").iterdir())


def test_the_spool_is_bounded(hooks_home: Path) -> None:
    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0
    env = {"AGENT_HOOKS_DEADLINE_MS": "200", "AGENT_HOOKS_BUSY_TIMEOUT_MS": "20000",
           "AGENT_HOOKS__SPOOL__MAX_BYTES": "3000"}
    blocker = _locked(hooks_home)
    try:
        procs = [run_exe(EXECUTABLES["PostToolUse"], _post(10 + i), env=env) for i in range(4)]
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert all(p.returncode == 0 for p in procs)
    assert _spool_file(hooks_home).stat().st_size <= 3000
    assert any("spool is full" in e["message"] for e in error_log(hooks_home))


def test_a_commit_and_a_spool_never_both_happen() -> None:
    from agent_hooks.spool import Abandoned, CommitGate

    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute("CREATE TABLE t (x)")
    # The worker committed first: the main thread spools nothing.
    gate = CommitGate()
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO t VALUES (1)")
    gate.commit(db)
    assert gate.abandon(0.1) is True
    # The main thread abandoned first: the worker's commit is refused and rolled back.
    gate = CommitGate()
    assert gate.abandon(0.1) is False
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO t VALUES (2)")
    try:
        gate.commit(db)
    except Abandoned:
        pass
    else:
        raise AssertionError("commit after abandon")
    assert [r[0] for r in db.execute("SELECT x FROM t")] == [1]


def test_a_replay_retry_the_full_spool_refuses_is_not_lost_silently(hooks_home: Path) -> None:
    """A replayed call that meets a busy store is spooled again; when the spool is full that save
    failed, its answer was ignored, the call counted as 'retried' and its taken file deleted."""
    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0
    env = {"AGENT_HOOKS_HOME": str(hooks_home)}
    paths = Paths(env)
    config = config_mod.load(paths, env)
    post = dict(fixture_payload("PostToolUse-Bash.json"), tool_use_id="toolu_full_1")
    line = json.dumps({"v": 1, "id": "call-full", "event": "PostToolUse", "at": time.time(), "tries": 0,
                       "env": {}, "data": json.dumps(post)}).encode()
    config["spool"]["max_bytes"] = 100  # full: the retry's line does not fit
    store = Store(paths.store, 50)
    blocker = sqlite3.connect(paths.store, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        outcome = spool._apply(store, paths, config, line)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        store.close()
    saved = b"call-full" in (Path(spool.pending_path(paths)).read_bytes() if spool.has_work(paths) else b"")
    traced = [e for e in error_log(hooks_home) if "toolu_full_1" in json.dumps(e) or "spool is full" in e["message"]]
    assert saved or (outcome == "failed" and traced), (outcome, saved, traced)
