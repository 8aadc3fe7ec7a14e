"""SubagentStop: a subagent finished; record it and what its transcript cost, under its parent (it is never
held: its task is the parent's)."""

from __future__ import annotations

from agent_hooks.features import cost, sessions, subagents
from agent_hooks.forward import forward
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "SubagentStop"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    # The subagent's own transcript, counted under its parent session.
    spent = cost.prepare(ctx, p.get("agent_transcript_path") or "", p.get("agent_id") or None)
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started)
        sessions.log_event(conn, p, ctx.started, p.get("agent_type") or p.get("agent_id"))
        subagents.stopped(conn, p, ctx.started)
        cost.apply(conn, ctx, spent)
        forward(conn, ctx)
    return out


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
