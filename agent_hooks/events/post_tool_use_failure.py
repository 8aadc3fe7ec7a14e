"""PostToolUseFailure: close the call's record as failed, with its error."""

from __future__ import annotations

from agent_hooks.features import sessions, toolcalls
from agent_hooks.forward import forward
from agent_hooks.handlers import hook as user_handlers
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "PostToolUseFailure"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    output_hash = toolcalls.output_digest(p, ok=False)
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started, state=sessions.LIVE)
        toolcalls.finish(conn, p, ctx.started, ctx.config, ok=False, output_hash=output_hash)
        sessions.withdraw_dialogs(conn, p.session_id, ctx.started, "answered at the terminal: the tool ran and failed",
                                  p.tool_name, sessions.subagent_of(p))
        forward(conn, ctx)
    user_handlers.apply(ctx, EVENT, out)  # user handlers, after the built-ins (docs/handlers.md)
    return out


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
