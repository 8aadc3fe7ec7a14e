"""Elicitation: an MCP server asks the person for input; the session needs input until it is answered.

A fleet operator sees it as they see a permission dialog (features/waiting.py):
the session is ``needs_input``, the detail names the server and its question.
Observer only: it never answers the elicitation (no output), so the person does.
ElicitationResult, the next tool call or the next prompt clears the state.
"""

from __future__ import annotations

from agent_hooks.features import sessions, waiting
from agent_hooks.forward import forward
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "Elicitation"


def handle(ctx: Context) -> Outcome:
    p = ctx.payload
    asked = waiting.elicitation_asked(p)
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started)
        sessions.log_event(conn, p, ctx.started, asked)
        waiting.mark(conn, p.session_id, waiting.NEEDS_INPUT, asked, ctx.started)
        forward(conn, ctx)
    return Outcome()


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
