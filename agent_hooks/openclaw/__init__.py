"""OpenClaw agents on the board: the resident server as an operator client of an OpenClaw gateway.

This ``__init__`` imports nothing, and neither does ``settings.py`` beyond the
standard library: doctor, the CLI and the server's start-up read the
``[openclaw]`` settings without loading a WebSocket client. Modules:

* ``settings.py``: whether a gateway is configured, its token (never from
  config.toml), what is wrong with them.
* ``service.py``: the gateway's place in the server. Without ``[openclaw] url``
  it starts nothing; with it, it starts the client and answers for OpenClaw
  requests and cards: an answer goes to the gateway (``exec.approval.resolve``),
  a cancel aborts the run (``chat.abort``).
* ``gateway.py``: the WebSocket client (protocol 4), bounded and reconnecting.
* ``frames.py``: gateway frames to actions (pure parsing, no I/O).
* ``records.py``: actions to the command center's store (cards, events and
  approval requests), on the center's writer thread.

    gateway --frames--> gateway.py --actions (frames.py)--> records.py --> the center's store --> board
    board answer/cancel --> center --> service.py --> gateway.py --> gateway
"""
