"""Forwarding lifecycle events to the command center (ingest contract).

* ``eventmap``: hook event -> contract event and body (stdlib, hook path);
* ``outbox``: enqueue in the hook's own write transaction, start the drainer
  detached when none is alive (stdlib, hook path);
* ``urls``: loopback-only policy (stdlib);
* ``drain``: the drainer process (httpx + filelock), never imported by hooks.
"""
