"""Notification: Claude Code wants the user's attention; record it.

``permission_prompt``: the session needs input (the tool asked about is kept);
``idle_prompt``: it is awaiting a prompt (features/waiting.py).
"""

from __future__ import annotations

from agent_hooks.features import sessions, waiting
from agent_hooks.forward import forward
from agent_hooks.handlers import hook as user_handlers
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "Notification"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started)
        sessions.log_event(conn, p, ctx.started, p.get("notification_type"))
        wait = waiting.from_notification(p)
        if wait is not None:
            waiting.mark(conn, p.session_id, wait[0], wait[1], ctx.started)
        forward(conn, ctx)
    user_handlers.apply(ctx, EVENT, out)  # user handlers, after the built-ins (docs/handlers.md)
    return out


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
