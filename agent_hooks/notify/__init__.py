"""Telling a person: notifications through Apprise and Web Push, from a durable outbox (docs/notifications.md).

* ``rules.py``: ``[[notify.channels]]`` parsed, checked and matched (kinds, host, agent, task); pure.
* ``text.py``: what a notification says (agent, host, task, tool, command clipped and masked) and its
  link to the board; pure.
* ``outbox.py``: the ``notify_outbox`` table: one row per subject and channel, its delivery state.
* ``send.py``: one send through Apprise or Web Push (both imported there, lazily).
* ``push.py``: the VAPID key pair (0600) and the devices subscribed from the board.
* ``service.py``: the resident server's notifier (fed by the command center's hub, sending on its own
  thread) and the Web Push routes.

Nothing here is imported by a hook: this package's ``__init__`` imports nothing.
"""
