"""SessionEnd: the session is over (Claude Code gives all SessionEnd hooks 1.5 s); the transcript's
last lines (a final answer Stop ran before the client wrote) are counted in its cost, and a fork
whose transcript was still unwritten at its Stop gets its parent now."""

from __future__ import annotations

from agent_hooks.features import cost, identity, lineage, sessions
from agent_hooks.features.isolate import isolated
from agent_hooks.forward import forward
from agent_hooks.handlers import hook as user_handlers
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "SessionEnd"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    spent = cost.prepare(ctx, subagents=True)
    parent = lineage.prepare(ctx.store.conn, p, ctx.env, ctx.config)  # a fork's parent, if Stop missed it
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started, state=sessions.ENDED)
        lineage.record(conn, p, parent, ctx.started)
        cost.apply(conn, ctx, spent)
        sessions.log_event(conn, p, ctx.started, p.get("reason"))
        sessions.withdraw_dialogs(conn, p.session_id, ctx.started, "the session ended")
        isolated(conn, ctx, "identity", identity.final_sync, conn, ctx, True)
        forward(conn, ctx)
    user_handlers.apply(ctx, EVENT, out)  # user handlers, after the built-ins (docs/handlers.md)
    return out


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
