"""The command center: every host's sessions on one board, and the person's answers sent back to them.

It runs inside the resident server (agent_hooks.server): each module here that
serves routes is named in ``server.app.ROUTE_MODULES``. Modules:

* ``hub.py``: the writer thread that owns the center's store connection (every
  write runs there, in order) and ``/api/live``, the WebSocket that pushes
  every changed card to the boards.
* ``fleetstore.py``: the fleet store's two backends behind one interface: the host's SQLite
  store (one process), or PostgreSQL (``[center] database``, several processes, woken by
  LISTEN/NOTIFY); a thin adapter runs the center's SQL on either, and migrations for both come
  from the same named list.
* ``fleetdb.py``: the center's tables (fleet sessions, events, controls) as
  plain functions over one connection; ``contract.py``: the ingest contract's
  states, events and validation, pure; ``numbers.py``: the range of every
  number a caller sends, checked on the way in and dropped on the way out.
* ``ingest.py``: ``/api/hooks/ingest`` and ``/api/hooks/sessions``, the
  contract's endpoints that every host's drainer posts to.
* ``report.py``: a host sends the center its own cards (agent, task, state,
  tool) and its pending requests; the center keeps them as each card's details.
* ``cards.py`` and ``burn.py``: what a card shows, its spend over time.
* ``ledger.py``, ``spend.py`` and ``windows.py``: the fleet's cost: every host's priced messages in
  one ledger (``/api/fleet/cost``), its totals, 5-hour windows, weeks and forecasts, budgets that
  hold on every host (carried down the control long poll), and alerts when one is crossed.
* ``board.py`` and ``static/``: the board at ``/`` (plain files, no build).
* ``control.py``: cancel, uncancel, reply and launch across hosts: a control row per
  host, the hosts' long poll (``/api/fleet/controls``), and the host side of it,
  :class:`~agent_hooks.center.control.Subscriber`.
* ``launcher.py``: ``POST /api/sessions``, a session started on any host from here (its card at once,
  ``starting``); ``launch.py``: what a host runs for it, from its own ``[launch]`` settings (roots,
  client, permission modes), in a new ``agent-`` tmux session; ``spawn.py``: the pane's first process,
  which becomes the client.
* ``reply.py``: typing a reply into a session's tmux pane, on its own host;
  ``foreground.py``: whether what runs in that pane's foreground is the Claude Code client.
* ``approvals.py``: ``/api/approvals``, list and answer requests for a person.
* ``relay.py``: requests carried up to the center and answers carried down.
* ``credentials.py`` and ``pairing.py``: a host or a person's browser paired
  once with a one-time code (``agent-hook fleet pair``, ``fleet join``,
  ``/pair``), each with its own revocable credential; server/access.py takes
  who the caller is from it. ``fleet_actions`` records who answered, replied
  and cancelled.
* ``limits.py``: what the center keeps of other hosts (hosts, cards and
  requests per host, rows in all), and what it left out.
* ``channels.py``: agents reached through a client of their own (the OpenClaw
  gateway registers one): the center asks each first about an answer or a cancel.
* ``checks.py``: doctor's lines for the board and the subscription.

An answer's path, from the board to the hook that waits on another host::

    board: Allow  -> POST /api/approvals/<id>                     (approvals.py)
      an OpenClaw request?  -> its gateway answers it             (agent_hooks.openclaw)
      another host's?       -> an ``approval`` control row for it (relay.route, fleetdb)
    that host's Subscriber, long-polling /api/fleet/controls      (control.py)
      -> apply_controls: the host's own row answered, in the transaction that
         moves its cursor; the first answer wins there           (relay.answer_control,
                                                                  features/approvals.answer)
      -> the held http hook wakes, or the command hook's poll sees the row, and
         the client gets its answer                               (server/held.py)
      -> POST /api/fleet/replies: what became of it               (control.py)
    the center's caller gets the host's word: 200, 409 already answered, or 202.

A request travels up the other way: the host's hook writes a pending row
(features/approvals), its server reports it within about 100 ms (report.py,
relay.host_rows), and the center lists it beside its own (relay.pending).
"""
