"""PermissionDenied: a tool call was denied by the permission system; record it.

The dialog (if any) is closed, so the session no longer needs input: it is
working again (the model gets the denial and carries on).
"""

from __future__ import annotations

from agent_hooks.features import sessions, waiting
from agent_hooks.forward import forward
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "PermissionDenied"


def handle(ctx: Context) -> Outcome:
    p = ctx.payload
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started, state=sessions.LIVE)
        sessions.log_event(conn, p, ctx.started, waiting.tool_asked(p))
        sessions.withdraw_dialogs(conn, p.session_id, ctx.started, "denied by the permission system", p.tool_name,
                                  sessions.subagent_of(p))
        forward(conn, ctx)
    return Outcome()


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
