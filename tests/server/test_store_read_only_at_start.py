"""A store that is read-only when the server starts, with the server running as an ordinary user.

Root ignores file modes, so the server here runs as another uid (``nobody`` when the tests run as root,
else the tests' own user). Its store is read-only when it starts: the file (0444), or the file and its
directory (0555). Hook calls come over http, and the board's session panel reads the store meanwhile
(the board polls it while a card is open). Then the store is made writable again and, within a few
seconds and without a restart, every call made during the outage is recorded exactly once (replayed from
the spool) and the calls after it are recorded too. Doctor shows the outage while it lasts.

What kept such a server from recovering: a read of the store on one of the server's threads (the session
panel) opened a connection while the store was read-only, and that connection stayed open on its idle
thread. SQLite shares one mapping of the store's ``-shm`` file among all the connections of a process,
opened read-only when the first of them could not write it, so every later connection of that process,
the retries' too, stayed read-only until that one closed: hours, with a board open.
(tests/test_server_recovery.py drops root's CAP_DAC_OVERRIDE instead of changing uid, and reads nothing
while the store is down: it never had a connection left open.)
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import agent_hooks

from support.ports import free_port
from support.repo import fixture_payload

REPO = Path(agent_hooks.__file__).resolve().parent.parent
SESSION = "s-read-only-at-start"

# Run as the other user: the server's user, because the server answers no one else. It sends a list of
# requests (and store queries) and prints what came back, as JSON, so that one process does a whole step.
CLIENT = r"""
import http.client, json, sqlite3, sys, time

def request(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(method, path, data, {"Content-Type": "application/json"} if data else {})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = raw.decode("utf-8", "replace")
        return {"status": resp.status, "problem": resp.getheader("X-Agent-Hooks-Problem"), "body": doc}
    finally:
        conn.close()

port, store = int(sys.argv[1]), sys.argv[2]
out = []
for op in json.load(sys.stdin):
    if "post" in op:
        out.append(request(port, "POST", op["post"], op["body"]))
    elif "get" in op:
        out.append(request(port, "GET", op["get"]))
    elif "sql" in op:
        try:
            conn = sqlite3.connect(store)
            try:
                out.append(conn.execute(op["sql"]).fetchall())
            finally:
                conn.close()
        except sqlite3.Error as exc:  # a store in a read-only directory cannot even be read without its -shm
            out.append({"error": str(exc)})
    elif "until_writable" in op:
        # As the board does: its session panel keeps reading while the person looks.
        end, took = time.monotonic() + op["until_writable"], None
        start = time.monotonic()
        while time.monotonic() < end:
            request(port, "GET", op["reading"])
            if request(port, "GET", "/status")["body"]["store_state"]["writable"]:
                took = time.monotonic() - start
                break
            time.sleep(0.2)
        out.append(took)
print(json.dumps(out))
"""


@dataclass
class OrdinaryUser:
    """How to run a program as a user whom file modes bind."""

    uid: int
    gid: int
    prefix: list[str]  # setpriv ..., or nothing when the tests already run as such a user
    python: str  # an interpreter that user can run (and start again: the server spawns itself)
    pythonpath: str | None  # this environment's packages, when ``python`` is not this environment's own

    def run(self, args: list[str], env: dict[str, str], stdin: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.prefix, *args], input=stdin, capture_output=True, text=True, env=env,
                              cwd="/", timeout=timeout)


def ordinary_user() -> OrdinaryUser:
    """The user the server runs as here; skips, saying why, when there is none to be had."""
    if os.geteuid() != 0:
        return OrdinaryUser(os.getuid(), os.getgid(), [], sys.executable, None)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, and setpriv (util-linux) is missing to run the server as another user")
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root, and there is no user 'nobody' to run the server as")
    prefix = [setpriv, f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups", "--"]
    # This environment's interpreter may sit where that user cannot go (a venv made from an interpreter
    # under /root). Then the system's interpreter of the same version, with this environment's packages.
    paths = os.pathsep.join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                                           str(REPO)]))
    # The server starts itself again as a child (agent_hooks.server.local.spawn): that must work too.
    probe = ("import subprocess, sys; import agent_hooks.server.worker;"
             " subprocess.run([sys.executable, '-c', 'import agent_hooks.server.worker'], check=True)")
    tried = []
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for python, pythonpath in ((sys.executable, None), (f"/usr/bin/python{version}", paths)):
        if not os.path.exists(python):
            continue
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **({"PYTHONPATH": pythonpath} if pythonpath else {})}
        proc = subprocess.run([*prefix, python, "-c", probe], capture_output=True, text=True, env=env, cwd="/",
                              timeout=60)
        if proc.returncode == 0:
            return OrdinaryUser(nobody.pw_uid, nobody.pw_gid, prefix, python, pythonpath)
        tried.append(f"{python}: {proc.stderr.strip().splitlines()[-1:]}")
    pytest.skip(f"nobody cannot run this environment's agent_hooks ({'; '.join(tried)})")


@dataclass
class Setup:
    user: OrdinaryUser
    base: Path
    env: dict[str, str]
    data: Path  # the store's directory
    port: int

    @property
    def store(self) -> Path:
        return self.data / "store.db"

    def agent_hook(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.user.run([self.user.python, "-m", "agent_hooks", *args], self.env)

    def client(self, ops: list[dict[str, Any]]) -> list[Any]:
        proc = self.user.run([self.user.python, "-c", CLIENT, str(self.port), str(self.store)], self.env,
                             json.dumps(ops))
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)  # type: ignore[no-any-return]

    def status(self) -> dict[str, Any]:
        [answer] = self.client([{"get": "/status"}])
        assert answer["status"] == 200, answer
        return answer["body"]  # type: ignore[no-any-return]

    def log(self) -> str:
        path = self.base / "state" / "agent-hooks" / "logs" / "server.log"
        return path.read_text() if path.exists() else ""

    def doctor(self) -> dict[str, Any]:
        proc = self.agent_hook("doctor", "--json", "--no-run")
        return json.loads(proc.stdout)  # type: ignore[no-any-return]


@contextmanager
def _server(read_only: str) -> Iterator[Setup]:
    """The other user's store, read-only when its server starts: the "file", or the "file and directory".
    A new store: no -wal or -shm yet, the server's first connection makes them with the store's mode."""
    user = ordinary_user()
    # Not under tmp_path: pytest's base directory is 0700, and the other user must reach this one.
    base = Path(tempfile.mkdtemp(prefix="agent-hooks-ro-start-"))
    base.chmod(0o755)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
    # XDG directories, so that the store's directory holds only the store and the server's lock: the
    # spool and the logs live elsewhere, as they do by default (the spool must stay writable).
    env.update({"HOME": str(base / "home"), "XDG_DATA_HOME": str(base / "data"),
                "XDG_STATE_HOME": str(base / "state"), "XDG_CONFIG_HOME": str(base / "config"),
                "AGENT_HOOKS__SERVE__PORT": str(port), "AGENT_HOOKS__SERVE__START_TIMEOUT_S": "60",
                "AGENT_HOOKS__FORWARD__ENABLED": "false", "AGENT_HOOKS__APPROVALS__WAIT_S": "0"})
    if user.pythonpath:
        env["PYTHONPATH"] = user.pythonpath
    for name in ("home", "data", "state", "config"):
        (base / name).mkdir()
        os.chown(base / name, user.uid, user.gid)
    setup = Setup(user, base, env, base / "data" / "agent-hooks", port)
    try:
        init = setup.agent_hook("init")
        assert init.returncode == 0, init.stderr
        assert not Path(f"{setup.store}-wal").exists() and not Path(f"{setup.store}-shm").exists()
        setup.store.chmod(0o444)
        if read_only == "file and directory":
            # The server's lock lives beside the store: a server that ran here before left it.
            lock = setup.data / "server.lock"
            lock.touch(0o600)
            os.chown(lock, user.uid, user.gid)
            setup.data.chmod(0o555)
        started = setup.agent_hook("server", "start")
        assert started.returncode == 0, started.stdout + started.stderr + setup.log()
        yield setup
    finally:
        setup.data.chmod(0o700)
        _stop(setup)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["file", "file and directory"])
def read_only_at_start(request: pytest.FixtureRequest) -> Iterator[Setup]:
    """The server started as the other user on a store that is read-only as ``request.param`` says."""
    with _server(request.param) as setup:
        yield setup


def _stop(setup: Setup) -> None:
    """Stop the server by its pid (with the directory read-only at its start it could not write
    server.json, which `server stop` reads)."""
    try:
        pid = setup.status()["pid"]
    except Exception:  # noqa: BLE001 - it never started, or is gone already
        return
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def _calls(prefix: str, n: int) -> list[dict[str, Any]]:
    """Hook calls of one session over http: its prompt, then tool calls before and after."""
    pre = dict(fixture_payload("PreToolUse-Bash.json"), session_id=SESSION)
    post = dict(fixture_payload("PostToolUse-Bash.json"), session_id=SESSION)
    ops: list[dict[str, Any]] = []
    for i in range(n):
        tool_use_id = f"toolu_{prefix}_{i}"
        ops.append({"post": "/hooks/PreToolUse", "body": dict(pre, tool_use_id=tool_use_id)})
        ops.append({"post": "/hooks/PostToolUse", "body": dict(post, tool_use_id=tool_use_id)})
    return ops


PANEL = f"/api/board/sessions/{SESSION}"


def test_a_store_read_only_at_start_recovers_without_a_restart(read_only_at_start: Setup) -> None:
    setup = read_only_at_start
    prompt = dict(fixture_payload("UserPromptSubmit.json"), session_id=SESSION)
    during = [{"post": "/hooks/UserPromptSubmit", "body": prompt}, *_calls("during", 5)]
    # The board's session panel reads the store between the calls, and last: as it does every few seconds.
    ops: list[dict[str, Any]] = []
    for op in during:
        ops += [op, {"get": PANEL}]
    answers = setup.client(ops)
    hooks, panel = answers[0::2], answers[1::2]
    for answer in hooks:
        assert answer["status"] == 200 and "spooled" in (answer["problem"] or ""), answer
    for answer in panel:
        # Nothing of the session is in the store yet (404), or the store cannot even be opened (503): never a 500.
        assert answer["status"] in (404, 503), answer
    state = setup.status()["store_state"]
    assert state["writable"] is False and state["spooled"] == len(during), state

    # Doctor shows the outage while it lasts: the server cannot write its store, calls are being spooled.
    [line] = [c for c in setup.doctor()["checks"] if c["area"] == "server" and "cannot write" in c["summary"]]
    assert line["status"] == "fail" and f"{len(during)} hook call(s) spooled" in line["summary"], line
    [recorded] = setup.client([{"sql": "SELECT count(*) FROM tool_calls"}])
    assert recorded == [[0]] or "error" in recorded, recorded

    setup.data.chmod(0o700)
    setup.store.chmod(0o600)
    [took] = setup.client([{"until_writable": 10.0, "reading": PANEL}])
    assert took is not None, f"the store stayed unwritable for the server: {setup.status()['store_state']}\n{setup.log()}"

    after = _calls("after", 2)
    for answer in setup.client(after):
        assert answer["status"] == 200 and answer["problem"] is None, answer
    [rows, sessions] = setup.client([
        {"sql": "SELECT tool_use_id, count(*) FROM tool_calls GROUP BY tool_use_id ORDER BY tool_use_id"},
        {"sql": f"SELECT count(*) FROM sessions WHERE session_id = '{SESSION}'"}])
    expected = sorted(f"toolu_{p}_{i}" for p, n in (("during", 5), ("after", 2)) for i in range(n))
    assert rows == [[t, 1] for t in expected], rows  # each call once: the replayed ones and the later ones
    assert sessions == [[1]]
    state = setup.status()["store_state"]
    assert state == {**state, "writable": True, "outages": 1, "replayed": len(during)}, state
    [page] = setup.client([{"get": PANEL}])
    assert page["status"] == 200 and page["body"]["card"]["id"] == SESSION, page
    assert page["body"]["tool_calls"] and all(c["outcome"] for c in page["body"]["tool_calls"]), page
    assert not [c for c in setup.doctor()["checks"] if c["area"] == "server" and "cannot write" in c["summary"]]
    log = setup.log()
    assert log.count("store not writable") == 1 and log.count("store writable again") == 1, log
    assert "Traceback" not in log, log

