"""One module per Claude Code event. Each reads like a table of what its hook does.

Every module has ``handle(ctx) -> Outcome`` (pure composition of features over
the store, in one short write transaction) and ``main(argv=None) -> int`` (the
console script, through :func:`agent_hooks.runner.run`).
"""
