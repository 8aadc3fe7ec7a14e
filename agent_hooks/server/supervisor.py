"""The server's first process: it holds the lock and the listening socket, and a worker serves.

A worker that dies (a crash, an out-of-memory kill, a ``kill -9``) is replaced
at once by a new one on the same socket. The socket stays open in this
process, so connections that arrive meanwhile wait in its backlog (up to
1,024) instead of being refused; only the calls the dead worker was answering
are cut off. A worker that dies again within a second of its start is
restarted after a pause that doubles from 50 ms up to one second, so a worker
that cannot start does not spin.

The modules a worker needs are imported here, before the first fork: a new
worker starts serving in milliseconds, not the 200 ms an import takes.

``server.json`` (written here, 0600) names this process's pid (the one
``agent-hook server stop`` signals), the worker's, and the restarts with their
causes; ``agent-hook server status`` shows them. Each restart is also a line
in the error log (kind ``server``), which doctor shows as a gap.

SIGTERM, SIGINT or SIGHUP here: the worker gets SIGTERM and finishes what it
is answering; then this process removes ``server.json`` and exits. If this
process is killed, the kernel kills the worker (PR_SET_PDEATHSIG) and the lock
is released with both.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

from agent_hooks.paths import Paths
from agent_hooks.server import local

# Restarts listed in server.json (the newest); the count covers them all.
RESTARTS_KEPT = 20
# A worker that dies sooner than this after its start counts as a quick death (crash loop).
QUICK_DEATH_S = 1.0
FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 1.0
_PR_SET_PDEATHSIG = 1

log = logging.getLogger("agent_hooks.server.supervisor")


def raise_fd_limit(want: int = 65536) -> None:
    """The soft limit on open files raised towards the hard one: each connection is a descriptor,
    and the per-caller cap (conns.py) is only a defence while the total stays under the limit."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ImportError, ValueError, OSError):
        pass


def _die_with_parent() -> None:
    """Ask the kernel to kill this process when its parent (the supervisor) dies (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def describe(status: int) -> dict[str, Any]:
    """A wait status as data: {"exit_code": n} or {"signal": n, "signal_name": "SIGKILL"}, and a phrase."""
    if os.WIFSIGNALED(status):
        num = os.WTERMSIG(status)
        try:
            name = signal.Signals(num).name
        except ValueError:
            name = f"signal {num}"
        return {"signal": num, "signal_name": name, "cause": f"killed by {name}"}
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return {"exit_code": code, "cause": f"exited with code {code}"}


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class Supervisor:
    """Forks workers onto ``sock`` until told to stop (see module docstring)."""

    def __init__(self, paths: Paths, config: dict[str, Any], env: Mapping[str, str], sock: socket.socket,
                 port: int) -> None:
        self.paths = paths
        self.config = config
        self.env = env
        self.sock = sock
        self.port = port
        self.pid = os.getpid()
        self.started = time.time()
        self.build = local.build_id()
        self.worker: int | None = None
        self.worker_started = 0.0
        self.stopping = False
        self.restart_count = 0
        self.restarts: list[dict[str, Any]] = []

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> None:
        """Supervise until SIGTERM/SIGINT/SIGHUP; server.json is removed on the way out."""
        self._preload()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_stop_signal)
        try:
            quick = 0
            note: dict[str, Any] | None = None
            while not self.stopping:
                self.worker = self._fork()
                self.worker_started = time.monotonic()
                if self.stopping:  # a signal between the fork and here found no worker to pass on to
                    self._signal_worker(signal.SIGTERM)
                self._write_info()
                if note is not None:
                    self._note_restart(note)
                    note = None
                status = self._wait(self.worker)
                lived = time.monotonic() - self.worker_started
                dead, self.worker = self.worker, None
                if self.stopping:
                    break
                quick = quick + 1 if lived < QUICK_DEATH_S else 0
                pause = min(MAX_PAUSE_S, FIRST_PAUSE_S * 2 ** (quick - 1)) if quick else 0.0
                note = {"at": time.time(), "pid": dead, "uptime_s": round(lived, 3), **describe(status),
                        "pause_s": pause}
                self.restart_count += 1
                self.restarts = (self.restarts + [note])[-RESTARTS_KEPT:]
                self._write_info()  # before the next fork: whoever its worker answers already sees this restart
                log.warning("worker pid %s %s after %.1f s; starting another%s", dead, note["cause"], lived,
                            f" in {pause * 1000:.0f} ms (it died quickly)" if pause else "")
                end = time.monotonic() + pause
                while not self.stopping and time.monotonic() < end:
                    time.sleep(min(0.05, end - time.monotonic()))
        finally:
            self._forget()

    def _preload(self) -> None:
        """Import what a worker runs now, once: every fork then starts with it loaded."""
        import uvicorn  # noqa: F401
        import uvicorn.lifespan.on  # noqa: F401
        import uvicorn.loops.uvloop  # noqa: F401
        import uvicorn.protocols.http.httptools_impl  # noqa: F401
        import uvicorn.protocols.websockets.auto  # noqa: F401

        from agent_hooks.server import app, conns, worker  # noqa: F401

        for name in app.ROUTE_MODULES:
            importlib.import_module(name)
        if self.config["forward"]["url"]:
            # The command center's client (center/report.py, control.py import it when they run):
            # ~25 ms, paid here once only when there is a command center to reach.
            import httpx  # noqa: F401
        # Building the app once imports what its routes import lazily (every event's handler: 70 ms).
        # Nothing starts here: threads and connections come with the lifespan, in the worker.
        app.create_app(self.paths, self.config, self.env, port=self.port)
        # What is loaded now lives as long as the server: frozen out of the collector's way before the
        # fork, so a worker's first full collection (hooks.startup) does not walk, and copy, all of it.
        import gc
        import threading

        gc.collect()
        gc.freeze()
        if threading.active_count() > 1:  # a fork copies only this thread: a worker must not need another
            log.warning("%d threads run in the supervisor before the first fork", threading.active_count())

    def _fork(self) -> int:
        pid = os.fork()
        if pid:
            return pid
        code = 1
        try:
            # The supervisor's handlers stay with it: uvicorn sets its own, and re-raises the signal
            # at its end, which must then end this process.
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            # Its own process group: a Ctrl-C at `server run` reaches the supervisor alone, which
            # passes on one SIGTERM (two signals would make uvicorn skip its graceful shutdown).
            try:
                os.setpgid(0, 0)
            except OSError:
                pass
            _die_with_parent()
            if os.getppid() != self.pid:  # the supervisor died before the request above
                os._exit(0)
            from agent_hooks.server import worker

            worker.serve_worker(self.paths, self.config, self.env, self.sock, self.port, self.pid)
            code = 0
        except BaseException:  # noqa: BLE001 - a worker never returns into the supervisor's loop
            import traceback

            traceback.print_exc()
        finally:
            try:
                logging.shutdown()
                sys.stderr.flush()
            finally:
                os._exit(code)
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, pid: int) -> int:
        while True:
            try:
                _, status = os.waitpid(pid, 0)  # retried after a signal handler returns (PEP 475)
                return status
            except ChildProcessError:
                return 0
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                continue

    # -- signals --------------------------------------------------------------------------------
    def _on_stop_signal(self, signum: int, frame: Any) -> None:
        self.stopping = True
        self._signal_worker(signal.SIGTERM)

    def _signal_worker(self, sig: int) -> None:
        if self.worker:
            try:
                os.kill(self.worker, sig)
            except ProcessLookupError:
                pass

    # -- what others read -----------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """What server.json holds: who we are, and what happened to our workers."""
        return {
            "pid": self.pid,
            "worker_pid": self.worker,
            "port": self.port,
            "version": _version(),
            "build": self.build,
            "started": self.started,
            "store": self.paths.store,
            "restarts": self.restart_count,
            "last_restarts": self.restarts,
        }

    def _write_info(self) -> None:
        path = local.server_file(self.paths)
        tmp = f"{path}.{self.pid}.tmp"
        try:
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
                json.dump(self.info(), f)
            os.replace(tmp, path)
        except OSError as exc:
            log.error("could not write %s: %s", path, exc)

    def _forget(self) -> None:
        if (local.read_info(self.paths) or {}).get("pid") == self.pid:
            try:
                os.unlink(local.server_file(self.paths))
            except OSError:
                pass

    def _note_restart(self, note: dict[str, Any]) -> None:
        """The restart in the error log and the errors table (doctor: a gap), once the new worker runs."""
        from agent_hooks.dispatch import count_error, log_error

        message = (f"the server's worker (pid {note['pid']}) {note['cause']} at {_iso(note['at'])} after"
                   f" {note['uptime_s']:.1f} s; another (pid {self.worker}) took over the listening socket."
                   " Calls it was answering were cut off; new ones waited in the backlog")
        log_error(self.paths, "server", "server", message, config=self.config)
        count_error(self.paths, self.config, "server", "server", message, None, busy_timeout_ms=250)


def _version() -> str:
    from agent_hooks import __version__

    return __version__
