"""The resident server: lifecycle, one handler path over http, identity headers, bad input,
other users refused, the deadline, and 1,000 requests at once from 20 sessions."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agent_hooks.server.local import header_for

from support.center import Center
from support.ports import free_port, wait_listening
from support.repo import fixture_payload
from support.scripts import agent_hook, error_log, run_hook, store_rows
from support.servers import Server, server, start_server  # noqa: F401 - fixture

HEADER = "X-Agent-Hooks-Env-"


def test_start_is_idempotent_and_one_server_per_store(server: Server) -> None:
    first = server.status()
    assert first["up"] and not first["stale"] and first["port"] == server.port
    again = json.loads(server.cli("start", "--json").stdout)
    assert again["done"] == "running" and again["pid"] == first["pid"]
    # A second server on the same store (even on another port) finds the lock taken.
    proc = server.cli("run", check=False, env={"AGENT_HOOKS__SERVE__PORT": str(server.port + 1)})
    assert proc.returncode == 1 and f"pid {first['pid']}" in proc.stderr
    assert server.status()["pid"] == first["pid"]
    text = server.cli("status").stdout
    assert f"pid {first['pid']}" in text and "p99" in text
    assert server.cli("stop").stdout.startswith(f"server stopped (pid {first['pid']})")
    assert server.status()["up"] is False
    assert not (server.home / "server.json").exists()
    assert "no server was running" in server.cli("stop").stdout


def test_log_goes_to_the_log_dir_private(server: Server) -> None:
    server.cli("stop")
    log = server.home / "logs" / "server.log"
    assert "serving" in log.read_text() and "Finished server process" in log.read_text()
    assert oct(log.stat().st_mode & 0o777) == "0o600"


def test_start_in_a_fresh_home_makes_it_private(server: Server) -> None:
    # `server start` (and SessionStart --serve, before the runner sets its umask) may be the
    # first to create the state directory: 0700 like every directory we make, not the umask's 0755.
    assert oct(server.home.stat().st_mode & 0o777) == "0o700"
    assert oct((server.home / "logs").stat().st_mode & 0o777) == "0o700"


def test_the_log_stays_rotated_with_what_goes_to_stderr(hooks_home: Path) -> None:
    # The server's stderr (each bad input's line, tracebacks) was the fd `start` opened on
    # server.log: after a rotation it wrote to server.log.1, then to an unlinked file, unbounded.
    srv = start_server(hooks_home, env={"AGENT_HOOKS__SERVE__LOG_MAX_BYTES": "4000"})
    try:
        for i in range(120):
            assert srv.post(b"not json %d" % i, event="PreToolUse")[0] == 200
    finally:
        srv.stop()
    logs = hooks_home / "logs"
    assert (logs / "server.log.1").exists()
    sizes = [p.stat().st_size for p in (logs / "server.log", logs / "server.log.1")]
    assert max(sizes) < 8000, sizes
    assert "stdin is not JSON" in (logs / "server.log").read_text()
    assert oct((logs / "server.log.1").stat().st_mode & 0o777) == "0o600"


def test_same_answers_as_the_executables(server: Server) -> None:
    start = fixture_payload("SessionStart-startup.json")
    sid = start["session_id"]
    status, headers, _ = server.post(start)
    assert status == 200 and "x-agent-hooks-problem" not in headers
    agent_hook("cancel", sid, "--reason", "stop now", env=server.env)
    pre = fixture_payload("PreToolUse-Read.json")
    pre["session_id"] = sid
    over_http = server.answer(pre)
    by_exe = json.loads(run_hook(pre).stdout)
    assert over_http == by_exe
    assert over_http["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "stop now" in over_http["hookSpecificOutput"]["permissionDecisionReason"]
    rows = store_rows(server.home, "SELECT outcome, count(*) FROM tool_calls WHERE session_id = ? GROUP BY 1", (sid,))
    assert [tuple(r) for r in rows] == [("denied", 2)]


def _transcript(sid: str) -> str:
    """A transcript with one turn of usage, where the hooks look for it (under $HOME/.claude)."""
    path = Path(os.environ["HOME"]) / ".claude" / "projects" / "-work" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"type": "user", "message": {"role": "user", "content": "work on it"}}) + "\n"
                    + json.dumps({"type": "assistant", "message": {"model": "claude-opus-5-5", "role": "assistant",
                                  "content": [], "usage": {"input_tokens": 1000, "output_tokens": 5}}}) + "\n")
    return str(path)


# Every event the http transport posts besides the tool events, as the client sends it.
SESSION_EVENTS = [("SessionEnd.json", "2.1.197"), ("SubagentStart.json", "2.1.332"),
                  ("SubagentStop.json", "2.1.332"), ("PostCompact-manual.json", "2.1.332"),
                  ("StopFailure.json", "2.1.332"), ("Notification-elicitation_response.json", "2.1.332"),
                  ("Elicitation.json", "2.1.332"), ("ElicitationResult.json", "2.1.332")]


def test_every_event_of_a_session_answers_over_http_as_the_executables_do(server: Server) -> None:
    """The http transport posts every event but SessionStart: the same handler path must give the same
    decisions (a cancelled session's prompt blocked, a persisting worker held, PreCompact's reminder)
    and keep the same records. One session goes through the executables, its twin through the server."""
    def exe(payload: dict[str, Any], env: dict[str, str]) -> dict[str, Any] | str | None:
        proc = run_hook(payload, env)
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
        out = proc.stdout.decode().strip()
        return (json.loads(out) if out.startswith("{") else out) or None

    def http(payload: dict[str, Any], env: dict[str, str]) -> dict[str, Any] | str | None:
        status, headers, data = server.post(payload, {header_for(k): v for k, v in env.items()})
        assert status == 200 and "x-agent-hooks-problem" not in headers, (headers, data)
        if not data:
            return None
        answer = json.loads(data)  # an http hook's answer must be a JSON object, PreCompact's too
        assert isinstance(answer, dict)
        return "\n".join(answer["instructions"]) if payload["hook_event_name"] == "PreCompact" else answer

    def session(how: str, answer: Any) -> dict[str, Any]:
        sid, task = f"S-{how}", f"T-{how}"
        env = {"AGENT_HOOKS_TASK_ID": task}
        agent_hook("task", "create", task, "--description", "Port the parser", "--persist", env=server.env)
        transcript = _transcript(sid)

        def call(name: str, version: str = "2.1.197", **extra: Any) -> dict[str, Any] | str | None:
            payload = {**fixture_payload(name, version), "session_id": sid, "transcript_path": transcript, **extra}
            return answer(payload, env)

        got: dict[str, Any] = {"start": exe({**fixture_payload("SessionStart-startup.json"), "session_id": sid,
                                             "transcript_path": transcript}, env)}  # a command hook either way
        got["prompt"] = call("UserPromptSubmit.json")
        got["stop"] = call("Stop.json", stop_hook_active=False)  # the task persists: held
        got["compact"] = call("PreCompact-manual.json")
        got["rest"] = [call(name, version) for name, version in SESSION_EVENTS]
        agent_hook("cancel", sid, "--reason", "stop now", env=server.env)
        got["cancelled prompt"] = call("UserPromptSubmit.json")
        got["events"] = [r[0] for r in store_rows(server.home, "SELECT event FROM session_events WHERE session_id = ?"
                                                  " ORDER BY id", (sid,))]
        return got

    answers = {"exe": session("exe", exe), "http": session("http", http)}

    def same(value: Any) -> Any:
        return json.loads(json.dumps(value).replace("S-http", "S-exe").replace("T-http", "T-exe"))

    assert same(answers["http"]) == answers["exe"]
    exe_got = answers["exe"]
    assert exe_got["prompt"] is None and exe_got["rest"] == [None] * len(SESSION_EVENTS)
    assert exe_got["stop"]["decision"] == "block" and "agent-hook task done T-exe" in exe_got["stop"]["reason"]
    assert "Port the parser" in exe_got["compact"]
    assert exe_got["cancelled prompt"]["decision"] == "block" and "stop now" in exe_got["cancelled prompt"]["reason"]
    assert {"UserPromptSubmit", "Stop", "PreCompact", "SessionEnd", "SubagentStop", "Elicitation"} <= set(
        exe_got["events"]), exe_got["events"]


def test_session_variables_arrive_as_headers(server: Server) -> None:
    a = fixture_payload("PreToolUse-Bash.json")
    a["session_id"] = "with-task"
    server.answer(a, {HEADER + "AGENT-HOOKS-TASK-ID": "T-42", HEADER + "AGENT-HOOKS-AGENT": "alice",
                      HEADER + "OPTIMALOS-SESSION-TMUX": "tm-1", HEADER + "AGENT-HOOKS-ROLE": "lead"})
    b = dict(a, session_id="empty-means-unset", tool_use_id="toolu_b")
    server.answer(b, {HEADER + "AGENT-HOOKS-TASK-ID": "", HEADER + "AGENT-HOOKS-AGENT": ""})
    rows = {r["session_id"]: tuple(r)[1:] for r in store_rows(
        server.home, "SELECT session_id, task_id, agent, tmux_session, role FROM sessions")}
    assert rows["with-task"] == ("T-42", "alice", "tm-1", "lead")
    assert rows["empty-means-unset"] == (None, "default", None, "worker")


def test_the_servers_own_session_variables_do_not_leak(hooks_home: Path) -> None:
    # A server started from inside a session (SessionStart does that) must not
    # give that session's task to every other session.
    srv = start_server(hooks_home, env={"AGENT_HOOKS_TASK_ID": "LEAK", "AGENT_HOOKS_AGENT": "leaky"})
    try:
        srv.answer(fixture_payload("PreToolUse-Bash.json"))
        assert [tuple(r) for r in store_rows(hooks_home, "SELECT task_id, agent FROM sessions")] == [(None, "default")]
    finally:
        srv.stop()


BAD_BODIES = {
    "empty": b"",
    "not-json": b"{nope",
    "array": b"[1, 2]",
    "invalid-utf8": b'{"hook_event_name": "PreToolUse", "session_id": "\xff"}',
    "missing-session": json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}}).encode(),
    "wrong-type": json.dumps({**fixture_payload("PreToolUse-Bash.json"), "tool_input": "rm -rf /"}).encode(),
    "unknown-event": json.dumps({"hook_event_name": "MadeUpEvent", "session_id": "s-unknown"}).encode(),
}


@pytest.fixture(scope="session")  # one per worker: the run interleaves modules (see conftest)
def calls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server on an initialised store for the tests below that post one call and check what
    that call added (a server start is about a fifth of a second of CPU)."""
    srv = Center(tmp_path_factory.mktemp("calls") / "agent-hooks-home")
    agent_hook("init", env=srv.env)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


class Added:
    """What a test's call adds to a shared store: errors (table and log), sessions, tool calls."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.error_id = store_rows(home, "SELECT coalesce(max(id), 0) FROM errors")[0][0]
        self.logged = len(error_log(home))
        self.sessions = self.count("sessions")
        self.tool_calls = self.count("tool_calls")

    def count(self, table: str) -> int:
        return int(store_rows(self.home, f"SELECT count(*) FROM {table}")[0][0])

    def errors(self, columns: str = "kind") -> list[tuple[Any, ...]]:
        return [tuple(r) for r in store_rows(self.home, f"SELECT {columns} FROM errors WHERE id > ? ORDER BY id",
                                             (self.error_id,))]

    def log_kinds(self) -> list[str]:
        return [e["kind"] for e in error_log(self.home)[self.logged:]]


@pytest.mark.parametrize("name", sorted(BAD_BODIES))
def test_bad_input_answers_200_with_no_decision_and_is_counted(name: str, calls_server: Server) -> None:
    server = calls_server
    added = Added(server.home)
    status, headers, body = server.post(BAD_BODIES[name])
    assert status == 200 and body == b""
    assert headers.get("x-agent-hooks-problem")
    assert added.errors() == [("bad_input",)]
    assert added.log_kinds() == ["bad_input"]
    assert added.count("sessions") == added.sessions
    if name == "unknown-event":
        assert "MadeUpEvent" in headers["x-agent-hooks-problem"]
    # The server is still fine.
    assert server.answer(fixture_payload("PreToolUse-Bash.json")) is None


@pytest.mark.parametrize("route,body,says", [
    ("PreToolUse", b"{nope", "not JSON"),
    ("PostToolUse", json.dumps(fixture_payload("PreToolUse-Bash.json")).encode(), "payload is for PreToolUse"),
    ("MadeUpEvent", json.dumps({"hook_event_name": "MadeUpEvent", "session_id": "s"}).encode(), "no handler"),
    # A newline in the body's event name once made the header invalid: no answer at all (fuzz tier).
    ("PostToolUse", json.dumps(dict(fixture_payload("PostToolUse-Bash.json"), hook_event_name="a\nb\r\nc")).encode(),
     "payload is for a?b??c"),
])
def test_per_event_routes_check_the_body(route: str, body: bytes, says: str, calls_server: Server) -> None:
    server = calls_server
    added = Added(server.home)
    status, headers, data = server.post(body, event=route)
    assert status == 200 and data == b"" and says in headers["x-agent-hooks-problem"]
    assert added.errors("kind, event") == [("bad_input", route)]
    assert added.count("tool_calls") == added.tool_calls


def _as_nobody(port: int, body: bytes, path: str = "/hooks", headers: dict[str, str] | None = None) -> str:
    runner = shutil.which("setpriv")
    if os.geteuid() != 0 or runner is None:
        pytest.skip("needs root and setpriv to run a client as another uid")
    extra = headers or {}
    code = (f"import http.client,sys;c=http.client.HTTPConnection('127.0.0.1',{port},timeout=10);"
            "c.request(sys.argv[1],sys.argv[2],sys.stdin.buffer.read() or None,"
            f"dict({{'Content-Type':'application/json'}},**{extra!r}));r=c.getresponse();print(r.status, r.read().decode())")
    proc = subprocess.run([runner, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3",
                           "-c", code, "POST" if path == "/hooks" else "GET", path],
                          input=body, capture_output=True, timeout=30, cwd="/")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


def test_another_user_gets_401_and_changes_nothing(server: Server) -> None:
    sid = "victim"
    server.answer(dict(fixture_payload("PreToolUse-Bash.json"), session_id=sid))
    before = [tuple(r) for r in store_rows(server.home, "SELECT * FROM tool_calls")]
    forged = dict(fixture_payload("PreToolUse-Bash.json"), session_id=sid, tool_use_id="toolu_forged")
    out = _as_nobody(server.port, json.dumps(forged).encode())
    assert out.startswith("401 ")
    assert _as_nobody(server.port, b"", "/status").startswith("401 ")
    health = _as_nobody(server.port, b"", "/health")
    assert health.startswith("200 ") and '"service":"agent-hooks"' in health
    assert '"pid"' not in health and '"store"' not in health  # says nothing private
    assert [tuple(r) for r in store_rows(server.home, "SELECT * FROM tool_calls")] == before
    assert store_rows(server.home, "SELECT count(*) FROM errors")[0][0] == 0
    assert server.status()["requests"]["unauthorized"] == 1


def test_a_forwarded_for_header_does_not_make_another_user_the_owner(server: Server) -> None:
    # X-Forwarded-For naming a socket of ours (the server's own listening one) must not
    # stand in for the caller's real connection: the kernel's answer is about that one only.
    forged = dict(fixture_payload("PreToolUse-Bash.json"), session_id="forged", tool_use_id="toolu_forged")
    spoof = {"X-Forwarded-For": f"127.0.0.1:{server.port}"}
    assert _as_nobody(server.port, json.dumps(forged).encode(), headers=spoof).startswith("401 ")
    assert _as_nobody(server.port, b"", "/status", headers=spoof).startswith("401 ")
    assert store_rows(server.home, "SELECT count(*) FROM tool_calls")[0][0] == 0


def test_a_listening_socket_is_not_taken_for_a_caller() -> None:
    # sock_diag's exact lookup falls back to a listener on the "client" address: a listening
    # socket of ours must not answer for a connection that does not exist.
    from agent_hooks.server import peer

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        assert peer.peer_uid(("127.0.0.1", port), ("127.0.0.1", port)) is None
        with socket.create_connection(("127.0.0.1", port)):
            conn, addr = listener.accept()
            with conn:
                assert peer.peer_uid(addr, ("127.0.0.1", port)) == os.geteuid()


def test_deadline_answers_fail_open_and_loses_nothing(hooks_home: Path) -> None:
    # Two threads and a store locked by someone else: every call, queued or running,
    # is answered by the deadline with no decision, and all of them commit afterwards.
    srv = start_server(hooks_home, env={"AGENT_HOOKS_DEADLINE_MS": "400", "AGENT_HOOKS__SERVE__THREADS": "2"})
    try:
        agent_hook("init", env=srv.env)
        srv.answer(fixture_payload("PreToolUse-Bash.json"))
        lock = sqlite3.connect(hooks_home / "store.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        base = fixture_payload("PreToolUse-Bash.json")
        bodies = [dict(base, session_id=f"locked-{i}", tool_use_id=f"toolu_locked_{i}") for i in range(6)]
        with ThreadPoolExecutor(6) as pool:
            t0 = time.perf_counter()
            results = list(pool.map(lambda b: (srv.post(b), time.perf_counter() - t0), bodies))
        lock.execute("COMMIT")
        lock.close()
        for (status, headers, body), took in results:
            assert status == 200 and body == b""
            assert "deadline of 400 ms passed" in headers.get("x-agent-hooks-problem", "")
            assert took < 1.5, took
        # The work was not lost: it commits once the store is free.
        end = time.time() + 20
        while time.time() < end:
            n = store_rows(hooks_home, "SELECT count(*) FROM tool_calls WHERE session_id LIKE 'locked-%'")[0][0]
            if n == 6:
                break
            time.sleep(0.1)
        assert n == 6
        assert sum(1 for e in error_log(hooks_home) if e["kind"] == "timeout") == 6
        st = srv.status()
        assert st["requests"]["timeout"] == 6 and st["errors"] == 6
    finally:
        srv.stop()


def test_a_thousand_requests_from_twenty_sessions(server: Server) -> None:
    subprocess.run([sys.executable, "-m", "agent_hooks", "init"], env=server.env, check=True, capture_output=True)
    pre = fixture_payload("PreToolUse-Bash.json")
    post = fixture_payload("PostToolUse-Bash.json")
    bodies = []
    for i in range(500):
        sid = f"session-{i % 20:02d}"
        command = {"command": f"echo {i}"}
        bodies.append(dict(pre, session_id=sid, tool_use_id=f"toolu_{i:04d}", tool_input=command))
        bodies.append(dict(post, session_id=sid, tool_use_id=f"toolu_{i:04d}", tool_input=command))
    # Each session's Pre before its Post, sessions interleaved; 64 at once.
    def call(body: dict) -> tuple[int, str | None, bytes]:
        status, headers, data = server.post(body, {HEADER + "AGENT-HOOKS-TASK-ID": body["session_id"][-2:]})
        return status, headers.get("x-agent-hooks-problem"), data
    with ThreadPoolExecutor(64) as pool:
        pres = list(pool.map(call, bodies[0::2]))
        posts = list(pool.map(call, bodies[1::2]))
    assert all(r == (200, None, b"") for r in pres + posts), [r for r in pres + posts if r != (200, None, b"")][:3]
    assert store_rows(server.home, "SELECT count(*) FROM tool_calls")[0][0] == 500
    assert store_rows(server.home, "SELECT count(*) FROM tool_calls WHERE outcome = 'success'")[0][0] == 500
    assert store_rows(server.home, "SELECT count(DISTINCT session_id) FROM tool_calls")[0][0] == 20
    assert store_rows(server.home, "SELECT sum(tool_calls) FROM sessions")[0][0] == 500
    assert [tuple(r) for r in store_rows(server.home, "SELECT DISTINCT task_id = substr(session_id, -2)"
                                         " FROM sessions")] == [(1,)]
    assert store_rows(server.home, "SELECT count(*) FROM errors")[0][0] == 0
    assert error_log(server.home) == []
    assert server.status()["requests"]["answered"] == 1000


def test_the_server_checkpoints_the_wal_itself(server: Server) -> None:
    """Hook calls never pay SQLite's auto-checkpoint (an fsync under the write lock): the
    command center's thread copies the WAL into the store file in the background instead."""
    pre = fixture_payload("PreToolUse-Bash.json")
    for i in range(40):
        status, _, _ = server.post(dict(pre, session_id="ckpt", tool_use_id=f"toolu_ck_{i:03d}",
                                        tool_input={"command": f"echo {i}"}))
        assert status == 200
    store = server.home / "store.db"

    def in_the_file() -> int:
        # immutable=1 reads the database file alone, not the WAL: what a checkpoint has copied.
        conn = sqlite3.connect(f"file:{store}?immutable=1", uri=True)
        try:
            return int(conn.execute("SELECT count(*) FROM tool_calls WHERE session_id = 'ckpt'").fetchone()[0])
        finally:
            conn.close()

    deadline = time.monotonic() + 10
    while in_the_file() < 40 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert in_the_file() == 40


def test_another_users_program_on_our_port_is_not_taken_for_our_server(hooks_home: Path) -> None:
    """It may answer /health with our store's path: the kernel says whose it is, and that decides."""
    runner = shutil.which("setpriv")
    if os.geteuid() != 0 or runner is None:
        pytest.skip("needs root and setpriv to run a server as another uid")
    port = free_port()
    env = dict(os.environ, AGENT_HOOKS_HOME=str(hooks_home), AGENT_HOOKS__SERVE__PORT=str(port))
    agent_hook("init", env={"AGENT_HOOKS_HOME": str(hooks_home)})
    fake = json.dumps({"ok": True, "service": "agent-hooks", "store": str(hooks_home / "store.db"), "pid": 1,
                       "port": port, "version": "0", "build": "x", "started": 0, "uptime_s": 1})
    code = ("import http.server,sys\n"
            "class H(http.server.BaseHTTPRequestHandler):\n"
            "    def do_GET(self):\n"
            "        b=sys.argv[2].encode();self.send_response(200);self.send_header('Content-Length',str(len(b)))\n"
            "        self.end_headers();self.wfile.write(b)\n"
            "    def log_message(self,*a): pass\n"
            "http.server.HTTPServer(('127.0.0.1',int(sys.argv[1])),H).serve_forever()\n")
    impostor = subprocess.Popen([runner, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3",
                                 "-c", code, str(port), fake], cwd="/")
    try:
        wait_listening(port)
        from agent_hooks.server import process

        with socket.create_connection(("127.0.0.1", port)) as probe:
            assert process._served_by_us(probe) is False
        out = subprocess.run([sys.executable, "-m", "agent_hooks", "server", "status", "--json"], env=env,
                             capture_output=True, text=True, timeout=60)
        assert json.loads(out.stdout)["up"] is False, out.stdout
    finally:
        impostor.kill()
        impostor.wait()


def test_tool_calls_run_on_the_event_loop_and_move_to_a_thread_when_the_store_is_busy(server: Server) -> None:
    """A tool call is answered on the event loop while the store is free. While another process
    holds SQLite's write lock, the loop's connection does not wait: the call is deferred before
    it has written anything, runs on a pool thread (which waits its busy timeout), and is
    recorded once."""
    agent_hook("init", env=server.env)
    pre = fixture_payload("PreToolUse-Bash.json")
    assert server.answer(dict(pre, session_id="s-busy", tool_use_id="toolu_free")) is None
    assert "deferred" not in server.status()["requests"]
    other = sqlite3.connect(server.home / "store.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writing, as a command hook or the CLI does
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(server.post, dict(pre, session_id="s-busy", tool_use_id="toolu_busy"))
        time.sleep(0.5)
        assert not pending.done()  # waiting on a pool thread, behind our lock
        other.execute("COMMIT")
        status, headers, body = pending.result(timeout=10)
    other.close()
    assert (status, body) == (200, b"") and "x-agent-hooks-problem" not in headers
    assert [tuple(r) for r in store_rows(server.home, "SELECT tool_use_id FROM tool_calls ORDER BY id")] == \
        [("toolu_free",), ("toolu_busy",)]
    assert store_rows(server.home, "SELECT tool_calls FROM sessions WHERE session_id = 's-busy'")[0][0] == 2
    requests = server.status()["requests"]
    assert requests["deferred"] == 1 and requests["answered"] == 2
    assert requests["inline"] == 1
    assert "requests answered 2 (1 on the event loop, 1 handed from it to a thread)" in server.cli("status").stdout
    assert store_rows(server.home, "SELECT count(*) FROM errors")[0][0] == 0


def test_user_handlers_never_run_on_the_event_loop(server: Server) -> None:
    """With a handler installed the tool calls go to the pool: a handler may take its whole
    timeout, and on the loop it would hold up every other session's answer meanwhile."""
    from support.handlers import write_handler

    agent_hook("init", env=server.env)
    write_handler(server.home / "hooks", "slow-reads", matcher="Read", timeout_ms=3000,
                  code="import time\ndef handle(event):\n    time.sleep(1.5)\n")
    pre = fixture_payload("PreToolUse-Bash.json")
    read = dict(pre, tool_name="Read", tool_input={"file_path": "/tmp/x"}, tool_use_id="toolu_read")
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(server.post, read)
        time.sleep(0.2)  # the Read call is in its handler now
        began = time.monotonic()
        assert server.answer(dict(pre, session_id="s-other", tool_use_id="toolu_other")) is None
        took = time.monotonic() - began
        assert slow.result(timeout=10)[0] == 200
    assert took < 1.0, f"another session's call waited {took:.2f} s behind a handler"


def test_a_payload_over_the_limit_is_refused_without_being_held(hooks_home: Path) -> None:
    """runtime.max_payload_bytes applies while the body is read: past it the rest is dropped
    (a chunked body has no Content-Length to refuse up front), and the call is bad input."""
    import http.client

    def peak_rss_mb(pid: int) -> float:
        status = Path(f"/proc/{pid}/status").read_text()
        return int(status.split("VmHWM:")[1].split()[0]) / 1024

    srv = start_server(hooks_home, {"AGENT_HOOKS__RUNTIME__MAX_PAYLOAD_BYTES": "2000"})
    try:
        agent_hook("init", env=srv.env)
        pid = int(srv.status()["worker_pid"])  # the process that serves
        before = peak_rss_mb(pid)
        head = json.dumps(dict(fixture_payload("PreToolUse-Bash.json"), tool_input={"command": ""})).encode()
        chunk = b"x" * (1 << 20)
        chunks = 96  # 96 MiB, in 1 MiB chunks
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        conn.request("POST", "/hooks/PreToolUse", iter([head] + [chunk] * chunks),
                     {"Content-Type": "application/json"}, encode_chunked=True)
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, b"")
        problem = resp.getheader("x-agent-hooks-problem")
        conn.close()
        assert problem == f"payload of {len(head) + chunks * len(chunk)} bytes is over the 2000-byte limit"
        grew = peak_rss_mb(pid) - before
        assert grew < 32, f"the server's peak memory grew by {grew:.0f} MiB: it held the body"
        errors = store_rows(srv.home, "SELECT kind, event FROM errors")
        assert [tuple(r) for r in errors] == [("bad_input", "PreToolUse")]
        assert store_rows(srv.home, "SELECT count(*) FROM tool_calls")[0][0] == 0
        assert srv.answer(fixture_payload("PreToolUse-Bash.json")) is None  # and the next call is fine
    finally:
        srv.stop()


def test_a_repaired_payload_is_reported_once_though_the_loop_hands_it_on(server: Server) -> None:
    """Repaired bad input (a lone surrogate) is logged and counted where the store may be
    waited for: the event loop defers the call before it logs anything, the pool reports it."""
    agent_hook("init", env=server.env)
    body = json.dumps(dict(fixture_payload("PreToolUse-Bash.json"), tool_use_id="toolu_sur",
                           tool_input={"command": "echo \ud800"}))
    status, headers, data = server.post(body.encode())
    assert (status, data) == (200, b"")
    assert [tuple(r) for r in store_rows(server.home, "SELECT kind FROM errors")] == [("bad_input",)]
    assert [e["kind"] for e in error_log(server.home)] == ["bad_input"]
    assert store_rows(server.home, "SELECT count(*) FROM tool_calls WHERE tool_use_id = 'toolu_sur'")[0][0] == 1
    assert server.status()["requests"]["deferred"] == 1


def test_a_handler_keeps_off_the_event_loop_only_the_calls_it_may_run_for(server: Server) -> None:
    """A handler for Stop, or for Read, leaves a Bash tool call on the loop; a Read call, which
    the handler may take, goes to the pool, and the handler runs."""
    from support.handlers import write_handler

    agent_hook("init", env=server.env)
    write_handler(server.home / "hooks", "on-stop", events=["Stop"])
    write_handler(server.home / "hooks", "reads", matcher="Read",
                  code="def handle(event):\n    return {'context': 'read seen'}\n")
    write_handler(server.home / "hooks", "switched-off", enabled=False)
    pre = fixture_payload("PreToolUse-Bash.json")
    read = dict(pre, tool_name="Read", tool_input={"file_path": "/tmp/x"}, tool_use_id="toolu_read")
    assert server.answer(read)["hookSpecificOutput"]["additionalContext"] == "read seen"  # compiles the registry
    assert server.answer(dict(pre, tool_use_id="toolu_bash_1")) is None
    assert server.answer(dict(pre, tool_use_id="toolu_bash_2")) is None
    assert server.answer(dict(read, tool_use_id="toolu_read_2"))["hookSpecificOutput"]["additionalContext"] == \
        "read seen"
    requests = server.status()["requests"]
    assert requests["answered"] == 4 and requests["inline"] == 2 and "deferred" not in requests


def test_a_store_deleted_or_replaced_under_the_server_gets_the_calls_after_it(server: Server) -> None:
    """The server's connections held the old file's inode: after `rm store.db` (or a store put
    back in its place) every call was answered as fine and written into a file nobody can read,
    and a cancel written to the new store did not stop the session. The executables open the
    path on every call; the server must follow the path too."""
    agent_hook("init", env=server.env)
    pre = fixture_payload("PreToolUse-Bash.json")
    sid = pre["session_id"]
    assert server.answer(dict(pre, tool_use_id="toolu_before")) is None
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        (server.home / name).unlink(missing_ok=True)
    assert server.answer(dict(pre, tool_use_id="toolu_deleted")) is None  # goes into a new store
    assert [tuple(r) for r in store_rows(server.home, "SELECT tool_use_id FROM tool_calls")] == [("toolu_deleted",)]
    # Replaced: another store moved into its place (a backup put back, a store from elsewhere).
    other = server.home / "other"
    run_hook(dict(pre, tool_use_id="toolu_other"), env={"AGENT_HOOKS_HOME": str(other)})
    agent_hook("cancel", sid, "--reason", "stop now", env={**server.env, "AGENT_HOOKS_HOME": str(other)})
    for name in ("store.db-wal", "store.db-shm"):
        (server.home / name).unlink(missing_ok=True)
    os.replace(other / "store.db", server.home / "store.db")
    for _ in range(3):  # the event loop's connection and a pool thread's
        answer = server.answer(dict(pre, tool_use_id="toolu_replaced"))
        assert answer is not None and answer["hookSpecificOutput"]["permissionDecision"] == "deny", answer
    assert server.answer(dict(fixture_payload("UserPromptSubmit.json"), session_id="s-prompt")) is None
    assert store_rows(server.home, "SELECT count(*) FROM sessions WHERE session_id = 's-prompt'")[0][0] == 1


def test_start_on_a_port_another_program_holds_says_so(hooks_home: Path) -> None:
    """The server exits at once when it cannot listen; `start` said it "did not answer within
    10.0 s" (it had waited 2), and the reason was only in the log."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        srv = Server(hooks_home, other.getsockname()[1])
        proc = srv.cli("start", check=False)
    assert proc.returncode == 1
    assert "cannot listen on 127.0.0.1:" in proc.stderr and "in use" in proc.stderr, proc.stderr
    assert "within" not in proc.stderr


@pytest.mark.parametrize("cwd", ["/srv/ws/\ud800", "/srv/ws/a\x00b"])
def test_a_cwd_that_is_no_path_is_recorded_as_by_the_executables(cwd: str, server: Server) -> None:
    """With a trusted workspace, the event loop's check for due handlers took the payload's cwd
    as a path before the payload was checked: a lone surrogate or a NUL in it raised there,
    outside the shared handler path, and the call got a 500 and was neither recorded nor in the
    error log. The executables repair such a payload and record the call."""
    agent_hook("init", env=server.env)
    (server.home / "config.toml").write_text('[handlers]\ntrusted_workspaces = ["/srv/ws"]\n')
    (server.home / "hooks").mkdir(exist_ok=True)
    pre = dict(fixture_payload("PreToolUse-Bash.json"), cwd=cwd)
    exe = run_hook(dict(pre, tool_use_id="toolu_exe"))
    assert (exe.returncode, exe.stdout) == (0, b""), exe.stderr
    status, headers, body = server.post(dict(pre, tool_use_id="toolu_http"))
    assert (status, body) == (200, b""), (status, body)
    rows = store_rows(server.home, "SELECT tool_use_id FROM tool_calls ORDER BY id")
    assert [r[0] for r in rows] == ["toolu_exe", "toolu_http"]
