"""PermissionRequest: a permission dialog is about to open; the session needs input.

Observer only: it never answers the dialog (no output), so the user's own
permission rules decide. The tool asked about is recorded; the next tool call
or prompt clears the state.
"""

from __future__ import annotations

from agent_hooks.features import sessions, waiting
from agent_hooks.forward import forward
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "PermissionRequest"


def handle(ctx: Context) -> Outcome:
    p = ctx.payload
    asked = waiting.tool_asked(p)
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
