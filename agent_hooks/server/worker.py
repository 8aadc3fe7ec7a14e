"""The server's worker: the app on the listening socket its supervisor holds (supervisor.py forks it).

Its own module, so that supervisor.py need not import process.py, which imports
the supervisor to run it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from agent_hooks.paths import Paths


def serve_worker(paths: Paths, config: dict[str, Any], env: Mapping[str, str], sock: socket.socket, port: int,
                 supervisor_pid: int) -> None:
    """The worker's life: the app on the inherited listening socket until SIGTERM (or its supervisor's end)."""
    import uvicorn

    from agent_hooks.server import conns
    from agent_hooks.server.app import create_app

    app = create_app(paths, config, env, port=port)
    state = app.state.server
    state.supervisor_pid = supervisor_pid
    guard = conns.ConnectionGuard(float(config["serve"]["request_timeout_s"]),
                                  int(config["serve"]["connections_per_uid"]),
                                  int(config["serve"]["connections_per_address"]), count=state.stats.count)
    logging.getLogger("agent_hooks.server").info(
        "serving %s on %s:%s (pid %s, worker %s, build %s); board at %s", paths.store, sock.getsockname()[0], port,
        supervisor_pid, os.getpid(), state.build, f"http://127.0.0.1:{port}/")
    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            state.stop_now()  # long polls answer now (ServerState.stop_listeners)

    server = Server(uvicorn.Config(
        app, loop="uvloop", http=conns.protocol_class(guard), lifespan="on", access_log=False,
        # Off: uvicorn would otherwise take the client address from X-Forwarded-For on loopback,
        # and the caller check (peer.py) would ask the kernel about a socket the caller names.
        proxy_headers=False, server_header=False,
        # conns.py closes a kept-alive connection that sends no whole request in request_timeout_s (the
        # client reconnects for its next call); uvicorn's own timer, reset by any byte, is only a backstop.
        timeout_keep_alive=int(guard.request_timeout_s) + 2,
        log_config=None, log_level="info", timeout_graceful_shutdown=5))
    # Held requests (server/held.py) answer their clients as soon as a stop is asked for.
    state.stop_requested = lambda: server.should_exit or server.force_exit
    _stop_when_uninstalled(supervisor_pid)
    server.run(sockets=[sock])


# How often a running server looks for its own installation (seconds).
INSTALL_WATCH_S = 2.0


def _stop_when_uninstalled(supervisor_pid: int, every: float = INSTALL_WATCH_S) -> None:
    """Stop the server (its supervisor, which stops this worker) once the package it runs from is deleted.

    Removing the plugin (``claude plugin uninstall``) deletes its environment
    but runs nothing of ours, and a server of a removed installation would
    answer on with code that no longer exists on disk. So a daemon thread
    checks, every ``every`` seconds, that this package's directory is still
    there, and when it is not, asks the supervisor to stop as SIGTERM does
    (the supervisor would otherwise start another worker from deleted code).
    """
    import agent_hooks

    marker = os.path.join(os.path.dirname(os.path.abspath(agent_hooks.__file__)), "__init__.py")

    def watch() -> None:
        while True:
            time.sleep(every)
            if not os.path.exists(marker):
                logging.getLogger("agent_hooks.server").warning(
                    "stopping: the installation this server runs from was removed (%s)", marker)
                try:
                    os.kill(supervisor_pid, signal.SIGTERM)
                except OSError:
                    pass
                return

    threading.Thread(target=watch, name="install-watch", daemon=True).start()
