"""Stop: the turn is over; the session now awaits input. Session summary, cleanup."""

from __future__ import annotations

from agent_hooks.features import cleanup, identity, lineage, memory, sessions, summary
from agent_hooks.features.isolate import isolated
from agent_hooks.forward import forward
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "Stop"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    # File work first, outside the transaction: the store's write lock is shared by every agent.
    digest = summary.prepare(p, ctx.env, ctx.config)  # capped transcript read
    walked = memory.before_stop(ctx)  # stats of the memory directories
    parent = lineage.prepare(ctx.store.conn, p, ctx.env, ctx.config)  # a fork's parent, once
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started, state=sessions.AWAITING)
        sessions.log_event(conn, p, ctx.started)
        lineage.record(conn, p, parent, ctx.started)
        summary.record(conn, p, digest, ctx.config, ctx.started)
        isolated(conn, ctx, "identity", identity.final_sync, conn, ctx)
        isolated(conn, ctx, "memory", memory.on_stop, conn, ctx, walked)
        forward(conn, ctx)
    # Detached workers (only when configured): the hook never waits for them.
    summary.after_stop(p, ctx.env, ctx.config)
    cleanup.after_stop(p, ctx.env, ctx.config)
    return out


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
