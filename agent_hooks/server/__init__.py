"""The resident server: Claude Code's http hooks, answered by the same handlers as the executables.

One process per store (docs/server.md). It also serves the command center
(agent_hooks.center) and, when configured, the OpenClaw gateway's client
(agent_hooks.openclaw): both are route modules the app is built from.

Its life, as processes:

* ``process.py``: run / start / stop / status, and the one-server-per-store lock.
* ``supervisor.py``: the first process; it holds the lock and the listening
  socket, and forks ``worker.py``, which serves, again and again if it dies.
* ``logfile.py``: server.log for a detached server.

A request, in the order it meets them:

* ``conns.py``: a connection must send a whole request in time, and each
  other user may hold only so many.
* ``fastpath.py``: the two hot routes as raw ASGI, ahead of Starlette, behind
  the front door of ``access.py`` (cross-site and rebinding requests refused,
  then who the caller is; ``peer.py`` asks the kernel for the caller's uid).
* ``app.py``: the one Starlette app, built from the route modules
  (:data:`app.ROUTE_MODULES`), and :class:`app.ServerState`, what they share.
* ``hooks.py``: ``POST /hooks/<Event>``, the http transport over
  agent_hooks.dispatch; ``held.py``: a call that asked for a person's answer
  is held there, on an event, until the answer is written.
* ``body.py``: the API routes' one bounded body reader; ``jsonout.py``: the JSON
  every answer (REST and WebSocket) is written as, strict: never ``Infinity``.
* ``meta.py``: ``/health`` and ``/status``.

Beside them:

* ``recovery.py``: a store the server cannot write: spool, retry, replay.
* ``embedding.py``: memory and summaries embedded on a thread of the server.
* ``local.py``: stdlib-only facts about the server (its files, a port probe,
  the build id, the session variables that travel as headers), for
  SessionStart and the CLI, which must not import Starlette.
* ``checks.py``: doctor's lines for the server.

This package's ``__init__`` imports nothing, so ``agent_hooks.server.local``
stays cheap for the hook executables.
"""
