"""ElicitationResult: the MCP server's question was answered (accept, decline or cancel); record it.

The question is closed, so the session no longer needs input: it is working again.
"""

from __future__ import annotations

from agent_hooks.features import sessions, waiting
from agent_hooks.forward import forward
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "ElicitationResult"


def handle(ctx: Context) -> Outcome:
    p = ctx.payload
    with ctx.store.write() as conn:
        # touch(state=LIVE) clears what the session waited on, as the next tool call would.
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started, state=sessions.LIVE)
        sessions.log_event(conn, p, ctx.started, waiting.elicitation_answered(p))
        forward(conn, ctx)
    return Outcome()


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
