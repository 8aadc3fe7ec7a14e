"""The server's life: run in the foreground, start in the background, stop, status.

One server per store: ``run`` holds an flock on ``server.lock`` beside the
store for as long as it lives, and writes ``server.json`` (pid, port, version,
build) beside it. ``start`` is idempotent: a server that answers with the
current build is left alone; a stale one (older build) is replaced.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import time
from collections.abc import Mapping
from typing import Any

from agent_hooks.paths import Paths, ensure_dir
from agent_hooks.server import local, peer


class ServerError(Exception):
    """The server cannot be started, reached or stopped; the message says why."""


def _hold_lock(paths: Paths) -> int:
    """The flock that makes this process the store's one server; ServerError when taken."""
    ensure_dir(paths.data_dir)
    fd = os.open(local.lock_file(paths), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        info = local.read_info(paths) or {}
        raise ServerError(f"a server already runs for {paths.store}"
                          f" (pid {info.get('pid', '?')}, port {info.get('port', '?')})") from None
    return fd


def _take_over(paths: Paths, timeout: float, port: int) -> int:
    """The lock, after stopping a server of another build or port that holds it (``--replace``)."""
    from agent_hooks.server.local import build_id

    build = build_id()
    end = time.monotonic() + timeout
    signalled: set[int] = set()
    while True:
        try:
            return _hold_lock(paths)
        except ServerError:
            info = local.read_info(paths) or {}
            if info.get("build") == build and info.get("port") == port:
                raise ServerError("the current build already serves this store on this port") from None
            pid = info.get("pid")
            if isinstance(pid, int) and pid not in signalled:
                signalled.add(pid)
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def lock_held(paths: Paths) -> bool:
    """True while some process holds the store's server lock."""
    try:
        fd = os.open(local.lock_file(paths), os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def listen_host(paths: Paths, config: dict[str, Any], env: Mapping[str, str]) -> str:
    """Where to listen: 127.0.0.1, unless ``[fleet] listen = "0.0.0.0"`` says to serve other hosts too
    (the command center, docs/command-center.md), which needs a fleet token for them to present."""
    from agent_hooks import fleet

    listen = str(config["fleet"]["listen"] or "") or local.HOST
    if listen == local.HOST:
        return listen
    if listen != "0.0.0.0":
        raise ServerError(f"[fleet] listen must be \"\" (127.0.0.1) or \"0.0.0.0\", got {listen!r}")
    if not fleet.token(paths, config, env):
        raise ServerError("[fleet] listen = \"0.0.0.0\" serves other hosts: set a fleet token first"
                          " (agent-hook fleet token --new)")
    return listen


def _bind(port: int, host: str = local.HOST) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ServerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}"
                          " (set [serve] port or AGENT_HOOKS__SERVE__PORT)") from None
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def run(paths: Paths, config: dict[str, Any], env: Mapping[str, str], log_file: bool = False,
        replace: bool = False) -> None:
    """Serve until SIGTERM/SIGINT (``agent-hook server run``): this process holds the lock and the
    listening socket and supervises a worker that serves on it (:mod:`agent_hooks.server.supervisor`,
    :mod:`agent_hooks.server.worker`).

    ``replace``: a server of another build holding the lock is stopped first.
    """
    from agent_hooks.server import supervisor

    os.umask(0o077)
    port = int(config["serve"]["port"])
    lock = _take_over(paths, float(config["serve"]["start_timeout_s"]), port) if replace else _hold_lock(paths)
    sock = _bind(port, listen_host(paths, config, env))
    if log_file:
        from agent_hooks.server.logfile import log_to_file  # only a detached server logs to a file

        log_to_file(paths, config)
    supervisor.raise_fd_limit()
    _note_unclean_end(paths, config)
    try:
        supervisor.Supervisor(paths, config, env, sock, port).run()
    finally:
        sock.close()
        os.close(lock)


def _note_unclean_end(paths: Paths, config: dict[str, Any]) -> None:
    """A server file left by a dead pid means the last server died without stopping:
    tool calls ran unguarded from then until now. Say so where doctor looks."""
    from agent_hooks.dispatch import count_error, log_error

    info = local.read_info(paths)
    pid = info.get("pid") if info else None
    if info is None or not isinstance(pid, int) or pid <= 0 or pid == os.getpid() or _alive(pid):
        return
    started = info.get("started")
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)) if isinstance(started, (int, float)) else "?"
    message = (f"the previous server (pid {info.get('pid')}, started {when}) died without stopping;"
               " http hooks did not run until this start")
    log_error(paths, "server", "server", message)
    count_error(paths, config, "server", "server", message, None)


def _served_by_us(sock: socket.socket) -> bool:
    """Whether the process that accepted this connection runs as our user, as the kernel says:
    another user's program on our port is not our server, whatever its /health claims.
    (Where the kernel cannot tell, as off Linux, the answer's contents decide, as before.)"""
    here, there = sock.getsockname(), sock.getpeername()
    uid = peer.peer_uid((there[0], int(there[1])), (here[0], int(here[1])))
    return uid is None or uid == os.geteuid()


def fetch(port: int, path: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """GET a JSON route of the server on ``port``; None when nothing (of ours) answers.

    One HTTP/1.0 request on a plain socket, read to its end: http.client's imports (ssl,
    email) cost every `agent-hook server status|start|stop` about 20 ms of CPU, for a
    loopback answer of a few hundred bytes.
    """
    try:
        with socket.create_connection((local.HOST, port), timeout=timeout) as sock:
            if not _served_by_us(sock):
                return None
            sock.sendall(f"GET {path} HTTP/1.0\r\nHost: {local.HOST}:{port}\r\n"
                         "Connection: close\r\n\r\n".encode("ascii"))
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        head, sep, body = b"".join(chunks).partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0].split()
        if not sep or len(status) < 2 or status[1] != b"200":
            return None
        doc = json.loads(body)
        return doc if isinstance(doc, dict) else None
    except (OSError, ValueError):
        return None


def health(paths: Paths, config: dict[str, Any]) -> dict[str, Any] | None:
    """The running server's /health for this store, or None when it does not answer."""
    info = local.read_info(paths) or {}
    port = int(info.get("port") or config["serve"]["port"])
    doc = fetch(port, "/health", timeout=1.0)
    if doc is None or doc.get("service") != "agent-hooks" or doc.get("store") != paths.store:
        return None
    return doc


def spawn(env: Mapping[str, str], replace: bool = False) -> int:
    """Start a background server (see local.spawn); its pid."""
    return local.spawn(env, replace)


def wait_up(paths: Paths, config: dict[str, Any], pid: int | None, timeout: float) -> dict[str, Any] | None:
    """Poll /health until a server of the current build answers (or ``pid`` exits)."""
    build = local.build_id()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        doc = health(paths, config)
        if doc is not None and doc.get("build") == build:
            return doc
        if pid is not None:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = 0 if _alive(pid) else pid
            if done:
                return health(paths, config) if lock_held(paths) else None
        time.sleep(0.05)
    return None


def _alive(pid: int) -> bool:
    return local.pid_alive(pid)


def start(paths: Paths, config: dict[str, Any], env: Mapping[str, str]) -> tuple[dict[str, Any], str]:
    """Make sure the current build serves this store; (its /health, what was done).

    What was done: "running" (left alone), "started", or "replaced" (a stale build).
    """
    doc = health(paths, config)
    build = local.build_id()
    if doc is not None and doc.get("build") == build and doc.get("port") == int(config["serve"]["port"]):
        return doc, "running"
    done = "started"
    if doc is not None or lock_held(paths):
        stop(paths, config)
        done = "replaced"
    log = local.log_file(paths)
    try:
        offset = os.path.getsize(log)
    except OSError:
        offset = 0
    pid = spawn(env)
    doc = wait_up(paths, config, pid, float(config["serve"]["start_timeout_s"]))
    if doc is None:
        said = _said_at_start(log, offset)
        if said:  # it exited (a port in use, a lock held): say why here, not only in the log
            raise ServerError(f"the server did not start: {said} (see {log})")
        raise ServerError(f"the server did not answer within {config['serve']['start_timeout_s']} s;"
                          f" see {log}")
    return doc, done


def _said_at_start(log: str, offset: int) -> str | None:
    """The last reason a server just spawned gave for exiting (its stderr is the log), if any."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            text = f.read(256 * 1024).decode("utf-8", "replace")
    except OSError:
        return None
    said = [line.split("agent-hooks server:", 1)[1].strip() for line in text.splitlines()
            if "agent-hooks server:" in line and "configuration:" not in line]
    return said[-1] if said else None


def stop(paths: Paths, config: dict[str, Any], timeout: float = 10.0) -> int | None:
    """Stop this store's server (SIGTERM, then SIGKILL); the pid stopped, or None if none ran."""
    if not lock_held(paths):
        return None
    # A server that holds the lock writes its file right after binding: wait for it briefly.
    end = time.monotonic() + timeout
    info = local.read_info(paths) or {}
    while not isinstance(info.get("pid"), int) and time.monotonic() < end and lock_held(paths):
        time.sleep(0.05)
        info = local.read_info(paths) or {}
    pid = info.get("pid")
    if not isinstance(pid, int):
        return None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return None
    end = time.monotonic() + timeout
    while time.monotonic() < end and lock_held(paths):
        time.sleep(0.05)
    if lock_held(paths):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while lock_held(paths) and time.monotonic() < end + 5:
            time.sleep(0.05)
    return pid


def status(paths: Paths, config: dict[str, Any]) -> dict[str, Any]:
    """What `server status` shows: up or not, stale or not, and the server's own numbers."""
    info = local.read_info(paths) or {}
    port = int(info.get("port") or config["serve"]["port"])
    doc = health(paths, config)
    out: dict[str, Any] = {"up": doc is not None, "port": port, "store": paths.store,
                           "installed_build": local.build_id()}
    if doc is None:
        out["locked"] = lock_held(paths)
        return out
    stats = fetch(port, "/status") or {}
    # Read again now that a worker answered: the supervisor writes the file before it forks a
    # worker, so this copy already counts the restart that brought the answering worker.
    info = local.read_info(paths) or info
    out.update({k: doc.get(k) for k in ("pid", "worker_pid", "version", "build", "uptime_s", "started")})
    # Workers the supervisor replaced, with their causes (server/supervisor.py writes them).
    if info.get("pid") == doc.get("pid"):
        # The server's age is the supervisor's; the worker's own start is kept beside it.
        out["worker_started"] = doc.get("started")
        if isinstance(info.get("started"), (int, float)):
            out["started"] = info["started"]
            out["uptime_s"] = round(time.time() - info["started"], 3)
        out["restarts"] = int(info.get("restarts") or 0)
        out["last_restarts"] = list(info.get("last_restarts") or [])
    out["stale"] = doc.get("build") != out["installed_build"]
    out["requests"] = stats.get("counts", {})
    # Calls that failed open: bad input or an internal error, or past the deadline.
    out["errors"] = sum(out["requests"].get(k, 0) for k in ("problem", "timeout"))
    out["p50_ms"] = stats.get("p50_ms")
    out["p99_ms"] = stats.get("p99_ms")
    out["store_state"] = stats.get("store_state")  # writable, or why not and what was spooled (recovery.py)
    out["fleet_store"] = stats.get("fleet_store")  # the command center's: SQLite, or PostgreSQL and its listener
    out["openclaw"] = stats.get("openclaw")  # the gateway's connection, when [openclaw] url is set
    out["centers"] = stats.get("centers")  # the command centers this host talks to, and the current one
    # How fast it answers right now, from here: one /health round trip.
    t0 = time.perf_counter()
    fetch(port, "/health")
    out["probe_ms"] = round((time.perf_counter() - t0) * 1000, 3)
    return out
