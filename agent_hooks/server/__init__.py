"""The resident server: Claude Code's http hooks and the command center, in one process.

Layout (docs/server.md):

* ``app.py``: :func:`create_app` builds the one Starlette app from route
  modules (:data:`app.ROUTE_MODULES`); each module contributes ``routes(state)``.
* ``hooks.py``: ``POST /hooks``, the http transport over agent_hooks.dispatch.
* ``peer.py``: who is calling (the uid of the loopback connection).
* ``local.py``: stdlib-only facts about the server (its files, port probe,
  build id, the session variables that travel as headers) for SessionStart
  and the CLI, which must not import Starlette.
* ``process.py``: run / start / stop / status, the one-server-per-store lock.

This package's ``__init__`` imports nothing, so ``agent_hooks.server.local``
stays cheap for the hook executables.
"""
