"""PreCompact: record the compaction (trigger manual / auto); print the goal reminder."""

from __future__ import annotations

from agent_hooks.features import reminders, sessions
from agent_hooks.forward import forward
from agent_hooks.handlers import hook as user_handlers
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "PreCompact"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started)
        sessions.log_event(conn, p, ctx.started, p.get("trigger"))
        reminders.record_compaction(conn, p, ctx.started)
        forward(conn, ctx)
    # Plain stdout: the client appends it to the summarisation instructions.
    out.say(reminders.reminder(ctx.store.conn, p, ctx.env, ctx.config))
    user_handlers.apply(ctx, EVENT, out)  # user handlers, after the built-ins (docs/handlers.md)
    return out


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
