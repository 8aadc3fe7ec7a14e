"""A server that comes back by itself (server/supervisor.py): the listening socket outlives a
killed worker, calls made meanwhile wait and are answered, `server status` names each restart
and its cause, and `server stop` still stops everything."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from support.repo import fixture_payload
from support.scripts import error_log, store_rows
from support.servers import Server, server  # noqa: F401 - fixture


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie not yet reaped is dead
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def post_tool_use(n: int) -> dict[str, object]:
    return dict(fixture_payload("PostToolUse-Bash.json"), session_id="sup-1", tool_use_id=f"toolu_sup{n}")


def test_a_killed_worker_is_replaced_and_calls_meanwhile_are_answered(server: Server) -> None:
    first = server.status()
    supervisor, worker = first["pid"], first["worker_pid"]
    assert worker and worker != supervisor and first["restarts"] == 0
    killed = []
    for n in range(3):
        os.kill(worker, signal.SIGKILL)
        killed.append(worker)
        # At once, before any new worker can be up: the connection waits in the backlog and is answered.
        assert server.answer(post_tool_use(n)) is None
        st = server.status()
        assert st["pid"] == supervisor and st["worker_pid"] not in killed, st
        worker = st["worker_pid"]
    recorded = {r["tool_use_id"] for r in store_rows(server.home, "SELECT tool_use_id FROM tool_calls")}
    assert {"toolu_sup0", "toolu_sup1", "toolu_sup2"} <= recorded
    st = server.status()
    assert st["restarts"] == 3
    assert [r["pid"] for r in st["last_restarts"]] == killed
    assert all(r["signal"] == signal.SIGKILL and r["signal_name"] == "SIGKILL" and r["cause"] == "killed by SIGKILL"
               and r["at"] > first["started"] for r in st["last_restarts"])
    text = server.cli("status").stdout
    assert "worker restarts 3" in text and text.count("killed by SIGKILL") == 3, text
    assert f"pid {killed[0]} killed by SIGKILL" in text
    # Each restart is in the error log, where doctor looks for gaps.
    gaps = [e for e in error_log(server.home) if e["kind"] == "server"]
    assert [f"(pid {pid})" in e["message"] for e, pid in zip(gaps, killed, strict=True)] == [True] * 3, gaps
    # The server file still names the supervisor, which `stop` ends with its worker.
    assert json.loads((server.home / "server.json").read_text())["pid"] == supervisor
    assert server.cli("stop").stdout.startswith(f"server stopped (pid {supervisor})")
    end = time.monotonic() + 10
    while (alive(supervisor) or alive(worker)) and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(supervisor) and not alive(worker)
    assert not (server.home / "server.json").exists()
    assert server.status()["up"] is False


def test_a_worker_that_exits_is_restarted_with_its_exit_code(server: Server) -> None:
    # SIGTERM to the worker alone (not through `stop`): uvicorn shuts down and re-raises it.
    worker = server.status()["worker_pid"]
    os.kill(worker, signal.SIGTERM)
    end = time.monotonic() + 15
    st = server.status()
    while (not st["up"] or st.get("worker_pid") == worker) and time.monotonic() < end:
        time.sleep(0.05)
        st = server.status()
    assert st["up"] and st["restarts"] == 1, st
    [restart] = st["last_restarts"]
    assert restart["pid"] == worker and restart["cause"] in ("killed by SIGTERM", "exited with code 0"), restart


def test_killing_the_supervisor_takes_the_worker_with_it(server: Server) -> None:
    st = server.status()
    os.kill(st["pid"], signal.SIGKILL)
    end = time.monotonic() + 10
    while alive(st["worker_pid"]) and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(st["worker_pid"]), "the worker outlived its supervisor"
    assert server.status()["up"] is False
