"""SubagentStart: a subagent was spawned; record it on its session."""

from __future__ import annotations

from agent_hooks.features import sessions, subagents
from agent_hooks.forward import forward
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "SubagentStart"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started)
        sessions.log_event(conn, p, ctx.started, p.get("agent_type") or p.get("agent_id"))
        subagents.started(conn, p, ctx.started)
        forward(conn, ctx)
    return out


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
